"""The dense ranking: tool texts embedded in a background thread, cached on disk, searched by cosine.

``update`` (called by the search index on its own thread) only notes each provider's tool texts
and wakes the embedding thread; that thread embeds the texts it has no vector for (ordered by
their length in tokens, so that a batch carries little padding, in chunks shared by one embedding
thread per CPU at a lower priority than the event loop; what is embedded is published every few
seconds), and writes the vectors to a cache file keyed by a hash of each text, so a restart, a
reload or a provider listing the same tools again embeds nothing.
``rank`` embeds the query (one short forward pass; the last queries are remembered) and scores
it against the published matrix: tools not embedded yet are simply absent from this ranking
(the lexical one still finds them).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mcphost.search import Document

from . import model as minilm

log = logging.getLogger("mcphost.search.semantic")

#: Texts one embedding thread takes at a time (the model cuts them into batches of like length).
CHUNK = 256
#: Seconds between publications of the vectors made so far, while a catalog is being embedded.
PUBLISH_SECONDS = 2.0
#: Niceness of the embedding threads (Linux sets it per thread): the event loop's thread goes first.
NICENESS = 10
#: Queries whose vectors are remembered.
QUERY_CACHE = 256
#: Characters of a tool's description that are embedded (the model reads ``MAX_TOKENS`` of the text).
TEXT_CHARS = 400


#: Where a name in camelCase or with digits splits into words (``getPullRequests`` -> get Pull Requests).
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")


def text_of(document: Document) -> str:
    """What is embedded of a tool: its name in words, its title, the start of its description.

    The name is split at ``_ - . /`` and at camelCase and letter/digit changes: the model's
    tokenizer reads ``getPullRequests`` as one unknown word cut into pieces, ``get Pull Requests``
    as three it knows."""
    name = _CAMEL.sub(" ", re.sub(r"[_\-./]+", " ", document.name)).strip()
    parts = [name, document.title, document.description[:TEXT_CHARS]]
    return ": ".join(part for part in parts if part)


def _key(text: str) -> bytes:
    """A text's key in the cache: a hash of the text and of what the model reads of it (a vector
    made when texts were cut to another number of tokens is not taken for this one)."""
    return hashlib.blake2b(f"{minilm.MAX_TOKENS}\n{text}".encode(), digest_size=16).digest()


def default_threads() -> int:
    """Embedding threads by default: one per CPU this process may run on (they run at a lower
    priority than the event loop's thread)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _lower_priority() -> None:
    """Lower this thread's priority (Linux: niceness is per thread); elsewhere nothing."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
    except (AttributeError, OSError):
        pass


class _Published(NamedTuple):
    names: list[str]
    matrix: np.ndarray[Any, Any]


class SemanticRanker:
    """A :class:`mcphost.search.Ranker` over a sentence-embedding model's vectors."""

    def __init__(self, load: Callable[[], Any], cache: Path | None = None, *, background: bool = True,
                 threads: int | None = None) -> None:
        """``load()`` gives the model (called once, off the event loop); ``cache``: the file the
        vectors are kept in; ``background=False`` embeds in ``update`` itself (harnesses);
        ``threads``: how many threads embed a catalog (default: one per CPU)."""
        self._load = load
        self._threads = threads or default_threads()
        self._feed_lock = threading.Lock()
        self._background = background
        self._model: Any = None
        self._cache_path = cache
        self._texts: dict[str, dict[str, str]] = {}  # provider -> tool name -> text
        self._vectors: dict[bytes, np.ndarray[Any, Any]] = {}
        self._published = _Published([], np.zeros((0, 0), dtype=np.float32))
        self._queries: OrderedDict[str, np.ndarray[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._model_lock = threading.Lock()
        self.failed: BaseException | None = None
        self._read_cache()

    # -- the index's side ----------------------------------------------------------------------

    def update(self, changes: Mapping[str, Sequence[Document]]) -> None:
        with self._lock:
            for provider, documents in changes.items():
                if documents:
                    self._texts[provider] = {d.name: text_of(d) for d in documents}
                else:
                    self._texts.pop(provider, None)
            if self._background:
                self._idle.clear()
                self._wake.set()
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, name="mcphost-semantic", daemon=True)
                    self._thread.start()
        if not self._background:
            self._embed_missing()

    def rank(self, query: str, limit: int, accept: Callable[[str], bool] | None) -> list[tuple[str, float]]:
        published = self._published
        if not published.names or self._model is None:
            return []
        vector = self._query_vector(query)
        scores = published.matrix @ vector
        wanted = min(len(scores), limit if accept is None else limit * 4)
        while True:
            top = np.argpartition(-scores, wanted - 1)[:wanted] if wanted < len(scores) else np.arange(len(scores))
            ordered = top[np.argsort(-scores[top], kind="stable")]
            chosen = [(published.names[i], float(scores[i])) for i in ordered.tolist()
                      if accept is None or accept(published.names[i])]
            if len(chosen) >= limit or wanted >= len(scores):
                return chosen[:limit]
            wanted = min(len(scores), wanted * 4)

    # -- the embedding thread ------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every known tool is embedded (tests, benchmarks); False on timeout."""
        return self._idle.wait(timeout)

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def model(self) -> Any:
        with self._model_lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _query_vector(self, query: str) -> np.ndarray[Any, Any]:
        with self._lock:
            held = self._queries.get(query)
        if held is None:
            held = self.model().embed([query])[0]
            with self._lock:
                self._queries[query] = held
                while len(self._queries) > QUERY_CACHE:
                    self._queries.popitem(last=False)
        return held

    def _work(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            try:
                self._embed_missing()
            except Exception as exc:  # a broken model: the lexical ranking still answers
                self.failed = exc
                log.exception("embedding tool descriptions failed")
            if not self._wake.is_set():
                self._idle.set()

    def _embed_missing(self) -> None:
        with self._lock:
            wanted = {name: text for texts in self._texts.values() for name, text in texts.items()}
        missing = list({text for text in wanted.values() if _key(text) not in self._vectors})
        self._publish(wanted)
        model = self.model()  # loaded here, off the searches, even when the cache had every vector
        if not missing:
            return
        # Texts of like length go together (a batch is as wide as its longest text), shortest first.
        lengths = model.lengths(missing) if hasattr(model, "lengths") else [len(text) for text in missing]
        order = sorted(range(len(missing)), key=lambda i: (lengths[i], missing[i]))
        chunks = [[missing[i] for i in order[start:start + CHUNK]] for start in range(0, len(order), CHUNK)]
        workers = max(1, min(self._threads, len(chunks)))
        if workers == 1:
            self._embed_chunks(model, iter(chunks), wanted)
        else:
            feed = iter(chunks)
            threads = [threading.Thread(target=self._embed_chunks, args=(model, feed, wanted),
                                        name=f"mcphost-semantic-{i}", daemon=True) for i in range(workers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        self._publish(wanted)
        self._write_cache()

    def _embed_chunks(self, model: Any, feed: Iterator[list[str]], wanted: Mapping[str, str]) -> None:
        """Embed chunks from ``feed`` (shared by the embedding threads) until it is empty or the
        catalog changes; publish what is embedded at most every PUBLISH_SECONDS."""
        if self._background:
            _lower_priority()
        published = time.monotonic()
        while not (self._closed or (self._background and self._wake.is_set())):  # changed: start over
            with self._feed_lock:
                chunk = next(feed, None)
            if chunk is None:
                return
            vectors = model.embed(chunk, tokens=minilm.MAX_TOKENS)
            with self._feed_lock:
                for text, vector in zip(chunk, vectors, strict=True):
                    self._vectors[_key(text)] = vector
            if time.monotonic() - published > PUBLISH_SECONDS:
                self._publish(wanted)
                published = time.monotonic()

    def _publish(self, wanted: Mapping[str, str]) -> None:
        names, rows = [], []
        for name, text in wanted.items():
            vector = self._vectors.get(_key(text))
            if vector is not None:
                names.append(name)
                rows.append(vector)
        matrix = np.vstack(rows).astype(np.float32) if rows else np.zeros((0, 0), dtype=np.float32)
        self._published = _Published(names, matrix)

    # -- the cache on disk ----------------------------------------------------------------------

    def _read_cache(self) -> None:
        path = self._cache_path
        if path is None or not path.is_file():
            return
        try:
            with np.load(path) as data:
                keys, vectors = data["keys"], data["vectors"]
            self._vectors.update({bytes(k): v for k, v in zip(keys, vectors, strict=True)})
        except Exception:  # a damaged cache is made again
            log.warning("ignoring the unreadable embedding cache %s", path, exc_info=True)

    def _write_cache(self) -> None:
        path = self._cache_path
        if path is None or not self._vectors:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            keys = np.array([np.frombuffer(k, dtype=np.uint8) for k in self._vectors])
            vectors = np.vstack(list(self._vectors.values())).astype(np.float32)
            handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".npz")
            with os.fdopen(handle, "wb") as out:
                np.savez(out, keys=keys, vectors=vectors)
            os.replace(temporary, path)
        except OSError:
            log.warning("could not write the embedding cache %s", path, exc_info=True)
