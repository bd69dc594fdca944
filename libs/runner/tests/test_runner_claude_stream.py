import json

from seedline_runner.engines.base import EngineOutput
from seedline_runner.engines.claude_stream import ClaudeStream, command_text, tool_result_text


def lines(*messages) -> list[str]:
    return [json.dumps(m) for m in messages]


def read(*messages) -> ClaudeStream:
    stream = ClaudeStream()
    for line in lines(*messages):
        stream.feed(line)
    return stream


INIT = {"type": "system", "subtype": "init", "session_id": "abc-1", "tools": []}


def test_text_tool_calls_results_and_the_result_map_to_timeline_kinds():
    stream = read(
        INIT,
        {"type": "assistant", "message": {"content": [
            {"type": "text", "text": "Looking."},
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

    assert stream.outputs == [
        EngineOutput("chat_assistant", "Looking."),
        EngineOutput("command", "Bash: git status"),
        EngineOutput("terminal", "clean"),
        EngineOutput("chat_assistant", "All clean."),
        EngineOutput("outcome", "success (2 turns, 2.5 s)"),
    ]
    assert (stream.session_id, stream.finished, stream.failed) == ("abc-1", True, False)


def test_a_failed_result_keeps_its_text():
    stream = read(INIT, {"type": "result", "subtype": "error_max_turns", "is_error": True,
                         "result": "ran out of turns", "session_id": "abc-1"})

    assert stream.outputs == [EngineOutput("outcome", "error_max_turns\nran out of turns")]
    assert stream.failed is True


def test_lines_that_are_not_understood_are_ignored():
    stream = ClaudeStream()
    for line in ["", "not json", "[1, 2]", '{"type": "stream_event"}', json.dumps(INIT)]:
        stream.feed(line)

    assert (stream.outputs, stream.session_id) == ([], "abc-1")


def test_the_result_names_the_conversation_when_no_init_line_came():
    stream = read({"type": "result", "subtype": "success", "result": "ok", "session_id": "abc-9"})

    assert stream.session_id == "abc-9"


def test_commands_without_a_command_field_show_their_input():
    assert command_text("Read", {"file_path": "a.py"}) == 'Read {"file_path": "a.py"}'
    assert command_text("TodoWrite", None) == "TodoWrite"
    assert command_text(None, {"command": "ls"}) == "tool: ls"


def test_tool_results_read_strings_and_text_blocks():
    assert tool_result_text("plain") == "plain"
    blocks = [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
    assert tool_result_text(blocks) == "a\nb"
    assert tool_result_text(None) == ""
