"""bench/results/summary.json is read by other tools: every row carries a numeric
ratio and a boolean met, whichever benchmarks ran and whatever they measured."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import ingest, suite  # noqa: E402


def spread(median: float) -> dict:
    return {"median": median, "min": median * 0.9, "max": median * 1.1, "runs": [median]}


def ingest_result(seedline_rate: float) -> dict:
    runs = {}
    for size in (512, 4096):
        runs[f"raw_sync_{size}"] = [4000.0]
        runs[f"seedline_{size}"] = [seedline_rate]
        runs[f"raw_nosync_{size}"] = [30000.0]
    partitioned = {"size": 512, "instances": 16,
                   "measurements": {"1": spread(1800.0), "2": spread(2000.0)},
                   "ratio_to_one": {"1": 1.0, "2": 2000 / 1800}}
    return ingest.assemble(runs, [512, 4096], 1, 100, "2.15.1", None, partitioned)


def results(seedline_rate: float, p50: float) -> dict:
    open_rounds = [{"open_ms": {"p50": p50, "p99": p50 * 2}}]
    return {
        "ingest": ingest_result(seedline_rate),
        "lag": {"rate": 900.0, "content_bytes": 512, "p50_ms": spread(4.0), "p99_ms": spread(150.0),
                "max_ms": spread(400.0), "target_p99_ms": 100.0, "target_met": False,
                "entries_over_500_ms": [0], "per_round": [{"entries_measured": 9000}]},
        "open": {"repos": {"small": {"rounds": open_rounds}, "large": {"rounds": open_rounds}},
                 "targets": {"ratio_max": 1.5, "p50_ms_max": 10.0, "p99_ms_max": 25.0},
                 "ratios": {"large/small": {"p50": 1.0, "p99": 1.0}}},
        "rebuild": {"entries": 100, "rebuild_rate": spread(50.0), "raw_rate": spread(80.0),
                    "ratio": 0.625, "target_ratio": 0.5, "target_met": True},
        "memory": {"fill": {"entries": 100}, "target_mb": 150.0,
                   "services_mb": {"timeline-writer": {"VmHWM": 90.0}}},
    }


def test_every_row_has_a_numeric_ratio_and_a_boolean_met():
    compared, figures = suite.rows(results(seedline_rate=1900.0, p50=8.0), suite.DEFAULTS)
    assert {row["bench"] for row in compared} == {"1 ingest", "2 lag", "3 open", "4 rebuild",
                                                 "5 memory"}
    for row in compared:
        assert isinstance(row["ratio"], float), row
        assert isinstance(row["met"], bool), row
    assert figures and all("met" not in fig for fig in figures)


def test_met_follows_the_measured_figures():
    def verdicts(rate: float, p50: float) -> dict:
        compared, _ = suite.rows(results(rate, p50), suite.DEFAULTS)
        return {row["measure"]: (row["ratio"], row["met"]) for row in compared}

    fast = verdicts(rate=2000.0, p50=8.0)
    slow = verdicts(rate=1000.0, p50=12.0)
    ingest_512 = next(m for m in fast if m.startswith("512 B entries"))
    open_p50 = "request -> reply p50 ms, repo of 1,000 entries"
    assert fast[ingest_512] == (0.5, True) and slow[ingest_512] == (0.25, False)
    assert fast[open_p50] == (0.8, True) and slow[open_p50] == (1.2, False)
    lag_p99 = next(m for m in fast if m.startswith("publish -> readable p99"))
    assert fast[lag_p99] == (1.5, False)


def test_the_summary_table_shows_rows_and_figures():
    compared, figures = suite.rows(results(1900.0, 8.0), suite.DEFAULTS)
    summary = {"rows": compared, "figures": figures, "options": suite.DEFAULTS,
               "conditions": suite.conditions({}, [0.1, 0.1, 0.1]), "errors": {},
               "runtime_seconds": {"total": 1.0}, "within_time_budget": True,
               "commit": "abc", "generated_at": "2026-12-01T00:00:00Z"}
    text = suite.markdown(summary)
    assert "| 1 ingest | 512 B entries" in text
    assert "2 partitioned timeline-writer(s)" in text
