"""Reading `codex exec --json` events: lines as Codex 0.171.0 wrote them."""

import json

from seedline_runner.engines.base import EngineOutput
from seedline_runner.engines.codex_stream import CodexStream

# One turn of the real CLI against the Responses stand-in, two shell calls.
REAL_TURN = [
    '{"type":"thread.started","thread_id":"01a230f3-5784-7993-b1b5-6849a274f088"}',
    '{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata '
    'for `standin-model` not found. Defaulting to fallback metadata; this can degrade '
    'performance and cause issues."}}',
    '{"type":"turn.started"}',
    '{"type":"item.completed","item":{"id":"item_1","type":"agent_message",'
    '"text":"step 1: running echo one"}}',
    '{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":'
    '"/bin/bash -lc \'echo one\'","aggregated_output":"","exit_code":null,"status":"in_progress"}}',
    '{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":'
    '"/bin/bash -lc \'echo one\'","aggregated_output":"one\\n","exit_code":0,'
    '"status":"completed"}}',
    '{"type":"item.completed","item":{"id":"item_5","type":"agent_message",'
    '"text":"stand-in heard 1 prompt(s): run the steps"}}',
    '{"type":"turn.completed","usage":{"input_tokens":30,"cached_input_tokens":0,'
    '"cache_write_input_tokens":0,"output_tokens":15,"reasoning_output_tokens":0}}',
]


def test_a_real_turn_gives_each_output_on_the_line_that_carries_it():
    stream = CodexStream()

    per_line = [stream.feed(line) for line in REAL_TURN]

    assert per_line == [
        [],
        [],  # the CLI's own warning
        [],
        [EngineOutput("chat_assistant", "step 1: running echo one")],
        [EngineOutput("command", "shell: /bin/bash -lc 'echo one'")],
        [EngineOutput("terminal", "one\n")],
        [EngineOutput("chat_assistant", "stand-in heard 1 prompt(s): run the steps")],
        [EngineOutput("outcome", "completed (30 input tokens, 15 output tokens)")],
    ]
    # Only turn.completed, the CLI's own end of the turn, ends it.
    assert [o.ends_turn for line in per_line for o in line] == [False] * 4 + [True]
    assert stream.thread_id == "01a230f3-5784-7993-b1b5-6849a274f088"
    assert (stream.finished, stream.failed, stream.unknown_types) == (True, False, set())


def item(kind: str, **fields) -> str:
    return json.dumps({"type": "item.completed", "item": {"id": "i", "type": kind, **fields}})


def test_a_failing_command_says_its_exit_code():
    stream = CodexStream()

    [output] = stream.feed(item("command_execution", command="make", exit_code=2,
                                aggregated_output="make: *** no rule\n"))

    assert output == EngineOutput("terminal", "[tool error] make: *** no rule\n(exit code 2)")


def test_file_changes_mcp_calls_and_searches_are_tool_calls():
    stream = CodexStream()

    outputs = [
        *stream.feed(item("file_change", changes=[{"path": "a.py", "kind": "update"}])),
        *stream.feed(item("mcp_tool_call", server="docs", tool="search",
                          arguments={"q": "castling"}, result={"hits": 2})),
        *stream.feed(item("web_search", query="en passant")),
    ]

    assert outputs == [
        EngineOutput("command", "apply_patch: update a.py"),
        EngineOutput("command", 'docs.search {"q": "castling"}'),
        EngineOutput("terminal", '{"hits": 2}'),
        EngineOutput("command", "web_search: en passant"),
    ]


def test_a_failed_turn_is_an_outcome_and_new_kinds_are_noted_not_fatal():
    stream = CodexStream()

    outputs = [
        *stream.feed('{"type": "turn.failed", "error": {"message": "rate limited"}}'),
        *stream.feed('{"type": "thread.compacted"}'),
        *stream.feed(item("hologram", text="?")),
        *stream.feed("not json"),
    ]

    assert outputs == [EngineOutput("outcome", "error\nrate limited")]
    assert stream.failed is True and stream.errors == ["rate limited"]
    assert stream.unknown_types == {"thread.compacted", "item:hologram"}
    assert stream.thread_id is None
