"""The wake-storm benchmark at a tiny size: what it measures is right (every stopped repo
woken once by its message, none live twice, the CPU read per process), not how fast."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import suite, wake_storm  # noqa: E402

pytestmark = [pytest.mark.servers, pytest.mark.slow]


def test_a_tiny_storm_wakes_each_stopped_repo_once_on_its_own_machine():
    measured = asyncio.run(wake_storm._round(1, conversations=12, instances=3, runners=2,
                                             profile=False))
    assert measured["wakes"] == 12 and measured["launched"] == 12, measured
    assert measured["failures"] == 0 and measured["duplicates"] == 0, measured
    assert measured["repos_live_twice"] == [] and measured["repos_live_none"] == 0, measured
    assert measured["woken_elsewhere"] == [], measured  # each on the machine of its last open
    latency = measured["message_to_launch_ms"]
    assert 0 < latency["p50"] <= latency["p99"] <= measured["all_launched_s"] * 1000
    # Every kind of process is read; the busiest ones used CPU even for twelve wakes (the
    # runners' few milliseconds may fall under /proc's 10 ms ticks).
    costs = measured["cpu_s_per_wake"]
    assert set(costs) == {"timeline-writer", "continuity-resolver", "seed-composer",
                          "runner-gateway", "runners", "nats-server", "postgres", "producer"}
    assert min(costs.values()) >= 0
    assert all(costs[part] > 0 for part in ("runner-gateway", "continuity-resolver",
                                            "nats-server", "postgres"))

    result = wake_storm.assemble([measured], 12, 3, 2)
    compared, figures = suite.rows({"storm": result}, suite.DEFAULTS)
    [row] = compared
    assert row["bench"] == "10 wake storm" and row["ratio"] == round(measured["wakes_per_s"] / 250, 4)
    assert "12 stopped conversations" in wake_storm.markdown(result)


def test_the_conversations_spread_over_instances_and_machines_evenly():
    plan = wake_storm.conversations_of(1_000, 100, 10)
    assert len(set(plan)) == 1_000
    for index in (0, 2):
        counts: dict[str, int] = {}
        for row in plan:
            counts[row[index]] = counts.get(row[index], 0) + 1
        assert set(counts.values()) == {10 if index == 0 else 100}


class _Answers:
    """A NATS connection whose stop requests get the replies given, in order."""

    def __init__(self, *replies: dict) -> None:
        self.replies = list(replies)
        self.asked = 0

    async def request(self, subject, data, timeout):
        import json
        from types import SimpleNamespace

        self.asked += 1
        return SimpleNamespace(data=json.dumps(self.replies.pop(0)).encode())


def test_the_bench_stops_what_it_opened_or_says_why_it_could_not(monkeypatch):
    from bench import open_latency

    async def no_pause(_):
        return None

    monkeypatch.setattr(open_latency.asyncio, "sleep", no_pause)
    unavailable = {"ok": False, "error": {"code": "unavailable", "message": "again"}}
    asked_again = _Answers(unavailable, {"ok": True, "stopped": True})
    asyncio.run(open_latency.stop_live(asked_again, "csess_1"))
    assert asked_again.asked == 2
    for replies, asked in (([{"ok": True, "stopped": False}], 1),
                           ([{"ok": False, "error": {"code": "not_found"}}], 1),
                           ([unavailable] * open_latency.STOP_TRIES, open_latency.STOP_TRIES)):
        refused = _Answers(*replies)
        with pytest.raises(RuntimeError, match="stopping csess_1 answered"):
            asyncio.run(open_latency.stop_live(refused, "csess_1"))
        assert refused.asked == asked
