"""HTML for the console, built from contract data. Every value from data goes
through html.escape; nothing here does I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Iterable, Sequence
from urllib.parse import urlencode

from seedline_contracts.sessions import BriefStats
from seedline_contracts.timeline import TimelineRow
from seedline_core.notices import BRIEF_GIVEN, no_brief_receipt
from seedline_platform.lifecycle_events import brief_receipt, no_brief_of

from ..opens import OpenRecord
from ..tenant import Machine
from .history import ago

ENTRY_CHARS = 4000
RAW_CHARS = 400


def csrf_field(csrf: str | None) -> str:
    return f'<input type="hidden" name="csrf" value="{escape(csrf)}">' if csrf else ""


def page(title: str, body: str, instance_id: str | None = None, csrf: str | None = None,
         feed: str | None = None) -> str:
    """A page of the console. Logged in, its script follows `feed` (a page's own live
    stream, console/live.py) or the instance's notices, and shows each as it comes."""
    who = ""
    if instance_id is not None:
        who = (f'<span class="who">instance <code>{escape(instance_id)}</code></span>'
               '<span id="live-status" class="live-status" role="status"></span>'
               '<form method="post" action="/console/logout" class="logout">'
               f'{csrf_field(csrf)}<button type="submit">Log out</button></form>')
    body_tag = (f'<body data-feed="{escape(feed or "/console/notifications")}">'
                if instance_id is not None else "<body>")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{escape(title)} · Seedline</title>"
        '<link rel="icon" href="/console/static/icon.svg" type="image/svg+xml">'
        '<link rel="stylesheet" href="/console/static/console.css">'
        + ('<script src="/console/static/console.js" defer></script>' if instance_id else "")
        + f"</head>{body_tag}"
        f'<header><a class="brand" href="/console">Seedline</a>{who}</header>'
        + ('<div id="live-notices" aria-live="polite"></div>' if instance_id else "")
        + f"<main>{body}</main></body></html>\n"
    )


def login(message: str | None = None, csrf: str | None = None) -> str:
    note = f'<p class="problem">{escape(message)}</p>' if message else ""
    return page("Log in", (
        "<h1>Log in</h1>"
        "<p>Paste the token an operator created for your instance with "
        "<code>seedline tokens create --instance &lt;instance&gt;</code>.</p>"
        f"{note}"
        '<form method="post" action="/console/login" class="login">'
        f"{csrf_field(csrf)}"
        '<label for="token">Token</label>'
        '<input id="token" name="token" type="password" autocomplete="off" required>'
        '<button type="submit">Log in</button></form>'
    ))


def error_page(instance_id: str | None, message: str, csrf: str | None = None) -> str:
    return page("Not available", f'<h1>Not available</h1><p class="problem">{escape(message)}'
                '</p><p><a href="/console">Back to the overview</a></p>', instance_id, csrf)


def table(head: Sequence[str], rows: Iterable[Sequence[str]], empty: str) -> str:
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>"
                   for row in rows)
    if not body:
        return f'<p class="empty">{escape(empty)}</p>'
    heads = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f"<table><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table>"


def conversation_link(session_id: str) -> str:
    return (f'<a href="/console/conversation?{urlencode({"id": session_id})}">'
            f"<code>{escape(session_id)}</code></a>")


def repo_link(repo: str) -> str:
    return f'<a href="/console/repo?{urlencode({"repo": repo})}">{escape(repo)}</a>'


def machines_section(machines: Sequence[Machine]) -> str:
    rows = [(escape(m.label), f"<code>{escape(m.node_id)}</code>",
             escape(", ".join(m.engines) or "none"),
             " ".join(conversation_link(s) for s in m.live) or "nothing of this instance",
             "every instance" if m.serves_every_instance else "this instance among others")
            for m in machines]
    return ('<section id="machines"><h2>Machines online</h2>'
            + table(("machine", "node id", "engines", "hosts now", "serves"), rows,
                     "No machine is online for this instance.") + "</section>")


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]} … ({len(text) - limit:,} more)"


def receipt(brief: BriefStats | None, given: str | None, no_brief: str | None = None) -> str:
    """The brief's receipt as a table: whether the engine was given it (the machine's
    word, CONTRACT.md 3.2), its numbers and digest; or why none was offered."""
    if brief is None:
        return f'<p class="receipt none">{escape(no_brief_receipt(no_brief))}</p>'
    cells = (("given", escape(given or "offered")),
             ("entries", f"{brief.rows}"), ("characters", f"{brief.chars:,}"),
             ("earlier entries left out", f"{brief.omitted_rows}"),
             ("secrets left out", f"{brief.redacted}"),
             ("up to seq", f"{brief.until_seq}"),
             ("sha256", f"<code>{escape(brief.sha256)}</code>"))
    return ('<table class="receipt"><caption>Brief receipt</caption><tbody>'
            + "".join(f'<tr><th>{k}</th><td data-field="{k}">{v}</td></tr>' for k, v in cells)
            + "</tbody></table>")


@dataclass(frozen=True)
class OpenView:
    """An open with its brief's exact text when it can still be shown byte for byte."""

    record: OpenRecord
    brief_text: str | None


def open_card(view: OpenView, labels: dict[str, str], now: datetime) -> str:
    """One open as decided and as the machine confirmed it; `id` and `data-until` let the
    page's live updates replace it or put it where its decision was taken."""
    o = view.record
    where = escape(labels.get(o.node_id, o.node_id))
    if o.relocation_from is not None:
        left = labels.get(o.relocation_from, o.relocation_from)
        verb = f"Moved to {where}" + (f" from {escape(left)}" if left else "")
    else:
        verb = f"Opened on {where}" if o.reply is not None else f"Tried to open on {where}"
    head = (f'<p class="open-head">{verb} with <code>{escape(o.engine)}</code> '
            f'{ago(o.at, now)} · conversation {conversation_link(o.session_id)}</p>')
    attributes = (f'id="open-{o.event_seq}" data-conversation="{escape(o.session_id)}" '
                  f'data-until="{o.until_seq or 0}"')
    if o.reply is None:
        return (f'<article class="open failed" {attributes}>{head}'
                f'<p class="notice warning">The open failed: {escape(o.error_message or "")}</p>'
                "</article>")
    r = o.reply
    decided = r.continuity
    text = ""
    given = brief_receipt(r, o.ended) if r.brief is not None else None
    if r.brief is not None:
        inner = (f'<pre class="brief-text">{escape(view.brief_text)}</pre>' if view.brief_text
                 is not None else "<p>A later brief of this conversation replaced this one, so "
                 "its exact text is no longer served; the receipt is what was offered.</p>")
        label = "" if given == BRIEF_GIVEN else f" ({escape(given)})"
        text = f"<details><summary>The brief's exact text{label}</summary>{inner}</details>"
    return (
        f'<article class="open" {attributes}>{head}'
        f'<p class="notice {escape(r.notice.tone)}">{escape(r.notice.console)}</p>'
        '<dl class="decision">'
        f'<dt>Decision</dt><dd>{escape(decided.mode)} (<code>{escape(decided.reason_code)}</code>)'
        f'</dd><dt>Reason</dt><dd class="reason">{escape(decided.reason)}</dd>'
        f'<dt>Outcome</dt><dd class="outcome">{escape(r.outcome)}</dd></dl>'
        f"{receipt(r.brief, given, no_brief_of(r))}{text}</article>"
    )


def entry_row(row: TimelineRow, now: datetime) -> str:
    shortened = (f' <span class="cut">cut from {row.truncated_from:,} characters</span>'
                 if row.truncated_from else "")
    return (f'<div class="entry kind-{escape(row.kind)}" id="entry-{row.seq}" '
            f'data-seq="{row.seq}" data-conversation="{escape(row.session_id)}">'
            f'<p class="meta">#{row.seq} · {ago(row.at, now)} · '
            f'<span class="kind">{escape(row.kind)}</span>'
            f'{" · " + escape(row.engine) if row.engine else ""}{shortened}</p>'
            f"<pre>{escape(cut(row.content, ENTRY_CHARS))}</pre></div>")


def boundary(session_id: str, opened_by_platform: bool) -> str:
    how = "opened by the platform" if opened_by_platform else "seen in the timeline only"
    name = conversation_link(session_id) if opened_by_platform else (
        f"<code>{escape(session_id)}</code>")
    return (f'<h3 class="boundary" data-conversation="{escape(session_id)}">Conversation '
            f"{name} <small>{how}</small></h3>")


def timeline(rows: Sequence[TimelineRow], opens: Sequence[OpenView], labels: dict[str, str],
             now: datetime) -> str:
    """Entries oldest first; each open placed where it was decided (after the newest entry
    its decision considered), so an open shows the decision made at that point."""
    platform = {v.record.session_id for v in opens}
    pending = sorted(opens, key=lambda v: (v.record.until_seq or 0, v.record.event_seq))
    out: list[str] = []
    current = None
    for row in rows:
        while pending and (pending[0].record.until_seq or 0) < row.seq:
            view = pending.pop(0)
            out.append(boundary(view.record.session_id, True)
                       if view.record.session_id != current else "")
            current = view.record.session_id
            out.append(open_card(view, labels, now))
        if row.session_id != current:
            current = row.session_id
            out.append(boundary(current, current in platform))
        out.append(entry_row(row, now))
    for view in pending:
        if view.record.session_id != current:
            current = view.record.session_id
            out.append(boundary(current, True))
        out.append(open_card(view, labels, now))
    return "".join(out) or '<p class="empty">This repo has no entries yet.</p>'


def repo_page(instance_id: str, repo: str, body: str, older: int | None,
              csrf: str | None = None, before: str = "", feed: str | None = None) -> str:
    """`feed`: the live stream of the newest page (None on an older page, which stays put)."""
    query = urlencode({"repo": repo, "before_seq": older})
    more = (f'<p class="older"><a href="/console/repo?{query}">Older entries</a></p>'
            if older else "")
    return page(repo, f'<p><a href="/console">Overview</a></p><h1>{escape(repo)}</h1>{before}'
                f'<section id="timeline" aria-live="polite">{more}{body}</section>',
                instance_id, csrf, feed=feed)
