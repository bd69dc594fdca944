"""The real-wake benchmark, one round: what it measures is right (the real Claude Code CLI
is woken by a message, and the steps on the wire add up to the platform's part), not how
fast."""

from __future__ import annotations

import asyncio
import math
import sys
from pathlib import Path

import pytest

from .conftest import engine_cli

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import real_wake, suite  # noqa: E402

pytestmark = [pytest.mark.servers, pytest.mark.slow]


def test_one_real_wake_is_split_into_the_platform_s_part_and_the_engine_s(monkeypatch):
    monkeypatch.setenv("SEEDLINE_CLAUDE_BIN", str(engine_cli("claude")))
    [wake] = asyncio.run(real_wake._rounds(1))
    assert wake["platform_ms"] > 0 and wake["rest_ms"] > 0
    assert math.isclose(wake["platform_ms"] + wake["rest_ms"], wake["whole_ms"])
    # The steps are seen in their order and together make the platform's part.
    assert all(ms >= 0 for ms in wake["steps_ms"].values()), wake
    assert math.isclose(sum(wake["steps_ms"].values()), wake["platform_ms"])
    result = real_wake.assemble([wake])
    assert result["share_median"] == wake["platform_ms"] / wake["whole_ms"]
    assert "| seed_composed | seed-composer |" in real_wake.markdown(result)
    [row], [figure] = suite.rows({"realwake": result}, suite.DEFAULTS)
    assert row["ratio"] == round(result["share_median"] / 0.05, 4)
    assert row["met"] is (result["share_median"] <= 0.05)
    assert figure["measure"].endswith("chat_user / wake_requested / continuity_decided"
                                      " / seed_composed / launch")
