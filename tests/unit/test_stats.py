"""The per-tool counters (mcphost/stats.py): totals, time buckets that roll over, percentiles from the
latency ring, and figures that survive a reload of the catalog."""

from __future__ import annotations

from mcphost.stats import BUCKET_SECONDS, BUCKETS, RING, ToolStats, percentile

T0 = 1_000_000 * BUCKET_SECONDS  # a bucket boundary


def test_totals_recent_figures_and_percentiles() -> None:
    stats = ToolStats()
    for number in range(1, 101):  # latencies 1..100 ms, the tenth of each ten an error
        end = T0 + number * 0.01
        stats.add(end - number / 1000, end, error=number % 10 == 0)
    seen = stats.snapshot(now=T0 + 2)
    assert (seen["calls"], seen["errors"]) == (100, 10)
    recent = seen["recent"]
    assert (recent["calls"], recent["errors"]) == (100, 10)
    assert abs(recent["p50"] - 0.050) < 1e-9 and abs(recent["p99"] - 0.099) < 1e-9
    buckets = seen["buckets"]
    assert len(buckets["calls"]) == BUCKETS and buckets["calls"][-1] == 100 and sum(buckets["calls"]) == 100
    assert buckets["errors"][-1] == 10 and buckets["p99"][-1] is not None and buckets["p99"][0] is None


def test_buckets_roll_over_and_old_calls_leave_the_recent_figures() -> None:
    stats = ToolStats()
    stats.add(T0, T0 + 0.001, error=True)
    stats.add(T0 + BUCKET_SECONDS, T0 + BUCKET_SECONDS + 0.002, error=False)
    seen = stats.snapshot(now=T0 + BUCKET_SECONDS + 1)
    assert seen["buckets"]["calls"][-2:] == [1, 1] and seen["buckets"]["errors"][-2:] == [1, 0]
    # Long after: nothing recent, the buckets are empty, the totals stay.
    later = T0 + 10 * BUCKETS * BUCKET_SECONDS
    idle = stats.snapshot(now=later)
    assert (idle["calls"], idle["errors"]) == (2, 1)
    assert idle["recent"] == {"seconds": BUCKETS * BUCKET_SECONDS, "calls": 0, "errors": 0, "p50": None, "p99": None}
    assert sum(idle["buckets"]["calls"]) == 0
    # A call then clears the stale bucket its slot held before counting.
    stats.add(later, later + 0.001, error=False)
    again = stats.snapshot(now=later + 1)
    assert sum(again["buckets"]["calls"]) == 1 and sum(again["buckets"]["errors"]) == 0


def test_the_latency_ring_keeps_the_most_recent_calls() -> None:
    stats = ToolStats()
    for number in range(RING + 10):
        end = T0 + number * 0.0001
        stats.add(end - (1.0 if number < 10 else 0.001), end, error=False)  # the first ten were slow
    seen = stats.snapshot(now=T0 + 1)
    assert seen["calls"] == RING + 10
    assert seen["recent"]["p99"] < 0.01  # the slow ones were overwritten


def test_carry_takes_over_the_figures() -> None:
    old = ToolStats()
    old.add(T0, T0 + 0.003, error=True)
    new = ToolStats()
    new.carry(old)
    new.add(T0 + 1, T0 + 1.001, error=False)
    seen = new.snapshot(now=T0 + 2)
    assert (seen["calls"], seen["errors"], seen["recent"]["calls"]) == (2, 1, 2)
    assert old.snapshot(now=T0 + 2)["calls"] == 1  # the old one is not shared


def test_percentile_nearest_rank() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.99) == 3.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert percentile([float(n) for n in range(1, 101)], 0.99) == 99.0


def test_a_tool_never_called_costs_no_ring_and_reads_as_zeros() -> None:
    stats = ToolStats()
    assert len(stats._latency) == 0 and stats._bucket_calls == []  # allocated by the first call
    seen = stats.snapshot(now=T0)
    assert (seen["calls"], seen["errors"], seen["recent"]["calls"], seen["recent"]["p99"]) == (0, 0, 0, None)
    assert seen["buckets"]["calls"] == [0] * BUCKETS and seen["buckets"]["p99"] == [None] * BUCKETS
    stats.add(T0, T0 + 0.001, error=False)
    assert len(stats._latency) == RING and len(stats._bucket_calls) == BUCKETS
    assert ToolStats()._bucket_calls == []  # the shared empty lists were never written
