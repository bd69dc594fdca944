"""A conversation's whole history as the console shows it: every event of its life
(CONTRACT.md 7), every entry of its timeline and every notice about it, merged in time
order. Pure: built from the records and a clock, no I/O; every value is escaped."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any, Sequence

from seedline_contracts.times import parse_rfc3339

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


def _receipt(brief: dict | None, spent: bool | None) -> str:
    if not brief:
        return '<p class="receipt none">No brief was offered.</p>'
    given = {True: "given to the engine", False: "offered; not given: the engine continued its "
             "own conversation", None: "offered"}[spent]
    return (f'<p class="receipt">Brief: {brief.get("rows")} entries, '
            f'{brief.get("chars", 0):,} characters, {brief.get("omitted_rows")} earlier left '
            f'out, up to seq {brief.get("until_seq")} · <span class="spent">{escape(given)}</span>'
            f' · <code>{escape(str(brief.get("sha256", ""))[:16])}…</code></p>')


def _reply(reply: dict) -> str:
    notice = reply.get("notice") or {}
    decided = reply.get("continuity") or {}
    brief = reply.get("brief")
    # brief.spent (1.2) is the runner's `seeded`; a reply recorded before it says only that.
    spent = (brief or {}).get("spent")
    if brief and spent is None:
        spent = bool(reply.get("seeded"))
    return (f'<p class="notice {escape(str(notice.get("tone", "warning")))}">'
            f'{escape(str(notice.get("console", "")))}</p>'
            f'<dl class="decision"><dt>Decision</dt><dd>{escape(str(decided.get("mode")))} '
            f'(<code>{escape(str(decided.get("reason_code")))}</code>)</dd>'
            f'<dt>Reason</dt><dd>{escape(str(decided.get("reason", "")))}</dd>'
            f'<dt>Outcome</dt><dd class="outcome">{escape(str(reply.get("outcome")))}</dd></dl>'
            + _receipt(brief, spent))


def event_html(event: dict, labels: dict[str, str]) -> str:
    kind = str(event.get("type", "event"))
    name = lambda node: escape(labels.get(str(node), str(node)))  # noqa: E731
    match kind:
        case "open_requested":
            how = "woken by a message" if event.get("wake_seq") else "asked for"
            body = (f"Open {how} on {name(event.get('node_id'))} with "
                    f"<code>{escape(str(event.get('engine')))}</code>"
                    + (" · fresh, no brief" if event.get("force_fresh") else "")
                    + (" · clean slate" if event.get("clean_slate") else ""))
        case "continuity_decided":
            c = event.get("continuity") or {}
            body = (f"Decided: {escape(str(c.get('mode')))} "
                    f"(<code>{escape(str(c.get('reason_code')))}</code>): "
                    f"{escape(str(c.get('reason', '')))}")
        case "seed_composed":
            text = event.get("text")
            body = "Brief composed" + (f"{folded(text, 'brief-text')}" if text else
                                       ": none offered")
        case "opened":
            body = f"Opened on {name((event.get('reply') or {}).get('node_id'))}" + _reply(
                event.get("reply") or {})
        case "open_failed":
            error = event.get("error") or {}
            body = f'The open failed: {escape(str(error.get("message", "")))}'
        case "engine_bound":
            body = (f"The engine named its own conversation "
                    f"<code>{escape(str(event.get('engine_session_id')))}</code>")
        case "relocated":
            body = (f"Moved from {name(event.get('from_node_id'))} to "
                    f"{name(event.get('to_node_id'))}"
                    + (_reply(event["reply"]) if event.get("reply") else ""))
        case "stopped":
            body = f"Stopped ({escape(str(event.get('reason')))})"
        case "reaped":
            body = f"Stopped after {int(event.get('idle_seconds') or 0) // 60} idle minutes"
        case "resume_lost":
            body = ("The engine could not continue its earlier conversation after all and was "
                    f"given a brief ({escape(str(event.get('reason', '')))})")
        case _:
            body = escape(kind.replace("_", " "))
    return f'<div class="what">{body}</div>'


def history(events: Sequence[tuple[int, dict]], entries: Sequence[Any],
            notices: Sequence[Any], labels: dict[str, str], now: datetime) -> list[Item]:
    items = [Item(str(e.get("at", "")), "event", seq,
                  f'<li class="item event ev-{escape(str(e.get("type")))}">'
                  f'<p class="meta">{escape(str(e.get("type")))} · {ago(str(e.get("at")), now)}'
                  f"</p>{event_html(e, labels)}</li>") for seq, e in events]
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
