"""Each engine's permissions: a setting with a default that stays in the checkout, and a
refusal told as a sentence that names the setting that allows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp.schema import ToolCallLocation, ToolCallUpdate

from seedline_runner.engines.acp import _inside
from seedline_runner.engines.claude_stream import ClaudeStream
from seedline_runner.engines.permissions import ClaudePermissions, CodexPermissions
from seedline_runner.engines.registry import EngineOptions, build_engine


def test_the_defaults_edit_and_run_commands_in_the_checkout():
    assert ClaudePermissions().args() == ["--permission-mode", "acceptEdits",
                                          "--allowedTools", "Bash"]
    assert CodexPermissions().args() == ["--sandbox", "workspace-write",
                                         "-c", 'approval_policy="never"']


def test_an_operators_own_arguments_win_and_are_never_given_twice():
    assert ClaudePermissions().args(["--permission-mode", "plan"]) == ["--allowedTools", "Bash"]
    assert ClaudePermissions().args(["--dangerously-skip-permissions"]) == [
        "--allowedTools", "Bash"]
    assert CodexPermissions().args(["--sandbox", "danger-full-access"]) == [
        "-c", 'approval_policy="never"']
    assert CodexPermissions().args(["--dangerously-bypass-approvals-and-sandbox"]) == []


def test_a_setting_that_names_nothing_the_engine_knows_is_refused():
    with pytest.raises(ValueError, match="permission mode is one of"):
        build_engine("claude", EngineOptions(claude_permission_mode="yolo"))
    with pytest.raises(ValueError, match="sandbox is one of"):
        build_engine("codex", EngineOptions(codex_sandbox="anywhere"))


def test_a_refused_tool_call_is_told_with_the_setting_that_allows_it():
    stream = ClaudeStream()
    stream.feed(json.dumps({"type": "system", "subtype": "init", "session_id": "s-1"}))
    [outcome] = stream.feed(json.dumps({
        "type": "result", "subtype": "success", "is_error": False, "num_turns": 2,
        "result": "I could not write it.",
        "permission_denials": [
            {"tool_name": "Write", "tool_use_id": "t1",
             "tool_input": {"file_path": "/etc/motd", "content": "hi"}},
            {"tool_name": "Write", "tool_use_id": "t2",
             "tool_input": {"file_path": "/etc/motd", "content": "hi"}},
        ]}))
    assert outcome.ends_turn
    said = outcome.content.splitlines()
    assert said.count("Claude Code was not allowed to use Write on /etc/motd on this machine; "
                      "the runner's --claude-allowed-tools Write setting (or "
                      "--claude-permission-mode bypassPermissions) allows it.") == 1


def test_the_checkout_policy_allows_what_touches_only_the_checkout(tmp_path: Path):
    checkout = tmp_path / "repos" / "app"
    checkout.mkdir(parents=True)

    def call(*paths: str) -> ToolCallUpdate:
        return ToolCallUpdate(tool_call_id="t", title="edit",
                              locations=[ToolCallLocation(path=p) for p in paths])

    assert _inside(call(str(checkout / "src" / "a.py"), "README.md"), checkout)
    assert _inside(call(), checkout)  # a command: it runs in the checkout
    assert not _inside(call(str(tmp_path / "elsewhere.txt")), checkout)
    assert not _inside(call("../../elsewhere.txt"), checkout)


def test_a_command_codexs_sandbox_refused_is_told_with_the_setting_that_allows_it():
    from seedline_runner.engines.codex_stream import CodexStream

    stream = CodexStream(sandbox="workspace-write")
    [output] = stream.feed(json.dumps({"type": "item.completed", "item": {
        "id": "item_4", "type": "command_execution", "command": "/bin/bash -lc 'touch /etc/x'",
        "aggregated_output": "touch: cannot touch '/etc/x': Read-only file system\n",
        "exit_code": 1, "status": "failed"}}))
    assert output.content.endswith(
        "Codex was not allowed to run \"/bin/bash -lc 'touch /etc/x'\" on this machine (its "
        "sandbox is workspace-write); the runner's --codex-sandbox danger-full-access setting "
        "allows it.")
    # Without a sandbox it is an ordinary failure.
    [plain] = CodexStream().feed(json.dumps({"type": "item.completed", "item": {
        "id": "item_5", "type": "command_execution", "command": "false",
        "aggregated_output": "Read-only file system\n", "exit_code": 1, "status": "failed"}}))
    assert "not allowed" not in plain.content
