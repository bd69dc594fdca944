"""The lean floor at a tiny size: it performs exactly the durable work its table says, per
wake and per open, counted as durable_work counts Seedline (stream sequences, consumer
deliveries, acks, Postgres statements and transactions from the server's log); not how fast."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import durable_work, lean_floor, suite  # noqa: E402

pytestmark = [pytest.mark.servers, pytest.mark.slow]

WAKES, OPENS = 5, 2


def test_the_floor_does_the_work_of_its_table_and_no_more():
    result = asyncio.run(lean_floor.run(WAKES, OPENS))
    for op, kind, n in (("wake", "wake, in a storm", WAKES),
                        ("open", "open, one at a time", OPENS)):
        counted = result["windows"][kind]
        appended = lean_floor.appended(op)
        assert counted["operations"] == n
        assert (counted["ingest_entries"], counted["timeline_entries"], counted["events"]) == (
            appended[lean_floor.INGEST] * n, appended[lean_floor.TIMELINE] * n,
            appended[lean_floor.SESSIONS] * n), counted
        assert counted["deliveries_by_consumer"] == {
            c: d * n for c, d in lean_floor.deliveries(op).items()}, counted
        # One ack per delivery, or per batch for the consumers that ack all: one at a time
        # every batch is one delivery.
        if kind.endswith("one at a time"):
            assert counted["acks"] == counted["deliveries"], counted
        batched = sum(d for c, d in lean_floor.deliveries(op).items()
                      if c in lean_floor.ACK_ALL) * n
        assert counted["deliveries"] - batched <= counted["acks"] <= counted["deliveries"]
        work = lean_floor.STATEMENTS[op]
        assert counted["statements_by_service"] == {
            role: w.statements * n for role, w in work.items()}, counted
        assert counted["transactions_by_service"] == {
            role: w.transactions * n for role, w in work.items()}, counted
        assert counted["statements_by_text"]["BEGIN"] == sum(
            w.explicit for w in work.values()) * n
        # Every process of the floor is read, as durable_work reads Seedline's.
        assert set(counted["cpu_ms"]) == {"timeline-writer", "continuity-resolver",
                                          "seed-composer", "runner-gateway", "runners",
                                          "nats-server", "postgres"}
    assert result["cpu_ms_per_wake"] > 0 and result["open_p50_ms"] > 0
    assert result["storm_wakes_per_s"] > 0

    # Beside Seedline in row 15: its CPU per storm wake against the floor's.
    storm = result["per_operation"]["wake, in a storm"]
    seedline = {"wake, in a storm": dict(storm, cpu_ms_total=storm["cpu_ms_total"] * 2),
                "open, one at a time": result["per_operation"]["open, one at a time"],
                "wake, one at a time": dict(storm, fsyncs=10)}
    r = {"targets": durable_work.TARGETS, "per_operation": seedline,
         "idle_cpu_ms_per_s_total": 5.0, "conditions": {"runners": 2},
         "storm_wakes_per_s": 10.0, "open_p50_ms": 20.0, "floor": result,
         "floor_ratio_max": durable_work.FLOOR_RATIO_MAX}
    figures: list[dict] = []
    [row] = [row for row in suite._durable_rows(r, figures) if "lean floor" in row["measure"]]
    assert row["ratio"] == 2.0 and row["met"] is False and row["target"] == "<= 1.3x floor"
    assert any(fig["measure"].startswith("lean floor") for fig in figures)
    assert "Seedline / floor, CPU per storm wake: 2.00" in durable_work.markdown(
        dict(r, idle_per_second={}, idle_cpu_ms_per_s={}))


def test_the_table_is_consistent():
    for op, work in lean_floor.STATEMENTS.items():
        for role, w in work.items():
            assert role in lean_floor.ROLES
            assert w.inside >= w.explicit >= 0 and w.writes <= w.statements - 2 * w.explicit
            consumer, _, message = w.at.partition(" ")
            assert w.at == "open" or (lean_floor.CONSUMERS[consumer][0] == role and message
                                      in {name for name, _, _ in lean_floor.MESSAGES[op]})
