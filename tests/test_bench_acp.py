"""bench.acp_latency's arithmetic: what the bridge adds is the editor's time less the
engine's own, judged at the median against the target."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import acp_latency, suite  # noqa: E402


def rounds(*pairs: tuple[float, float]) -> list[dict]:
    return [{"editor_ms": editor, "engine_ms": engine, "to_engine_ms": 1.0, "back_ms": 1.0,
             "added_ms": editor - engine} for editor, engine in pairs]


def test_the_median_of_what_is_added_decides_and_one_slow_turn_does_not():
    result = acp_latency.assemble({
        "scripted": rounds((250, 200), (260, 200), (900, 200)),
        "claude": rounds((700, 500), (720, 500), (730, 500)),
    })
    assert result["engines"]["scripted"]["added_ms"]["p50"] == 60
    assert result["engines"]["scripted"]["met"] is True
    assert result["engines"]["claude"]["added_ms"]["p50"] == 220
    assert result["engines"]["claude"]["met"] is False
    compared, _ = suite.rows({"acp": result}, suite.DEFAULTS)
    assert [(row["seedline"], row["met"]) for row in compared] == [("60.0", True),
                                                                     ("220.0", False)]
    assert "| claude |" in acp_latency.markdown(result)
