"""What the MCP tools say, as plain text for a person (CONTRACT.md 3.3): the notice
first, then the facts behind it. Pure functions of contract data."""

from __future__ import annotations

from typing import Iterable, Sequence

from seedline_contracts.sessions import BriefGetReply, BriefStats, LiveConversation, OpenReply
from seedline_contracts.timeline import MAX_CONTENT_CHARS, TimelineRow
from seedline_core.notices import BRIEF_GIVEN, next_message_text, no_brief_receipt
from seedline_platform.lifecycle_events import brief_receipt, no_brief_of

from .tenant import Machine

ENTRY_PREVIEW_CHARS = 600


def machine_name(node_id: str, machines: Iterable[Machine]) -> str:
    for machine in machines:
        if machine.node_id == node_id:
            return f"{machine.label} ({node_id})"
    return node_id


def receipt(brief: BriefStats | BriefGetReply | None, told: str | None = None,
            no_brief: str | None = None) -> str:
    """`told`: whether the engine was given it, or why not (CONTRACT.md 3.2);
    `no_brief`: why none was offered, as recorded."""
    if brief is None:
        return no_brief_receipt(no_brief)
    label = f" ({told})" if told and told != BRIEF_GIVEN else ""
    redacted = getattr(brief, "redacted", 0) or 0
    secrets = (f", {redacted} secret{'' if redacted == 1 else 's'} left out"
               if redacted else "")
    return (
        f"Brief receipt{label}: {brief.rows} {'entry' if brief.rows == 1 else 'entries'}, "
        f"{brief.chars:,} characters of entry text, "
        f"{brief.omitted_rows} earlier entries left out{secrets}, up to seq {brief.until_seq}, "
        f"sha256 {brief.sha256}."
    )


def open_text(reply: OpenReply, repo: str, machines: Sequence[Machine], moved: bool = False
              ) -> str:
    decided = reply.continuity
    verb = "Moved" if moved else "Opened"
    lines = [
        reply.notice.mcp,
        "",
        f"{verb}: conversation {reply.session_id} on {repo}, machine "
        f"{machine_name(reply.node_id, machines)}.",
        f"Decision: {decided.mode} ({decided.reason_code}): {decided.reason}.",
    ]
    if decided.resume_from:
        lines.append(f"Continuing from: conversation {decided.resume_from}.")
    lines.append(f"Outcome, as the machine confirmed it: {reply.outcome}.")
    lines.append(receipt(reply.brief, brief_receipt(reply) if reply.brief else None, no_brief_of(reply)))
    return "\n".join(lines)


def brief_text(session_id: str, brief: BriefGetReply, told: str | None = None) -> str:
    """The brief byte for byte; whether the engine was given it is what the open's receipt
    says (`told` None: no receipt of it was found), never assumed."""
    given = " The engine was given it." if told == BRIEF_GIVEN else ""
    return (
        f"The brief last offered to conversation {session_id}, byte for byte.{given}\n"
        f"{receipt(brief, told)}\n\n{brief.text}"
    )


def _preview(content: str) -> str:
    flat = content if len(content) <= ENTRY_PREVIEW_CHARS else (
        content[:ENTRY_PREVIEW_CHARS] + f" … ({len(content) - ENTRY_PREVIEW_CHARS:,} more "
        "characters)"
    )
    return flat.replace("\n", "\n    ")


def timeline_text(repo: str, rows: Sequence[TimelineRow], has_more: bool,
                  decisions: dict[str, str]) -> str:
    """Oldest first, a line where each conversation begins, with how it was opened."""
    if not rows:
        return f"The timeline of {repo} has no entries yet."
    count = f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}"
    lines = [f"Timeline of {repo}, {count}, oldest first"
             + (" (older entries exist: pass before_seq to read them)." if has_more else ".")]
    current = None
    for row in rows:
        if row.session_id != current:
            current = row.session_id
            lines.append("")
            lines.append(f"── conversation {current} ──")
            if current in decisions:
                lines.append(f"   latest open: {decisions[current]}")
        cut = f" (cut from {row.truncated_from:,} characters)" if row.truncated_from else ""
        lines.append(f"#{row.seq} {row.at} {row.kind}{cut}: {_preview(row.content)}")
    return "\n".join(lines)


def conversations_text(live: Sequence[LiveConversation], machines: Sequence[Machine]) -> str:
    if not live:
        return "No conversation is live on this instance."
    lines = [f"{len(live)} live conversation{'s' if len(live) != 1 else ''}:"]
    for c in live:
        outcome = f", outcome {c.outcome}" if c.outcome else ""
        lines.append(f"- {c.repo}: conversation {c.session_id}, engine {c.engine}, on "
                     f"{machine_name(c.node_id, machines)}{outcome}, "
                     f"last activity {c.last_activity_at}")
    return "\n".join(lines)


def machines_text(machines: Sequence[Machine]) -> str:
    if not machines:
        return ("No machine is online for this instance. Start one with "
                "`seedline runner --node-id ID --label LABEL --engine ENGINE`.")
    lines = [f"{len(machines)} machine{'s' if len(machines) != 1 else ''} online:"]
    for m in machines:
        hosts = ", ".join(m.live) if m.live else "nothing of this instance"
        lines.append(f"- {m.label} ({m.node_id}): engines {', '.join(m.engines) or 'none'}; "
                     f"hosts {hosts}")
    return "\n".join(lines)


def stop_text(session_id: str, stopped: bool) -> str:
    if not stopped:
        return f"Conversation {session_id} was not running, so nothing changed."
    return f"Stopped conversation {session_id}. {next_message_text()}"


def message_text(repo: str, seq: int, effect: str) -> str:
    return f"Your message is in the timeline of {repo} (seq {seq}). {effect}"


# Errors the tools raise themselves; the backend's own come from seedline_core.notices.
NO_MACHINE_ONLINE = ("No machine is online for this instance, so nothing can be opened; start "
                     "`seedline runner` on one and try again.")
NEVER_WORKED_ON = ("No machine has worked on {repo} yet, so a message cannot wake a "
                   "conversation there; use open_conversation with this message as its "
                   "instruction.")
MESSAGE_TOO_LONG = ("The message is {chars:,} characters; the limit is "
                    f"{MAX_CONTENT_CHARS:,}, so shorten it or split it into several.")
EMPTY_MESSAGE = "The message is empty; write what you want the engine to do."


def choose_machine(machines: Sequence[Machine]) -> str:
    names = ", ".join(f"{m.label} ({m.node_id})" for m in machines)
    return f"Several machines are online ({names}); say which one with the machine argument."


def choose_engine(machine: str, engines: Sequence[str]) -> str:
    return (f"The machine {machine} offers several engines ({', '.join(engines)}); say which "
            "one with the engine argument.")


def no_engine(machine: str) -> str:
    return f"The machine {machine} offers no engine; start its runner with --engine."


def engines_unknown(machine: str) -> str:
    return (f"The machine {machine} is not online, so which engines it offers is not known; "
            "start it, or name the engine with the engine argument.")


def notices_text(notices: Sequence, has_more: bool) -> str:
    """Stored notices (CONTRACT.md 1), oldest first, each with its id to continue from."""
    if not notices:
        return "No notices were kept for this instance in that range."
    lines = [f"#{n.seq} {n.notice.get('at', '-')} {n.notice.get('kind', 'notice')}"
             f"{' ' + str(about) if (about := n.notice.get('session_id') or n.notice.get('repo')) else ''}"
             f": {n.notice.get('text', '')}" for n in notices]
    if has_more:
        lines.append(f"More notices follow; read again with after_id {notices[-1].seq}.")
    return "\n".join(lines)


def _kind(spec: dict) -> str:
    """What an argument takes, from its JSON Schema: its kind and bounds."""
    kinds = []
    for choice in spec.get("anyOf") or [spec]:
        kind = {"string": "text", "integer": "a whole number", "number": "a number",
                "boolean": "true or false", "null": "null"}.get(choice.get("type"), "a value")
        low, high = choice.get("minimum"), choice.get("maximum")
        if kind == "a whole number" and low is not None and high is not None:
            kind += f" from {low:,} to {high:,}"
        elif kind == "a whole number" and low is not None:
            kind += f" of at least {low:,}"
        kinds.append(kind)
    return " or ".join(dict.fromkeys(kinds))


def _about(spec: dict) -> str:
    about = str(spec.get("description") or "").rstrip(".")
    return f"{about[:1].lower()}{about[1:]}"


def argument_problem(tool: str, errors: list[dict], schema: dict) -> str:
    """One sentence for arguments a tool cannot take, naming each and what it takes (the
    SDK's own text is a validation report, not a sentence); values sent are not repeated."""
    properties = schema.get("properties") or {}
    missing, wrong = [], []
    for error in errors:
        name = str(error["loc"][0]) if error.get("loc") else ""
        spec = properties.get(name)
        if spec is None:
            continue
        about = _about(spec)
        if error.get("type") == "missing":
            missing.append(f"{name} ({_kind(spec)}{': ' + about if about else ''})")
        else:
            wrong.append(f"{_kind(spec)} for {name}" + (f" ({about})" if about else ""))
    parts = []
    if missing:
        parts.append("needs " + " and ".join(missing))
    if wrong:
        parts.append("takes " + " and ".join(wrong))
    if not parts:
        return (f"The tool {tool} cannot take these arguments; its input schema lists the "
                "ones it takes.")
    again = "it" if len(missing) == 1 and not wrong else "one" if len(wrong) == 1 and not \
        missing else "them"
    return f"The tool {tool} {', and '.join(parts)}; call it again with {again}."
