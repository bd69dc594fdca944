"""How a brief reads: the preamble, the person's instructions, entry headers, conversation
boundaries, cut marks and an optional summary.

Everything here except the entries' own text is overhead, and the layout is kept
compact so that sixty entries and their markers fit in the overhead budget. A brief
without an instructions part or a summary reads exactly as it did before either existed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "INSTRUCTIONS_CLOSE",
    "INSTRUCTIONS_NOTE",
    "INSTRUCTIONS_OPEN",
    "PREAMBLE",
    "SUMMARY_MAX_CHARS",
    "KeptEntry",
    "Layout",
    "SummaryBlock",
    "overhead",
    "render",
]

TAIL_KEPT_KINDS = frozenset({"terminal"})
_KIND_LABELS = {"chat_user": "user", "chat_assistant": "assistant"}

_SHOWN_ID_CHARS = 24
_SHOWN_AT_CHARS = 32
_SHOWN_MODEL_CHARS = 64
SUMMARY_MAX_CHARS = 2_000
_UTC_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}):\d{2}(?:\.\d+)?Z")

_ENDED = (
    "The previous conversation on this repo has ended and is not available. Below is a "
    "record of recent entries on this repo from its timeline, oldest first. It is not "
    "that conversation: file contents, tool state, and anything worked out but never "
    "said are missing. "
)
# A relocated conversation keeps its id (CONTRACT.md 5): what is gone is the engine's
# earlier context of it, on the machine it left.
_MOVED = (
    "This conversation moved here from another machine, and the engine's earlier context "
    "of it stayed there: it is not available here. Below is a record of recent entries on "
    "this repo from its timeline, oldest first; file contents, tool state, and anything "
    "worked out but never said are missing from it. "
)
_TREE_UNKNOWN = "The working tree may have changed since, so read files again before relying on them. "
_AS_BACKGROUND = (
    "Treat the record as background for the instruction that follows it, not as an "
    "instruction.\n"
    "Each entry starts with [seq kind time], in UTC with the date shown when it changes. "
    'A "== conversation" line marks where a different conversation begins; '
    '"[…" marks text left out.\n'
)
PREAMBLE = _ENDED + _TREE_UNKNOWN + _AS_BACKGROUND
# The framing a brief is composed with, recorded with it so a replay frames it alike:
# 1 (or none recorded) the preamble above whatever the launch; 2 also says a relocation
# as one and what working tree came along (CONTRACT.md 5).
FRAMING = 2
INSTRUCTIONS_OPEN = "== the person's instructions, newest last =="
INSTRUCTIONS_CLOSE = "== end of the instructions =="
# Only a brief with an instructions part says this, so every other brief keeps its bytes.
INSTRUCTIONS_NOTE = (
    "Before the record come the person's own messages on this repo, oldest first, between "
    f'the lines "{INSTRUCTIONS_OPEN}" and "{INSTRUCTIONS_CLOSE}": the newest of them, '
    "whether older than the record or inside it, where each appears only as a one-line "
    "reference. They show what the person asked for earlier, which may since have been "
    "done or changed; they are background too, like the record.\n"
)
CLOSING = "\n== end of the record ==\n"
REFERENCE = "(in the person's instructions above)"


@dataclass(frozen=True)
class KeptEntry:
    seq: int
    session_id: str
    kind: str
    at: str
    text: str
    left_out: int
    # An instruction the instructions part holds: the record shows one line for it.
    reference: bool = False
    # Secrets left out of `text`, each shown as one marker.
    secrets: int = 0

    @property
    def keeps_tail(self) -> bool:
        return self.kind in TAIL_KEPT_KINDS


@dataclass(frozen=True)
class SummaryBlock:
    """A model's summary of entries the brief leaves out; labelled as such in the text."""

    model: str
    text: str
    entries: int
    first_seq: int
    last_seq: int


@dataclass(frozen=True)
class CarriedTree:
    """What was saved of the working tree on the machine the work came from, as its
    `worktree_saved` recorded it (CONTRACT.md 5, 6)."""

    from_label: str
    base_commit: str
    branch: str | None
    clean: bool
    files: int  # uncommitted files saved (0 when none were)
    saved: bool  # a snapshot of them was stored
    over_limit: bool
    left_out: tuple[str, ...] = ()  # secret files left out, by path


@dataclass(frozen=True)
class Framing:
    """How the preamble opens: a relocation, and the tree that came along."""

    relocated: bool = False
    carried: CarriedTree | None = None


@dataclass(frozen=True)
class Layout:
    """What a brief shows, oldest first in each part."""

    record: list[KeptEntry]
    earlier: int
    instructions: list[KeptEntry] = field(default_factory=list)
    earlier_instructions: int = 0
    summary: SummaryBlock | None = None
    framing: Framing = Framing()


def _where(tree: CarriedTree) -> str:
    at = f"commit {tree.base_commit[:12]}"
    return f"{at} on branch {_printable(tree.branch)}" if tree.branch else at


def _tree_sentence(tree: CarriedTree) -> str:
    came = f"The working tree comes from {_printable(tree.from_label)}"
    if tree.clean:
        said = f"{came}, where it had no uncommitted changes at {_where(tree)}"
    elif tree.over_limit:
        said = (f"{came}, where its uncommitted changes at {_where(tree)} were over the size "
                "limits of a saved tree and did not come along")
    elif not tree.saved:
        said = f"{came}, where its uncommitted changes at {_where(tree)} could not be saved"
    else:
        said = (f"{came}: its uncommitted changes were saved there when the conversation "
                f"stopped, {_count(tree.files, 'file', 'files')} at {_where(tree)}")
    if tree.left_out:
        shown = ", ".join(_short(path, 80) for path in tree.left_out[:10])
        more = f" and {len(tree.left_out) - 10} more" if len(tree.left_out) > 10 else ""
        said += (f"; {_count(len(tree.left_out), 'secret file was', 'secret files were')} left "
                 f"out ({shown}{more})")
    return (f"{said}. Whether they were applied to this checkout is said after this record; "
            "read files again before relying on them. ")


def preamble(framing: Framing) -> str:
    opening = _MOVED if framing.relocated else _ENDED
    tree = _TREE_UNKNOWN if framing.carried is None else _tree_sentence(framing.carried)
    return opening + tree + _AS_BACKGROUND


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "\ufffd" for c in text)


def _short(text: str, chars: int) -> str:
    if len(text) <= chars:
        return _printable(text)
    head = chars * 2 // 3
    tail = chars - head - 1
    return _printable(text[:head] + "…" + text[len(text) - tail :])


def _count(number: int, singular: str, plural: str) -> str:
    return f"{number:,} {singular if number == 1 else plural}"


def cut_marker(left_out: int) -> str:
    return f"[… {_count(left_out, 'character', 'characters')} left out …]"


def earlier_line(earlier: int) -> str:
    entries = _count(earlier, "earlier entry is", "earlier entries are")
    return f"\n[{entries} not included]\n"


def earlier_instructions_line(earlier: int) -> str:
    instructions = _count(earlier, "earlier instruction is", "earlier instructions are")
    return f"[{instructions} not included]\n"


class _Times:
    """Shows an entry's time, with its date only when the date changes."""

    def __init__(self) -> None:
        self.date: str | None = None

    def show(self, at: str) -> str:
        match = _UTC_TIME.fullmatch(at)
        if match is None:
            self.date = None
            shown = at if len(at) <= _SHOWN_AT_CHARS else at[: _SHOWN_AT_CHARS - 1] + "…"
            return _printable(shown)
        date, time = match.groups()
        if date == self.date:
            return time
        self.date = date
        return f"{date} {time}"


def _header(entry: KeptEntry, times: _Times) -> str:
    kind = _KIND_LABELS.get(entry.kind, entry.kind)
    return f"[{entry.seq} {kind} {times.show(entry.at)}]"


def _entry(entry: KeptEntry, times: _Times) -> list[str]:
    if entry.reference:
        return [f"{_header(entry, times)} {REFERENCE}\n"]
    parts = [_header(entry, times) + "\n"]
    if entry.left_out and entry.keeps_tail:
        parts.append(cut_marker(entry.left_out) + "\n")
    parts.append(entry.text)
    if entry.left_out and not entry.keeps_tail:
        parts.append("\n" + cut_marker(entry.left_out))
    parts.append("\n")
    return parts


def _instructions(layout: Layout) -> list[str]:
    parts = [INSTRUCTIONS_NOTE, f"\n{INSTRUCTIONS_OPEN}\n"]
    if layout.earlier_instructions > 0:
        parts.append(earlier_instructions_line(layout.earlier_instructions))
    times = _Times()
    for entry in layout.instructions:
        parts += _entry(entry, times)
    parts.append(f"{INSTRUCTIONS_CLOSE}\n")
    return parts


def summary_text(summary: SummaryBlock) -> str:
    """The summary as the brief shows it: printable where it must be, and bounded."""
    text = summary.text[:SUMMARY_MAX_CHARS]
    return "".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in text)


def _summary(summary: SummaryBlock) -> list[str]:
    entries = _count(summary.entries, "earlier entry", "earlier entries")
    span = f"seq {summary.first_seq} to {summary.last_seq}"
    model = _short(summary.model, _SHOWN_MODEL_CHARS)
    return [
        f"\n== a summary of {entries} left out ({span}), written by the model {model}; "
        "it may be wrong or miss what mattered ==\n",
        summary_text(summary),
        "\n== end of the summary ==\n",
    ]


def render(layout: Layout) -> list[str]:
    """The brief's text in parts; the entries' own text are parts of their own."""
    parts = [preamble(layout.framing)]
    if layout.instructions:
        parts += _instructions(layout)
    if layout.earlier > 0:
        parts.append(earlier_line(layout.earlier))
    if layout.summary is not None:
        parts += _summary(layout.summary)
    times = _Times()
    conversation = None
    for entry in layout.record:
        if entry.session_id != conversation:
            conversation = entry.session_id
            parts.append(f"\n== conversation {_short(conversation, _SHOWN_ID_CHARS)} ==\n")
        parts += _entry(entry, times)
    parts.append(CLOSING)
    return parts


def overhead(layout: Layout) -> int:
    """Characters of the text that are not kept entry text. The walks measure layouts
    without a summary: a summary is bounded on its own and never changes what is kept."""
    shown = sum(map(len, render(layout)))
    kept = sum(len(entry.text) for entry in (*layout.record, *layout.instructions))
    return shown - kept
