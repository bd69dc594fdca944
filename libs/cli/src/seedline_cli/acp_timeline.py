"""Timeline entries as Agent Client Protocol ``session/update``s, without I/O.

What an editor shows of a conversation is what its timeline holds: a person's message
is a user message, the engine's words an agent message, a command a tool call as it
starts and the output after it that call's result as it finishes, the engine's thinking
a thought. Outcomes and
system entries are said as agent messages, set apart, so nothing recorded is hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from seedline_runner.engines.tool_errors import is_failed_tool_text

_TITLE_CHARS = 80


@dataclass
class UpdateWriter:
    """Turns entries into updates in order; knows which tool calls still wait for output.

    A command starts a tool call (``tool_call``, in progress); the next output the engine
    records completes the oldest call still open (``tool_call_update`` with that output:
    ``failed`` when the engine marked it a failed tool call), since engines record results
    in the order they started the calls.
    """

    _open_tools: list[str] = field(default_factory=list)
    _said_before: bool = False
    _seen: set[int] = field(default_factory=set)

    def updates(self, entry: dict[str, Any]) -> list[Any]:
        seq = int(entry.get("seq") or 0)
        if seq in self._seen:
            return []
        self._seen.add(seq)
        kind, content = entry.get("kind"), str(entry.get("content") or "")
        if kind == "chat_user":
            self._said_before = False
            return [*self.close_open_tools("completed"), update_user_message_text(content)]
        if kind == "command":
            tool = f"seq-{seq}"
            self._open_tools.append(tool)
            return [
                start_tool_call(
                    tool,
                    _title(content),
                    kind="execute",
                    status="in_progress",
                    raw_input={"command": content},
                )
            ]
        if kind == "terminal":
            result = [tool_content(text_block(content))]
            status = "failed" if is_failed_tool_text(content) else "completed"
            if self._open_tools:
                tool = self._open_tools.pop(0)
                return [update_tool_call(tool, status=status, content=result,
                                         raw_output={"output": content})]
            return [
                start_tool_call(
                    f"seq-{seq}", "output", kind="execute", status=status, content=result
                )
            ]
        if kind == "brain":
            return [update_agent_thought_text(content)]
        text = content if kind == "chat_assistant" else f"[{kind}] {content}"
        if self._said_before:
            text = "\n\n" + text
        self._said_before = True
        return [update_agent_message_text(text)]

    def close_open_tools(self, status: str) -> list[Any]:
        """Every tool call still open, ended with `status` (its turn is over)."""
        tools, self._open_tools = self._open_tools, []
        return [update_tool_call(tool, status=status) for tool in tools]


def _title(command: str) -> str:
    first = command.strip().splitlines()[0] if command.strip() else "command"
    return first if len(first) <= _TITLE_CHARS else first[: _TITLE_CHARS - 1] + "…"


def repo_for(cwd: str, repo: str | None, repos_dir: Path | None) -> str:
    """The repo a folder is, by the documented rule.

    ``--repo`` names it outright; else a folder under ``--repos-dir`` is its path there
    (``DIR/apps/x`` is ``apps/x``, as for runners); else it is the folder's own name.
    """
    if repo:
        return repo
    folder = Path(cwd).resolve()
    if repos_dir is not None:
        base = repos_dir.resolve()
        if folder != base and folder.is_relative_to(base):
            return folder.relative_to(base).as_posix()
    return folder.name
