"""A conversation's whole history as the console shows it: every event of its life
(CONTRACT.md 7), read through the contract's types with its sealed text opened, every
entry of its timeline and every notice about it, merged in time order. Pure: built from
the records and a clock, no I/O; every value is escaped."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any, Sequence

from seedline_contracts import events as ev
from seedline_contracts.channels import event_tag
from seedline_contracts.events import SessionEvent
from seedline_contracts.sessions import BriefStats, OpenReply
from seedline_contracts.times import parse_rfc3339
from seedline_platform.lifecycle_events import opens_of

FOLD_CHARS = 600
# Which of several records at the same instant comes first: the event that caused a
# thing before the entries and notices that followed from it.
ORDER = {"event": 0, "entry": 1, "notice": 2}


@dataclass(frozen=True)
class Item:
    at: str
    source: str  # event | entry | notice
    seq: int
    html: str


def ago(at: str, now: datetime) -> str:
    """A relative time ("3 minutes ago") with the exact time on hover."""
    try:
        then = parse_rfc3339(at)
    except (ValueError, TypeError):
        return f"<time>{escape(str(at))}</time>"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = seconds // size
            words = f"{n} {unit}{'' if n == 1 else 's'} ago"
            break
    else:
        words = "just now" if seconds < 5 else f"{seconds} seconds ago"
    exact = then.strftime("%Y-%m-%d %H:%M:%S UTC")
    return f'<time datetime="{escape(at)}" title="{exact}">{words}</time>'


def folded(text: str, css: str = "") -> str:
    """Long text shows its start; the rest opens on demand."""
    if len(text) <= FOLD_CHARS:
        return f'<pre class="{css}">{escape(text)}</pre>'
    return (f'<details class="fold"><summary><pre>{escape(text[:FOLD_CHARS])}…</pre>'
            f'<span class="more">show all {len(text):,} characters</span></summary>'
            f'<pre class="{css}">{escape(text)}</pre></details>')


def _receipt(brief: BriefStats | None, given: str | None) -> str:
    if brief is None:
        return '<p class="receipt none">No brief was offered.</p>'
    return (f'<p class="receipt">Brief: {brief.rows} entries, {brief.chars:,} characters, '
            f'{brief.omitted_rows} earlier left out, up to seq {brief.until_seq} · '
            f'<span class="spent">{escape(given or "offered")}</span>'
            f' · <code>{escape(brief.sha256[:16])}…</code></p>')


def _reply(reply: OpenReply, given: str | None) -> str:
    decided = reply.continuity
    return (f'<p class="notice {escape(reply.notice.tone)}">{escape(reply.notice.console)}</p>'
            f'<dl class="decision"><dt>Decision</dt><dd>{escape(decided.mode)} '
            f'(<code>{escape(decided.reason_code)}</code>)</dd>'
            f'<dt>Reason</dt><dd>{escape(decided.reason)}</dd>'
            f'<dt>Outcome</dt><dd class="outcome">{escape(reply.outcome)}</dd></dl>'
            + _receipt(reply.brief, given))


def event_html(event: SessionEvent, labels: dict[str, str], given: str | None = None) -> str:
    """One event; `given`: what became of an answered open's brief, as known now."""
    name = lambda node: escape(labels.get(str(node), str(node)))  # noqa: E731
    match event:
        case ev.OpenRequested():
            how = "woken by a message" if event.wake_seq else "asked for"
            body = (f"Open {how} on {name(event.node_id)} with "
                    f"<code>{escape(event.engine)}</code>"
                    + (" · fresh, no brief" if event.force_fresh else "")
                    + (" · clean slate" if event.clean_slate else ""))
        case ev.WakeRequested():
            body = f"A message woke it on {name(event.node_id)}"
        case ev.ContinuityDecided():
            c = event.continuity
            body = (f"Decided: {escape(c.mode)} (<code>{escape(c.reason_code)}</code>): "
                    f"{escape(c.reason)}")
        case ev.SeedComposed():
            # The text as the engine was given it: read with its seal opened (None: its
            # instance was forgotten, or none was offered).
            body = "Brief composed" + (folded(event.text, "brief-text") if event.text else
                                       ": none offered" if event.brief is None else "")
        case ev.Opened():
            body = f"Opened on {name(event.reply.node_id)}" + _reply(event.reply, given)
        case ev.OpenFailed():
            body = f"The open failed: {escape(event.error.message)}"
        case ev.EngineBound():
            body = ("The engine named its own conversation "
                    f"<code>{escape(event.engine_session_id)}</code>")
        case ev.Relocated():
            body = (f"Moved from {name(event.from_node_id)} to {name(event.to_node_id)}"
                    + (_reply(event.reply, given) if event.reply else ""))
        case ev.Stopped():
            body = f"Stopped ({escape(event.reason)})"
        case ev.Reaped():
            body = f"Stopped after {event.idle_seconds // 60} idle minutes"
        case ev.BriefGiven():
            body = "The engine was given the brief with the first message"
        case ev.ResumeLost():
            body = ("The engine could not continue its earlier conversation after all and was "
                    f"given a brief ({escape(event.reason or '')})")
        case _:
            body = escape(event_tag(type(event)).replace("_", " "))
    return f'<div class="what">{body}</div>'


def history(events: Sequence[tuple[int, SessionEvent]], entries: Sequence[Any],
            notices: Sequence[Any], labels: dict[str, str], now: datetime) -> list[Item]:
    items = []
    # Each answered open's receipt as known now: given later, or never (the conversation
    # stopped before its first message).
    given = {view.answered_seq: view.receipt for view in opens_of(events)}
    for seq, e in events:
        kind = escape(event_tag(type(e)))
        items.append(Item(e.at, "event", seq,
                          f'<li class="item event ev-{kind}"><p class="meta">{kind} · '
                          f"{ago(e.at, now)}</p>{event_html(e, labels, given.get(seq))}</li>"))
    items += [Item(row.at, "entry", row.seq,
                   f'<li class="item entry kind-{escape(row.kind)}"><p class="meta">#{row.seq} · '
                   f'<span class="kind">{escape(row.kind)}</span> · {ago(row.at, now)}</p>'
                   f"{folded(row.content)}</li>") for row in entries]
    items += [Item(str(n.notice.get("at", "")), "notice", n.seq,
                   f'<li class="item notice-item"><p class="meta">notice '
                   f'{escape(str(n.notice.get("kind")))} · {ago(str(n.notice.get("at")), now)}'
                   f'</p><p class="notice warning">{escape(str(n.notice.get("text", "")))}</p>'
                   "</li>") for n in notices]
    return sorted(items, key=lambda i: (_instant(i.at), ORDER[i.source], i.seq))


def _instant(at: str) -> str:
    try:
        return parse_rfc3339(at).isoformat()
    except (ValueError, TypeError):
        return at
