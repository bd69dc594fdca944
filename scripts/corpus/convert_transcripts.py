"""Convert public coding-agent transcripts into the corpus `seedline eval briefs` reads.

One transcript per output line: a JSON list of [kind, content] rows in timeline order,
with the kinds of CONTRACT.md 2.1. Two sources (see tests/data/transcripts/README.md):

- aider chat histories (`.aider.chat.history.md`): one transcript per
  "# aider chat started at" section. `#### ` lines are the person's (chat_user; an
  aider command such as /add or /run is `command`, text aider itself put in the person's
  place, such as its lint-fix request, is `system`), `> ` lines are aider's own output
  (`terminal`; the start-up banner is `system`), everything else is the model's reply
  (`chat_assistant`).
- SWE-agent trajectories (`.traj`): the system prompt is `system`, the task given to
  the agent is `chat_user`, each step's thought is `chat_assistant`, its action
  `command` and the observation `terminal`. Demonstrations replayed into the
  history (`is_demo`) are left out; identical trajectories are kept once.

Usage:
  python scripts/corpus/convert_transcripts.py \\
      --aider AIDER_CHECKOUT/tests/fixtures/chat-history.md \\
      --swe-agent SWE_AGENT_CHECKOUT \\
      --out tests/data/transcripts
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path

Row = list[str]  # [kind, content]

AIDER_SECTION = re.compile(r"^# aider chat started at (.*)$", re.MULTILINE)
# Commands the person types that address the model rather than aider itself.
AIDER_CHAT_COMMANDS = ("/ask ", "/code ", "/architect ")
# Text aider writes in the person's place.
AIDER_GENERATED = ("# Fix any errors below", "# Question:", "I ran this command:",
                   "I added these files to the chat:")
AIDER_TRANSCRIPTS = 24
AIDER_MOST_ASKED = 4
AIDER_MIN_ROWS = 10
AIDER_MIN_INSTRUCTIONS = 2
MAX_ROW_CHARS = 8_000


def _line_text(line: str, prefix: str) -> str:
    # aider ends its markdown lines with two spaces to force a line break.
    return line[len(prefix):].rstrip() if line.startswith(prefix) else line.rstrip()


def _aider_kind(marker: str, text: str, first: bool) -> str:
    if marker == "####":
        if text.startswith(AIDER_GENERATED):
            return "system"
        if text.startswith("/") and not text.startswith(AIDER_CHAT_COMMANDS):
            return "command"
        return "chat_user"
    if marker == ">":
        return "system" if first and "Aider v" in text else "terminal"
    return "chat_assistant"


def aider_rows(section: str) -> list[Row]:
    """The rows of one aider chat section: runs of lines with the same marker."""
    rows: list[Row] = []
    marker, lines = None, []

    def flush() -> None:
        text = "\n".join(lines).strip("\n")
        if marker is not None and text.strip():
            rows.append([_aider_kind(marker, text, first=not rows), text])

    in_code = False
    for line in section.splitlines():
        # Inside the model's code blocks every line is its own, even one that starts
        # with ">" (such as the ">>>>>>> REPLACE" of an edit).
        if not in_code and line.startswith("#### ") or line == "####":
            current, text = "####", _line_text(line, "#### ")
        elif not in_code and (line.startswith("> ") or line == ">"):
            current, text = ">", _line_text(line, "> ")
        elif not in_code and marker == ">" and line.strip():
            # aider wraps some of its own lines without the prefix ("Cost: ...").
            current, text = ">", line.rstrip()
        else:
            current, text = "text", line.rstrip()
            if text.startswith("```"):
                in_code = not in_code
        if current != marker:
            flush()
            marker, lines = current, []
        lines.append("" if text in ("####", ">") else text)
    flush()
    return rows


def aider_transcripts(history: str) -> list[tuple[str, list[Row]]]:
    """Sections of real work (enough rows and instructions), spread over their sizes."""
    starts = list(AIDER_SECTION.finditer(history))
    sections = []
    for index, start in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(history)
        rows = aider_rows(history[start.end():end])
        instructions = sum(1 for kind, _ in rows if kind == "chat_user")
        if len(rows) >= AIDER_MIN_ROWS and instructions >= AIDER_MIN_INSTRUCTIONS:
            sections.append((f"aider chat started at {start.group(1).strip()}", rows))
    if len(sections) <= AIDER_TRANSCRIPTS:
        return sections

    def instructions(item: tuple[str, list[Row]]) -> int:
        return sum(1 for kind, _ in item[1] if kind == "chat_user")

    # The ones with the most instructions (more than the brief's part holds), then the
    # rest evenly over their sizes, including the smallest and the largest.
    most = sorted(sections, key=lambda item: (-instructions(item), item[0]))[:AIDER_MOST_ASKED]
    rest = sorted((s for s in sections if s not in most),
                  key=lambda item: (sum(len(content) for _, content in item[1]), item[0]))
    count = AIDER_TRANSCRIPTS - AIDER_MOST_ASKED
    step = (len(rest) - 1) / (count - 1)
    return [rest[round(i * step)] for i in range(count)] + most


def swe_agent_rows(trajectory: dict) -> list[Row]:
    rows: list[Row] = []
    for message in trajectory.get("history", []):
        if message.get("is_demo"):
            continue
        role, content = message.get("role"), message.get("content") or ""
        if isinstance(content, list):  # content blocks of a tool-calling model
            content = "\n".join(str(part.get("text", "")) for part in content)
        if role == "system":
            rows.append(["system", content])
        elif role == "user" and not any(kind == "chat_user" for kind, _ in rows):
            rows.append(["chat_user", content])
        elif role in ("user", "tool"):
            rows.append(["terminal", content])
        elif role == "assistant":
            thought = message.get("thought", content)
            action = message.get("action")
            if thought and thought.strip():
                rows.append(["chat_assistant", thought.strip()])
            if action and action.strip():
                rows.append(["command", action.strip()])
    return [row for row in rows if row[1].strip()]


def swe_agent_transcripts(root: Path) -> list[tuple[str, list[Row]]]:
    seen: set[str] = set()
    out = []
    for path in sorted(root.rglob("*.traj")):
        try:
            rows = swe_agent_rows(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, AttributeError):
            continue
        digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
        if not rows or digest in seen:
            continue
        seen.add(digest)
        out.append((f"SWE-agent {path.relative_to(root)}", rows))
    return out


# Text Claude Code or Codex put in the person's place rather than the person typing it.
AGENT_GENERATED = (
    "<command-", "<local-command", "Caveat: The messages below were generated",
    "<task-notification>", "[Request interrupted", "This session is being continued",
    "Base directory for this skill", "<system-reminder>", "# AGENTS.md instructions",
    "<environment_context>", "<user_instructions>", "<permissions instructions>",
)


def _person_or_system(text: str) -> str:
    return "system" if text.lstrip().startswith(AGENT_GENERATED) else "chat_user"


def _tool_call(name: str, arguments: object) -> str:
    """A tool call as one command line: a shell command as typed, anything else as JSON."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return f"{name} {arguments}"
    if isinstance(arguments, dict):
        command = arguments.get("command") or arguments.get("cmd")
        if isinstance(command, str) and name.lower() in ("bash", "exec_command", "shell"):
            return command
        if isinstance(command, list) and all(isinstance(part, str) for part in command):
            return " ".join(command)
    return f"{name} {json.dumps(arguments, ensure_ascii=False)}"


def _block_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_block_text(part.get("text", part.get("content", "")))
                         for part in content if isinstance(part, dict))
    return ""


def claude_code_rows(lines: list[str]) -> list[Row]:
    """A Claude Code transcript (~/.claude/projects/*/<id>.jsonl), its main thread."""
    rows: list[Row] = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        kind = record.get("type")
        if record.get("isSidechain") or kind not in ("user", "assistant", "system"):
            continue
        if kind == "system":
            rows.append(["system", str(record.get("content") or "")])
            continue
        content = (record.get("message") or {}).get("content")
        if isinstance(content, str):
            blocks = [{"type": "text", "text": content}]
        else:
            blocks = [b for b in content or [] if isinstance(b, dict)]
        for block in blocks:
            part = block.get("type")
            if part == "text" and kind == "user":
                text = block.get("text", "")
                rows.append(["system" if record.get("isMeta") else _person_or_system(text), text])
            elif part == "text":
                rows.append(["chat_assistant", block.get("text", "")])
            elif part == "thinking":
                rows.append(["brain", block.get("thinking", "")])
            elif part == "tool_use":
                rows.append(["command", _tool_call(block.get("name", "tool"), block.get("input"))])
            elif part == "tool_result":
                rows.append(["terminal", _block_text(block.get("content"))])
    return [row for row in rows if row[1].strip()]


def codex_rows(lines: list[str]) -> list[Row]:
    """A Codex CLI rollout (~/.codex/sessions/**/rollout-*.jsonl): its response items."""
    rows: list[Row] = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        item = record.get("payload") if record.get("type") == "response_item" else None
        if not isinstance(item, dict):
            continue
        part = item.get("type")
        if part == "message":
            text = _block_text(item.get("content"))
            role = item.get("role")
            kind = {"assistant": "chat_assistant", "user": _person_or_system(text)}.get(role)
            rows.append([kind or "system", text])
        elif part == "reasoning":
            rows.append(["brain", _block_text(item.get("summary"))])
        elif part in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments", item.get("input"))
            rows.append(["command", _tool_call(item.get("name", "tool"), arguments)])
        elif part in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            rows.append(["terminal", output if isinstance(output, str) else _block_text(output)])
    return [row for row in rows if row[1].strip()]


def session_transcripts(paths: list[Path], rows_of, name: str) -> list[tuple[str, list[Row]]]:
    out = []
    for path in paths:
        rows = rows_of(path.read_text(encoding="utf-8").splitlines())
        if rows:
            out.append((f"{name} {path.name}", rows))
    return out


def bounded(rows: list[Row]) -> list[Row]:
    """Rows cut to MAX_ROW_CHARS the way a brief cuts them (terminal output keeps its tail,
    everything else its head): a brief keeps at most 4,000 characters of an entry, so its
    figures do not change, and the corpus stays small."""
    out = []
    for kind, content in rows:
        if len(content) > MAX_ROW_CHARS:
            content = content[-MAX_ROW_CHARS:] if kind == "terminal" else content[:MAX_ROW_CHARS]
        out.append([kind, content])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aider", type=Path, required=True, help="an aider chat history")
    parser.add_argument("--swe-agent", type=Path, required=True, help="a SWE-agent checkout")
    parser.add_argument("--claude-code", type=Path, nargs="*", default=[],
                        help="Claude Code transcripts (JSON Lines)")
    parser.add_argument("--codex", type=Path, nargs="*", default=[], help="Codex rollout files")
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    args = parser.parse_args()
    transcripts = aider_transcripts(args.aider.read_text(encoding="utf-8"))
    transcripts += swe_agent_transcripts(args.swe_agent)
    transcripts += session_transcripts(args.claude_code, claude_code_rows, "Claude Code")
    transcripts += session_transcripts(args.codex, codex_rows, "Codex")
    transcripts = [(source, bounded(rows)) for source, rows in transcripts]
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "corpus.jsonl").open("w", encoding="utf-8") as corpus, \
            (args.out / "sources.jsonl").open("w", encoding="utf-8") as sources:
        for line, (source, rows) in enumerate(transcripts, start=1):
            corpus.write(json.dumps(rows, ensure_ascii=False) + "\n")
            kinds = [kind for kind, _ in rows]
            sources.write(json.dumps({
                "line": line, "source": source, "rows": len(rows),
                "instructions": kinds.count("chat_user"),
                "tool_rows": kinds.count("terminal") + kinds.count("command"),
                "chars": sum(len(content) for _, content in rows),
            }) + "\n")
    print(f"wrote {len(transcripts)} transcripts to {args.out / 'corpus.jsonl'}")


if __name__ == "__main__":
    main()
