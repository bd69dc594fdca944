"""Schemathesis against the running HTTP API (every check and every phase, stateful
included, the instance pinned to the token's): what the OpenAPI document promises is what
the server does. Slow: several thousand generated requests; the count is printed and
asserted.

SEEDLINE_SCHEMATHESIS_EXAMPLES sets the cases per operation (default 420: about 6,900 cases
and 500 stateful scenarios, about 10 minutes)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from .conftest import INSTANCE

# exhaustive: 5,000+ generated requests take many minutes; `make test-faults` runs it,
# `make test` does not (its time budget).
pytestmark = [pytest.mark.servers, pytest.mark.slow, pytest.mark.exhaustive]

EXAMPLES = int(os.environ.get("SEEDLINE_SCHEMATHESIS_EXAMPLES", "420"))
MIN_CASES = int(os.environ.get("SEEDLINE_SCHEMATHESIS_MIN_CASES", "5000"))
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")

HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
CONFIG = """
hooks = "schemathesis_hooks"

[parameters]
"path.instance_id" = "{instance}"
"path.session_id" = "{conversation}"
# A min_seq past the projection waits its full 5 s by design (then 409); pinned so the
# run spends its time on cases, not on waiting.
"query.min_seq" = 1

[generation]
database = "none"
"""


@pytest.mark.timeout(3000)
@pytest.mark.skipif(not SCHEMATHESIS.exists(), reason="schemathesis is in the dev group")
async def test_schemathesis_finds_nothing_with_every_check(system, web, tmp_path):
    await system.start_runner()
    async with web.client(web.token) as client:
        # A real conversation with a brief, so its routes are exercised beyond 404.
        await system.append(1, content="Sketched the board.")
        opened = await client.post(f"/v1/instances/{INSTANCE}/conversations", json={
            "repo": "apps/chess-academy", "engine": "scripted", "node_id": "mac-mini-1"})
    assert opened.status_code == 200, opened.text
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG.format(instance=INSTANCE, conversation=opened.json()["session_id"]))
    report = tmp_path / "report.json"
    process = await asyncio.create_subprocess_exec(
        str(SCHEMATHESIS), "--config-file", str(config), "run", f"{web.url}/openapi.json",
        "--checks", "all", "--header", f"Authorization: Bearer {web.token}",
        "--max-examples", str(EXAMPLES), "--seed", "1",
        # One worker: Python 3.11.7's AST parser keeps its recursion depth in a global, and
        # Hypothesis parses lambdas as it describes them, so two threads parsing at once fail
        # with "AST constructor recursion depth mismatch" (CPython gh-106905, fixed in 3.11.8).
        "--workers", "1",
        "--request-timeout", "30", "--no-shrink",
        # The notices stream never ends by design; its own tests cover it.
        "--exclude-path-regex", "/notifications$",
        "--report", "json", "--report-json-path", str(report),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        cwd=str(tmp_path),  # its cache folder goes there, not into the work tree
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(HOOKS.parent), os.environ.get("PYTHONPATH", "")])})
    output, _ = await process.communicate()
    text = output.decode("utf-8", "replace")
    (tmp_path / "output.txt").write_text(text)
    summary = json.loads(report.read_text()) if report.exists() else {}
    print(text[-6000:])
    cases = _cases(summary, text)
    print(f"schemathesis: {cases} generated cases, exit {process.returncode}")
    assert process.returncode == 0, text[-6000:]
    assert cases >= MIN_CASES, cases


def _cases(summary: dict, text: str) -> int:
    for key in ("total_cases", "cases", "test_cases"):
        if isinstance(summary.get(key), int):
            return summary[key]
    import re

    found = re.search(r"(\d[\d,]*) generated", text) or re.search(r"Test cases:\s*(\d[\d,]*)",
                                                                  text)
    return int(found.group(1).replace(",", "")) if found else 0
