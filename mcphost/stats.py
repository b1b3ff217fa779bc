"""Per-tool call counters the host keeps for operators (the console reads them).

They sit on the request path, so they cost a few integer adds and two array stores per call: each
tool's :class:`ToolStats` comes with its catalog entry, its latency ring (an array of doubles) and
its time buckets are fixed-size and allocated by the tool's first call (a gateway may mount
thousands of tools that are never called: about 130 bytes each until then, 9.4 KiB after), and the
first call or refusal adds it to a weak set of the counters in use (:func:`used`), nothing
is locked (every update runs on the event loop) and nothing is called through pluggy. Percentiles
and per-bucket figures are worked out only when read.

Figures are per process: with several workers, each keeps its own.
"""

from __future__ import annotations

import math
import time
import weakref
from array import array
from typing import Any

#: Seconds one time bucket covers, and how many buckets are kept (the charts' span: 5 minutes).
BUCKET_SECONDS = 10
BUCKETS = 30
#: How many recent latencies are kept for percentiles (the most recent calls, within the span).
RING = 512
_RING_MASK = RING - 1  # RING is a power of two
#: Why a call was refused before its tool ran, as counted (:meth:`ToolStats.refuse`): its arguments
#: broke the tool's schema, the caller's token lacked a scope the tool needs, or a budget of the
#: caller (requests, tasks, parked calls) was full.
INVALID_ARGUMENTS = "invalid arguments"
SCOPE = "scope"
BUDGET = "budget"
REFUSALS = (INVALID_ARGUMENTS, SCOPE, BUDGET)
_NO_RING: array[float] = array("d")
_NO_BUCKETS: list[int] = []


class ToolStats:
    """Calls, errors and latencies of one tool in this process."""

    __slots__ = ("__weakref__", "_at", "_bucket", "_bucket_calls", "_bucket_end", "_bucket_errors", "_latency",
                 "_next", "_position", "calls", "errors", "name", "refused")

    def __init__(self, name: str = "") -> None:
        #: The tool's name (its catalog entry sets it), so operators' tools find the used ones by name.
        self.name = name
        #: Calls that ran the tool's handler, and those whose result was an error, since start.
        self.calls = 0
        self.errors = 0
        #: Calls refused before the handler ran, by reason (:data:`REFUSALS`); None until the first.
        self.refused: dict[str, int] | None = None
        # The ring and the buckets are allocated by the first call (a gateway may mount thousands
        # of tools that are never called): the first call always moves to a new bucket.
        self._latency: array[float] = _NO_RING
        self._at: array[float] = _NO_RING
        self._next = 0
        self._bucket = 0  # the index (time // BUCKET_SECONDS) the newest bucket stands for
        self._bucket_end = 0.0  # when it ends: the first call after that moves on
        self._position = 0  # its place in the lists below
        self._bucket_calls: list[int] = _NO_BUCKETS  # shared and never written: replaced first
        self._bucket_errors: list[int] = _NO_BUCKETS

    def add(self, started: float, ended: float, error: bool) -> None:
        """Count one call that ran from ``started`` to ``ended`` (``time.perf_counter()`` values)."""
        if ended >= self._bucket_end:
            self._advance(ended)
        self.calls += 1
        slot = self._next
        self._latency[slot] = ended - started
        self._at[slot] = ended
        self._next = (slot + 1) & _RING_MASK
        self._bucket_calls[self._position] += 1
        if error:
            self.errors += 1
            self._bucket_errors[self._position] += 1

    def refuse(self, reason: str) -> None:
        """Count one call refused before the tool ran (``reason``: one of :data:`REFUSALS`)."""
        refused = self.refused
        if refused is None:
            refused = self.refused = {}
            _USED.add(self)
        refused[reason] = refused.get(reason, 0) + 1

    def _advance(self, now: float) -> None:
        """Move to the bucket holding ``now``, clearing those skipped (at most once per bucket)."""
        if not self._bucket_calls:
            self._latency, self._at = array("d", bytes(8 * RING)), array("d", bytes(8 * RING))
            self._bucket_calls, self._bucket_errors = [0] * BUCKETS, [0] * BUCKETS
            _USED.add(self)
        bucket = int(now // BUCKET_SECONDS)
        for index in range(max(self._bucket + 1, bucket - BUCKETS + 1), bucket + 1):
            self._bucket_calls[index % BUCKETS] = 0
            self._bucket_errors[index % BUCKETS] = 0
        self._bucket = bucket
        self._bucket_end = (bucket + 1) * BUCKET_SECONDS
        self._position = bucket % BUCKETS

    def recent(self, now: float | None = None) -> tuple[int, int]:
        """Calls and errors over the last ``BUCKETS * BUCKET_SECONDS`` seconds (no latencies: cheap)."""
        if not self.calls:
            return 0, 0
        now = time.perf_counter() if now is None else now
        current = int(now // BUCKET_SECONDS)
        calls = errors = 0
        for index in range(max(current, self._bucket) - BUCKETS + 1, min(current, self._bucket) + 1):
            calls += self._bucket_calls[index % BUCKETS]
            errors += self._bucket_errors[index % BUCKETS]
        return calls, errors

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        """What an operator sees: totals; over the last ``BUCKETS * BUCKET_SECONDS`` seconds the
        calls, errors and latency p50/p99 (seconds); and per bucket, oldest first, the calls, errors
        and p99 (None for a bucket without calls)."""
        now = time.perf_counter() if now is None else now
        current = int(now // BUCKET_SECONDS)
        span = BUCKETS * BUCKET_SECONDS
        by_bucket: dict[int, list[float]] = {}
        latencies: list[float] = []
        if self.calls:
            for at, latency in zip(self._at, self._latency, strict=True):
                if at and now - at <= span:
                    latencies.append(latency)
                    by_bucket.setdefault(int(at // BUCKET_SECONDS), []).append(latency)
        calls: list[int] = []
        errors: list[int] = []
        p99s: list[float | None] = []
        for index in range(current - BUCKETS + 1, current + 1):
            fresh = self.calls > 0 and self._bucket - BUCKETS < index <= self._bucket
            calls.append(self._bucket_calls[index % BUCKETS] if fresh else 0)
            errors.append(self._bucket_errors[index % BUCKETS] if fresh else 0)
            p99s.append(percentile(by_bucket.get(index, []), 0.99))
        return {"calls": self.calls, "errors": self.errors, "refused": dict(self.refused or {}),
                "recent": {"seconds": span, "calls": sum(calls), "errors": sum(errors),
                           "p50": percentile(latencies, 0.50), "p99": percentile(latencies, 0.99)},
                "buckets": {"seconds": BUCKET_SECONDS, "calls": calls, "errors": errors, "p99": p99s}}

    def carry(self, other: ToolStats) -> None:
        """Take over ``other``'s figures (the catalog was rebuilt on reload; the tool is the same)."""
        for name in self.__slots__:
            if name in ("__weakref__", "name"):
                continue
            value = getattr(other, name)
            setattr(self, name, value[:] if isinstance(value, list | array) else
                    dict(value) if isinstance(value, dict) else value)
        if self.calls or self.refused:
            _USED.add(self)


#: Every ToolStats that has counted a call or a refusal, held weakly (those of a dropped catalog go
#: with it): operators' tools list the tools used without walking a catalog of 200 000.
_USED: weakref.WeakSet[ToolStats] = weakref.WeakSet()


def used() -> list[ToolStats]:
    """The counters (of every catalog in this process) that counted a call or a refusal."""
    return list(_USED)


def percentile(values: list[float], fraction: float) -> float | None:
    """The ``fraction`` quantile of ``values`` (nearest rank), None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]
