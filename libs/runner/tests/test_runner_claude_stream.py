import json

from seedline_runner.engines.base import EngineOutput
from seedline_runner.engines.claude_stream import ClaudeStream, command_text, tool_result_text

INIT = {"type": "system", "subtype": "init", "session_id": "abc-1", "tools": []}


def read(*messages) -> tuple[ClaudeStream, list[list[EngineOutput]]]:
    """The stream after every message, and what each line gave on its own."""
    stream = ClaudeStream()
    return stream, [stream.feed(json.dumps(message)) for message in messages]


def test_each_line_gives_its_own_outputs_as_it_arrives():
    stream, per_line = read(
        INIT,
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "Looking."}]}},
        {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "git status"}},
        ]}},
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t1",
             "content": [{"type": "text", "text": "clean"}]},
        ]}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "All clean."}]}},
        {"type": "result", "subtype": "success", "is_error": False, "result": "All clean.",
         "session_id": "abc-1", "num_turns": 2, "duration_ms": 2500},
    )

    assert per_line == [
        [],
        [EngineOutput("chat_assistant", "Looking.")],
        [EngineOutput("command", "Bash: git status")],
        [EngineOutput("terminal", "clean")],
        [EngineOutput("chat_assistant", "All clean.")],
        [EngineOutput("outcome", "success (2 turns, 2.5 s)")],
    ]
    assert (stream.session_id, stream.finished, stream.failed) == ("abc-1", True, False)


def test_a_failed_result_keeps_its_text():
    _, per_line = read(INIT, {"type": "result", "subtype": "error_max_turns", "is_error": True,
                              "result": "ran out of turns", "session_id": "abc-1"})

    assert per_line[1] == [EngineOutput("outcome", "error_max_turns\nran out of turns")]


def test_a_refused_resume_names_the_requested_id_but_is_no_conversation():
    # The line Claude Code 2.1.332 writes for --resume of an id it has no transcript for.
    refusal = {
        "type": "result", "subtype": "error_during_execution", "duration_ms": 0,
        "is_error": True, "num_turns": 0, "session_id": "11111111-2222-3333-4444-555555555555",
        "errors": ["No conversation found with session ID: 11111111-2222-3333-4444-555555555555"],
    }

    stream, _ = read(refusal)

    assert stream.session_id is None
    assert stream.failed is True
    assert stream.errors == [refusal["errors"][0]]


def test_lines_that_are_not_understood_are_skipped_and_new_types_noted():
    stream = ClaudeStream()
    given = ["", "not json", "[1, 2]", '{"type": "system", "subtype": "status"}',
             '{"type": "tool_progress", "elapsed": 3}', json.dumps(INIT)]

    outputs = [stream.feed(line) for line in given]

    assert outputs == [[]] * len(given)
    assert stream.session_id == "abc-1"
    assert stream.unknown_types == {"tool_progress"}


def test_commands_without_a_command_field_show_their_input():
    assert command_text("Read", {"file_path": "a.py"}) == 'Read {"file_path": "a.py"}'
    assert command_text("TodoWrite", None) == "TodoWrite"
    assert command_text(None, {"command": "ls"}) == "tool: ls"


def test_tool_results_read_strings_and_text_blocks():
    assert tool_result_text("plain") == "plain"
    blocks = [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
    assert tool_result_text(blocks) == "a\nb"
    assert tool_result_text(None) == ""
