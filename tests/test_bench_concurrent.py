"""The concurrent-opens benchmark at a tiny size: what it measures is right (every open
answered, one caller and many, and no repo left with two live conversations), not how fast."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import concurrent_opens  # noqa: E402

pytestmark = [pytest.mark.servers, pytest.mark.slow]


def test_concurrent_opens_at_a_tiny_size_fail_nothing_and_keep_one_live_per_repo():
    measured = asyncio.run(concurrent_opens._round(callers=4, opens=2))
    for part in ("single", "concurrent"):
        assert measured[part]["opens"] == 8 and measured[part]["failures"] == 0, measured
        assert measured[part]["opens_per_s"] > 0
    assert measured["repos_live_twice"] == [] and measured["repos_live_none"] == [], measured
    result = concurrent_opens.assemble([measured], 4, 2)
    assert result["ratio"] == measured["concurrent"]["opens_per_s"] / measured["single"]["opens_per_s"]
    assert "4 callers" in concurrent_opens.markdown(result)
