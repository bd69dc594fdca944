"""A conversation's whole history as the console shows it: every event of its life
(CONTRACT.md 7), read through the contract's types with its sealed text opened, every
entry of its timeline and every notice about it, merged in time order. Pure: built from
the records and a clock, no I/O; every value is escaped.

Each item carries an id (`ev-`, `en-`, `no-` and its stream sequence) and a sort key, so
the page's live updates (live.py) put an item where it belongs, and replace one shown
before (a brief's receipt once the machine says whether the engine was given it)."""

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
from seedline_core.notices import no_brief_reason, no_brief_receipt
from seedline_platform.lifecycle_events import ConversationRecord, no_brief_of

FOLD_CHARS = 600
# Which of several records at the same instant comes first: the event that caused a
# thing before the entries and notices that followed from it.
ORDER = {"event": 0, "entry": 1, "notice": 2}
PREFIX = {"event": "ev", "entry": "en", "notice": "no"}


@dataclass(frozen=True)
class Item:
    at: str
    source: str  # event | entry | notice
    seq: int
    html: str

    @property
    def id(self) -> str:
        return f"{PREFIX[self.source]}-{self.seq}"

    @property
    def key(self) -> str:
        """Sorts as the page orders items, compared as text (also by the page's script)."""
        return f"{_instant(self.at)}|{ORDER[self.source]}|{self.seq:020d}"


def ago(at: str, now: datetime) -> str:
    """A relative time ("3 minutes ago") with the exact time on hover; the page's script
    keeps the words current from `datetime`."""
    try:
        then = parse_rfc3339(at)
    except (ValueError, TypeError, OverflowError):
        return f"<time>{escape(str(at))}</time>"
    exact = then.strftime("%Y-%m-%d %H:%M:%S UTC")
    return (f'<time datetime="{escape(then.strftime("%Y-%m-%dT%H:%M:%SZ"))}" '
            f'title="{exact}">{relative(then, now)}</time>')


def relative(then: datetime, now: datetime) -> str:
    seconds = int((now - then).total_seconds())
    if seconds < 0:
        return "in the future"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'} ago"
    return "just now" if seconds < 5 else f"{seconds} seconds ago"


def folded(text: str, css: str = "") -> str:
    """Long text shows its start; the rest opens on demand."""
    if len(text) <= FOLD_CHARS:
        return f'<pre class="{css}">{escape(text)}</pre>'
    return (f'<details class="fold"><summary><pre>{escape(text[:FOLD_CHARS])}…</pre>'
            f'<span class="more">show all {len(text):,} characters</span></summary>'
            f'<pre class="{css}">{escape(text)}</pre></details>')


def receipt(brief: BriefStats | None, given: str | None, no_brief: str | None = None) -> str:
    """The brief's receipt: its numbers and whether the engine was given it, or why not, in
    the words of seedline_core.notices (None: no launch has offered it yet)."""
    if brief is None:
        return f'<p class="receipt none">{escape(no_brief_receipt(no_brief))}</p>'
    secrets = (f", {brief.redacted} secret{'' if brief.redacted == 1 else 's'} left out"
               if brief.redacted else "")
    return (f'<p class="receipt">Brief: {brief.rows} '
            f'{"entry" if brief.rows == 1 else "entries"}, {brief.chars:,} characters, '
            f'{brief.omitted_rows} earlier left out{secrets}, up to seq {brief.until_seq} · '
            f'<span class="spent">{escape(given or "offered")}</span>'
            f' · <code title="sha256 {escape(brief.sha256)}">{escape(brief.sha256[:16])}…</code>'
            '</p>')


def _reply(reply: OpenReply, plan: ev.LaunchPlan | None, given: str | None) -> str:
    decided = reply.continuity
    return (f'<p class="notice {escape(reply.notice.tone)}">{escape(reply.notice.console)}</p>'
            f'<dl class="decision"><dt>Decision</dt><dd>{escape(decided.mode)} '
            f'(<code>{escape(decided.reason_code)}</code>)</dd>'
            f'<dt>Reason</dt><dd class="reason">{escape(decided.reason)}</dd>'
            f'<dt>Outcome</dt><dd class="outcome">{escape(reply.outcome)}</dd></dl>'
            + receipt(reply.brief, given, no_brief_of(reply, plan)))


def event_html(event: SessionEvent, labels: dict[str, str],
               record: ConversationRecord | None = None, seq: int | None = None) -> str:
    """One event in words. With the conversation's record, an open shows its answer as the
    machine finally had it (a resume lost later corrects it) and a brief whether the
    engine was given it."""
    name = lambda node: escape(labels.get(str(node), str(node)))  # noqa: E731
    # Each answered open as the machine finally had it (a resume lost later corrects it),
    # and its brief's receipt as known now: given later, or never.
    views = {o.answered_seq: o for o in record.opens} if record is not None else {}
    final = {seq: view.reply for seq, view in views.items()}
    given = views[seq].receipt if seq in views else None
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
            told = record.brief_receipt(event.brief.sha256) if (
                record is not None and event.brief is not None) else None
            why = None if event.brief is not None else no_brief_reason(
                event.plan.continuity.reason_code, event.plan.clean_slate)
            text = (folded(event.text, "brief-text") if event.text else
                    "" if event.brief is None else
                    '<p class="empty">Its text can no longer be read (its instance was '
                    "forgotten).</p>")
            body = ("Brief composed" + receipt(event.brief, told, why) + text)
        case ev.Opened():
            reply = final.get(seq) or event.reply
            body = f"Opened on {name(reply.node_id)}" + _reply(reply, event.plan, given)
        case ev.OpenFailed():
            body = f'The open failed: <span class="problem">{escape(event.error.message)}</span>'
        case ev.EngineBound():
            body = ("The engine named its own conversation "
                    f"<code>{escape(event.engine_session_id)}</code>")
        case ev.Relocated():
            reply = final.get(seq) or event.reply
            body = (f"Moved from {name(event.from_node_id)} to {name(event.to_node_id)}"
                    + (_reply(reply, None, given) if reply else ""))
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


def _li(item_id: str, key: str, css: str, meta: str, body: str) -> str:
    return (f'<li id="{item_id}" data-key="{escape(key)}" class="item {css}">'
            f'<p class="meta">{meta}</p>{body}</li>')


def event_item(seq: int, event: SessionEvent, labels: dict[str, str],
               record: ConversationRecord | None, now: datetime) -> Item:
    kind = escape(event_tag(type(event)))
    item = Item(event.at, "event", seq, "")
    return Item(event.at, "event", seq, _li(
        item.id, item.key, f"event ev-{kind}", f"{kind} · {ago(event.at, now)}",
        event_html(event, labels, record, seq)))


def entry_item(row: Any, now: datetime) -> Item:
    item = Item(row.at, "entry", row.seq, "")
    cut = (f' · <span class="cut">cut from {row.truncated_from:,} characters</span>'
           if row.truncated_from else "")
    return Item(row.at, "entry", row.seq, _li(
        item.id, item.key, f"entry kind-{escape(row.kind)}",
        f'#{row.seq} · <span class="kind">{escape(row.kind)}</span> · {ago(row.at, now)}{cut}',
        folded(row.content)))


def notice_item(notice: Any, now: datetime) -> Item:
    at = str(notice.notice.get("at", ""))
    item = Item(at, "notice", notice.seq, "")
    return Item(at, "notice", notice.seq, _li(
        item.id, item.key, "notice-item",
        f'notice {escape(str(notice.notice.get("kind")))} · {ago(at, now)}',
        f'<p class="notice warning">{escape(str(notice.notice.get("text", "")))}</p>'))


def history(record: ConversationRecord, entries: Sequence[Any], notices: Sequence[Any],
            labels: dict[str, str], now: datetime) -> list[Item]:
    items = [event_item(seq, e, labels, record, now) for seq, e in record.events]
    items += [entry_item(row, now) for row in entries]
    items += [notice_item(n, now) for n in notices]
    return sorted(items, key=lambda i: i.key)


def state_of(record: ConversationRecord) -> str:
    """The state its events leave it in (CONTRACT.md 4.1): opening, live, stopped, failed."""
    c = record.conversation
    return "opening" if c is None else c.state.value


def _instant(at: str) -> str:
    try:
        return parse_rfc3339(at).strftime("%Y%m%d%H%M%S%f")
    except (ValueError, TypeError, OverflowError):
        return str(at)
