"""The durable-execution journal model (bench.journal_model) against Seedline's storage:
the journal grows with the square of the model calls, Seedline with the turns."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import journal_model, langgraph_compare, suite  # noqa: E402


def test_each_model_call_journals_every_earlier_item():
    turns = [("user", "a" * 100), ("assistant", "b" * 100), ("user", "c" * 100),
             ("assistant", "d" * 100)]
    sizes = journal_model.journal_bytes(turns)
    # Person messages are no model call: nothing is journaled for them.
    assert sizes[0] == 0 and sizes[2] == sizes[1]
    second_call = sizes[3] - sizes[2]
    first_call = sizes[1] - sizes[0]
    # The second call's input holds the first three items, so it costs more than the
    # first call by at least those two extra items' text.
    assert second_call - first_call >= 200
    # The input items are serialised as JSON: the text is in the journal in full.
    first_user = json.dumps({"role": "user", "content": "a" * 100}, separators=(",", ":"))
    assert first_call >= len(first_user) + 100


def test_the_journal_grows_with_the_square_and_passes_the_limit():
    turns = langgraph_compare.conversation(1_000)
    sizes = journal_model.journal_bytes(turns)
    # Doubling the turns roughly quadruples the journal (quadratic), never merely doubles it.
    assert sizes[399] / sizes[199] > 3.0
    over = journal_model.first_turn_over(journal_model.HISTORY_LIMIT_BYTES, turns)
    assert over is not None and sizes[over - 1] > journal_model.HISTORY_LIMIT_BYTES
    assert sizes[over - 2] <= journal_model.HISTORY_LIMIT_BYTES


def test_the_compare_reports_journal_rows_beside_seedline():
    marks = (50, 100, 200, 500)
    per_turn = 1_150.0  # a linear store: the same bytes for every turn
    seedline = {"stream_bytes": {m: {"median": per_turn * m} for m in marks},
                "bytes": {m: {"median": 2 * per_turn * m} for m in marks}}
    turns = langgraph_compare.conversation(500)
    j = langgraph_compare.journal_compare(turns, seedline, (10, *marks))
    assert j["marks"] == list(marks)
    assert j["journal_over_seedline"][500] > j["journal_over_seedline"][50] > 1
    assert j["seedline_stream_per_turn_last_over_first"] == 1.0
    compared, figures = suite.rows({"langgraph": _lg_result(j)}, suite.DEFAULTS)
    row = next(r for r in compared if r["bench"] == "7 vs journal")
    assert row["met"] is True and row["ratio"] == 1.0
    assert any("50 MB" in f["measure"] and f["baseline"] == str(j["journal_passes_limit_at_turn"])
               for f in figures)


def _lg_result(journal: dict) -> dict:
    spread = {"median": 1.0, "min": 1.0, "max": 1.0}
    side = {"bytes": {10: spread, 500: spread}, "bytes_per_turn": {"0-10": spread, "400-500": spread},
            "write_ms": {500: spread}, "context_ms": spread}
    return {"sides": {"langgraph": side, "seedline": side}, "config": {"marks": (10, 500)},
            "stretches": {"early": "0-10", "late": "400-500"},
            "ratios": {"seedline_bytes_per_turn_late_over_early": 1.0,
                       "langgraph_bytes_per_turn_late_over_early": 5.0,
                       "write_ms_at_end_langgraph_over_seedline": 2.0,
                       "context_ms_langgraph_over_seedline_brief": 2.0},
            "target_flat_limit": 1.5, "target_met": True, "journal": journal}
