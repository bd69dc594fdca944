"""Reading one step back from an engine's own transcript, as live publishing gives it.

The lines follow what Claude Code 2.1 and Codex 0.171 write (trimmed to the fields
that matter), including a second step after a resume and a tool call cut off by a kill.
"""

from __future__ import annotations

import json

from seedline_runner.containment.ledger import Ledger, prompt_digest, step_note
from seedline_runner.engines.base import EngineOutput
from seedline_runner.engines.claude_stream import ClaudeStream
from seedline_runner.transcript_tail import claude_step, codex_join, codex_step


CLAUDE_CONVERSATION = "9b1f0c2e-claude-conversation"


def claude_line(kind: str, content, uuid: str = "") -> str:
    """A record of Claude Code's transcript: it names its conversation `sessionId`."""
    record = {"type": kind, "message": {"role": kind, "content": content}}
    if uuid:
        record |= {"uuid": uuid, "sessionId": CLAUDE_CONVERSATION}
    return json.dumps(record)


def as_stream_json(line: str) -> str:
    """The same record as the live stream-json output prints it (`session_id`)."""
    record = json.loads(line)
    if "sessionId" in record:
        record["session_id"] = record.pop("sessionId")
    return json.dumps(record)


CLAUDE = [
    json.dumps({"type": "queue-operation"}),
    claude_line("user", "add castling", "u-1"),
    claude_line("assistant", [{"type": "text", "text": "castling added"}], "a-1"),
    claude_line("user", "now en passant", "u-2"),
    json.dumps({"type": "attachment"}),
    claude_line("assistant", [{"type": "text", "text": "step 1: running echo step-1"}], "a-2"),
    claude_line("assistant", [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                               "input": {"command": "echo step-1"}}], "a-3"),
    claude_line("user", [{"tool_use_id": "toolu_1", "type": "tool_result",
                          "content": "step-1", "is_error": False}], "u-3"),
    claude_line("assistant", [{"type": "tool_use", "id": "toolu_2", "name": "Bash",
                               "input": {"command": "sleep 4; touch written"}}], "a-4"),
]


def test_a_claude_step_is_read_from_its_prompt_on():
    outputs = claude_step(CLAUDE, prompt_digest("now en passant"))

    assert outputs == [
        EngineOutput("chat_assistant", "step 1: running echo step-1"),
        EngineOutput("command", "Bash: echo step-1"),
        EngineOutput("terminal", "step-1"),
        EngineOutput("command", "Bash: sleep 4; touch written"),
    ]


def test_a_claude_step_read_back_matches_the_live_stream_entry_for_entry():
    # The live stream carries the same assistant and user lines, between an init and a result.
    stream = ClaudeStream()
    init = json.dumps({"type": "system", "subtype": "init", "session_id": CLAUDE_CONVERSATION})
    live = [o for line in [init, *CLAUDE[3:]] for o in stream.feed(as_stream_json(line))]
    read_back = claude_step(CLAUDE, prompt_digest("now en passant"))

    assert read_back == live
    # Each with the id the live stream gave it (the record's own), so nothing goes in twice.
    assert [o.entry_id for o in read_back] == [o.entry_id for o in live]
    assert [o.entry_id for o in read_back] == [
        f"claude:{CLAUDE_CONVERSATION}:{record}:0" for record in ("a-2", "a-3", "u-3", "a-4")]


def test_a_step_whose_prompt_is_not_in_the_transcript_is_none():
    assert claude_step(CLAUDE, prompt_digest("something else")) is None
    assert codex_step(CODEX, prompt_digest("something else")) is None


def codex_line(kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": "2026-12-02T15:09:18.068Z", "type": kind, "payload": payload})


def user_message(text: str) -> str:
    return codex_line("response_item", {"type": "message", "role": "user",
                                        "content": [{"type": "input_text", "text": text}]})


def assistant_message(text: str) -> str:
    return codex_line("response_item", {
        "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})


CODEX = [
    codex_line("session_meta", {"id": "01a2374d"}),
    user_message("<environment_context>\n  <cwd>/src</cwd>\n</environment_context>"),
    user_message("add castling"),
    assistant_message("castling added"),
    user_message("now en passant"),
    assistant_message("step 1: running echo step-1"),
    codex_line("response_item", {"type": "function_call", "name": "exec_command",
                                 "arguments": json.dumps({"cmd": "echo step-1"}),
                                 "call_id": "call_1"}),
    codex_line("event_msg", {"type": "item_completed", "item": {
        "type": "CommandExecution", "id": "call_1",
        "command": ["/bin/bash", "-lc", "echo step-1"],
        "aggregated_output": "step-1\n", "exit_code": 0}}),
    codex_line("response_item", {"type": "function_call_output", "call_id": "call_1",
                                 "output": "Process exited with code 0\nOutput:\nstep-1\n"}),
    codex_line("event_msg", {"type": "token_count"}),
    codex_line("response_item", {"type": "function_call", "name": "exec_command",
                                 "arguments": json.dumps({"cmd": "false"}), "call_id": "call_2"}),
    codex_line("event_msg", {"type": "item_completed", "item": {
        "type": "CommandExecution", "id": "call_2", "command": ["/bin/bash", "-lc", "false"],
        "aggregated_output": "", "exit_code": 1}}),
    codex_line("response_item", {"type": "function_call", "name": "exec_command",
                                 "arguments": json.dumps({"cmd": "sleep 4; touch written"}),
                                 "call_id": "call_3"}),
]


def test_a_codex_step_is_read_as_exec_json_shows_it():
    outputs = codex_step(CODEX, prompt_digest("now en passant"))

    assert outputs == [
        EngineOutput("chat_assistant", "step 1: running echo step-1"),
        EngineOutput("command", "shell: /bin/bash -lc 'echo step-1'"),
        EngineOutput("terminal", "step-1\n"),
        EngineOutput("command", "shell: /bin/bash -lc false"),
        # A failed command reads as the live adapter publishes it (tool_errors).
        EngineOutput("terminal", "[tool error] (exit code 1)"),
        # Cut off by the kill: named with the shell Codex wrapped the other commands in.
        EngineOutput("command", "shell: /bin/bash -lc 'sleep 4; touch written'"),
    ]


def test_the_first_step_of_a_thread_starts_after_codex_context(tmp_path):
    outputs = codex_step(CODEX[:4], prompt_digest("add castling"))

    assert outputs == [EngineOutput("chat_assistant", "castling added")]


def test_a_ledger_keeps_a_note_per_pen_until_it_is_discarded(tmp_path):
    ledger = Ledger(tmp_path)
    note = step_note(session_id="csess_1", instance_id="i", repo="apps/x", engine="claude",
                     step_id="turn-7", prompt="now en passant\n")

    ledger.write("csess_1", note)
    again = Ledger(tmp_path).notes()
    ledger.discard("csess_1")

    assert again == {"csess_1": note}
    assert note.prompt_sha256 == prompt_digest("now en passant")
    assert Ledger(tmp_path).notes() == {}


# What Codex 0.171 wrote in `codex exec --json` for these commands (run by /bin/bash -lc).
CODEX_NAMED = {
    "echo it's \"q\"": '/bin/bash -lc "echo it\'s \\"q\\""',
    "echo it's $x": '/bin/bash -lc "echo it\'s "\'$x\'',
    "echo a=b,c.d_e+f:g@h%i/j-k": "/bin/bash -lc 'echo a=b,c.d_e+f:g@h%i/j-k'",
    "echo ~x #x a*b é": "/bin/bash -lc 'echo ~x #x a*b é'",
    "'x": '/bin/bash -lc "\'x"',
    "echo x\\y'z": '/bin/bash -lc "echo x\\\\y\'z"',
    "echo a!b {c} [d] (e) <f> |g ;h &i": "/bin/bash -lc 'echo a!b {c} [d] (e) <f> |g ;h &i'",
    'echo "a"\\"b': '/bin/bash -lc "echo \\"a\\"\\\\\\"b"',
    "^x": "/bin/bash -lc '^x'",
    'echo "a b" $HOME; setsid sh -c \'echo x\' && echo `date` \\ ok':
        '/bin/bash -lc \'echo "a b" $HOME; setsid sh -c \''
        '"\'echo x\' && echo "\'`date` \'"\\\\ ok"',
}


def test_commands_read_back_are_named_as_codex_names_them():
    for command, named in CODEX_NAMED.items():
        assert codex_join(["/bin/bash", "-lc", command]) == named, command


def test_a_call_cut_off_before_it_ran_is_named_with_the_shell_of_the_others():
    outputs = codex_step(CODEX, prompt_digest("now en passant"))

    named = "shell: /bin/bash -lc 'sleep 4; touch written'"
    assert outputs[-1] == EngineOutput("command", named)
