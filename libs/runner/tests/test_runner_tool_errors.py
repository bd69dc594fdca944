"""A refused or failed tool reads as a tool error, live as on import: real CLI output.

The lines are what Claude Code 2.1.332 (`-p --output-format stream-json`) and Codex
0.171.0 (`exec --json`) wrote against the model stand-ins of tests/engines, whose model
asked for `echo hi` and then `false` (tests/data/engine_transcripts/runner).
"""

from __future__ import annotations

from pathlib import Path

from seedline_runner.engines.base import EngineOutput
from seedline_runner.engines.claude_stream import ClaudeStream
from seedline_runner.engines.codex_stream import CodexStream
from seedline_runner.engines.tool_errors import is_failed_tool_text

REPO_ROOT = Path(__file__).resolve().parents[3]
RUNNER_DATA = REPO_ROOT / "tests" / "data" / "engine_transcripts" / "runner"
CLAUDE_STREAM = RUNNER_DATA / "claude-ea4e83c5-1f4b-48e0-9a4f-6540c484f566.stream.jsonl"
CODEX_EXEC = RUNNER_DATA / (
    "rollout-2026-12-02T15-09-39-01a2374d-ded1-77a2-affa-6422884a6052.exec.jsonl")


def fed(stream, path: Path) -> list[EngineOutput]:
    return [output for line in path.read_text().splitlines() for output in stream.feed(line)]


def test_claude_codes_is_error_tool_result_is_a_tool_error_and_the_turn_no_success():
    stream = ClaudeStream()
    outputs = fed(stream, CLAUDE_STREAM)

    terminals = [o.content for o in outputs if o.kind == "terminal"]
    assert terminals == ["hi", "[tool error] Exit code 1"]
    (outcome,) = [o.content for o in outputs if o.kind == "outcome"]
    assert outcome.startswith("finished with 1 failed tool call (")
    assert not outcome.startswith("success")
    assert stream.failed_tools == 1


def test_codexs_failed_command_is_a_tool_error_and_a_good_one_is_not():
    outputs = fed(CodexStream(), CODEX_EXEC)

    terminals = [o.content for o in outputs if o.kind == "terminal"]
    assert terminals == ["hi\n", "[tool error] (exit code 1)"]
    assert [is_failed_tool_text(text) for text in terminals] == [False, True]
