"""HTML for the console, built from contract data. Every value from data goes
through html.escape; nothing here does I/O."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Iterable, Sequence
from urllib.parse import urlencode

from seedline_contracts.sessions import BriefStats, LiveConversation
from seedline_contracts.timeline import RejectedInput, TimelineRow
from seedline_core.notices import BRIEF_GIVEN
from seedline_platform.lifecycle_events import brief_receipt

from ..opens import OpenRecord
from ..tenant import Machine

ENTRY_CHARS = 4000
RAW_CHARS = 400


def csrf_field(csrf: str | None) -> str:
    return f'<input type="hidden" name="csrf" value="{escape(csrf)}">' if csrf else ""


def page(title: str, body: str, instance_id: str | None = None, csrf: str | None = None,
         live: bool = False) -> str:
    who = ""
    if instance_id is not None:
        who = (f'<span class="who">instance <code>{escape(instance_id)}</code></span>'
               '<form method="post" action="/console/logout" class="logout">'
               f'{csrf_field(csrf)}<button type="submit">Log out</button></form>')
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{escape(title)} · Seedline</title>"
        '<link rel="stylesheet" href="/console/static/console.css">'
        + ('<script src="/console/static/console.js" defer></script>' if instance_id else "")
        + '</head><body>'
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


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], empty: str) -> str:
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>"
                   for row in rows)
    if not body:
        return f'<p class="empty">{escape(empty)}</p>'
    heads = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f"<table><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table>"


def conversation_link(session_id: str) -> str:
    return (f'<a href="/console/conversation?{urlencode({"id": session_id})}">'
            f"<code>{escape(session_id)}</code></a>")


def filter_form(query: str, state: str) -> str:
    """Search and filter of the overview: by repo or conversation, and by state."""
    chosen = {s: " selected" if s == state else "" for s in ("all", "live", "idle")}
    return ('<form method="get" action="/console" class="inline filter" role="search">'
            '<label for="q">Find</label>'
            f'<input id="q" name="q" value="{escape(query)}" placeholder="repo or conversation">'
            '<label for="state">State</label><select id="state" name="state">'
            f'<option value="all"{chosen["all"]}>all</option>'
            f'<option value="live"{chosen["live"]}>live</option>'
            f'<option value="idle"{chosen["idle"]}>no live conversation</option></select>'
            '<button type="submit">Filter</button></form>')


def repo_link(repo: str) -> str:
    return f'<a href="/console/repo?{urlencode({"repo": repo})}">{escape(repo)}</a>'


def machines_section(machines: Sequence[Machine]) -> str:
    rows = [(escape(m.label), f"<code>{escape(m.node_id)}</code>",
             escape(", ".join(m.engines) or "none"),
             " ".join(conversation_link(s) for s in m.live) or "nothing of this instance",
             "every instance" if m.serves_every_instance else "this instance among others")
            for m in machines]
    return ('<section id="machines"><h2>Machines online</h2>'
            + _table(("machine", "node id", "engines", "hosts now", "serves"), rows,
                     "No machine is online for this instance.") + "</section>")


def live_section(live: Sequence[LiveConversation], labels: dict[str, str]) -> str:
    rows = [(repo_link(c.repo), conversation_link(c.session_id), escape(c.engine),
             escape(labels.get(c.node_id, c.node_id)), escape(c.outcome or "-"),
             escape(c.last_activity_at)) for c in live]
    return ('<section id="live"><h2>Live conversations</h2>'
            + _table(("repo", "conversation", "engine", "machine", "outcome", "last activity"),
                     rows,
                     "No conversation is live on this instance.") + "</section>")


def repos_section(repos: dict[str, int]) -> str:
    rows = [(repo_link(r), f"{n:,}") for r, n in sorted(repos.items())]
    form = ('<form method="get" action="/console/repo" class="inline">'
            '<label for="repo">Repo</label><input id="repo" name="repo" required '
            'placeholder="apps/chess-academy"><button type="submit">Show</button></form>')
    return ('<section id="repos"><h2>Repos</h2>' + _table(("repo", "entries"), rows,
            "No entries on this instance yet.") + form + "</section>")


def rejected_section(rejected: Sequence[tuple[int, RejectedInput]]) -> str:
    rows = [(str(seq), f"<code>{escape(r.reason_code)}</code>", escape(r.message),
             escape(r.received_at), f"<pre>{escape(_cut(r.raw, RAW_CHARS))}</pre>")
            for seq, r in reversed(rejected)]
    return ('<section id="rejected"><h2>Rejected entries</h2>'
            "<p>Entries naming this instance that the timeline was given but could not "
            "accept, newest first, with the reason.</p>"
            + _table(("#", "reason", "what was wrong", "received", "as sent"), rows,
                     "Nothing was rejected.") + "</section>")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]} … ({len(text) - limit:,} more)"


def receipt(brief: BriefStats | None, given: str | None) -> str:
    if brief is None:
        return '<p class="receipt none">No brief was offered.</p>'
    cells = (("given", escape(given or "offered")),
             ("entries", f"{brief.rows}"), ("characters", f"{brief.chars:,}"),
             ("earlier entries left out", f"{brief.omitted_rows}"),
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


def open_card(view: OpenView, labels: dict[str, str]) -> str:
    o = view.record
    where = escape(labels.get(o.node_id, o.node_id))
    if o.relocation_from is not None:
        left = labels.get(o.relocation_from, o.relocation_from)
        verb = f"Moved to {where}" + (f" from {escape(left)}" if left else "")
    else:
        verb = f"Opened on {where}" if o.reply is not None else f"Tried to open on {where}"
    head = (f'<p class="open-head">{verb} with <code>{escape(o.engine)}</code> at '
            f'{escape(o.at)} · conversation <code>{escape(o.session_id)}</code></p>')
    if o.reply is None:
        return (f'<article class="open failed" data-conversation="{escape(o.session_id)}">{head}'
                f'<p class="notice warning">The open failed: {escape(o.error_message or "")}</p>'
                "</article>")
    r = o.reply
    decided = r.continuity
    text = ""
    if r.brief is not None:
        given = brief_receipt(r, o.ended)
        inner = (f'<pre class="brief-text">{escape(view.brief_text)}</pre>' if view.brief_text
                 is not None else "<p>A later brief of this conversation replaced this one, so "
                 "its exact text is no longer served; the receipt is what was offered.</p>")
        label = "" if given == BRIEF_GIVEN else f" ({escape(given)})"
        text = f"<details><summary>The brief's exact text{label}</summary>{inner}</details>"
    return (
        f'<article class="open" data-conversation="{escape(o.session_id)}">{head}'
        f'<p class="notice {escape(r.notice.tone)}">{escape(r.notice.console)}</p>'
        '<dl class="decision">'
        f'<dt>Decision</dt><dd>{escape(decided.mode)} (<code>{escape(decided.reason_code)}</code>)'
        f'</dd><dt>Reason</dt><dd class="reason">{escape(decided.reason)}</dd>'
        f'<dt>Outcome</dt><dd class="outcome">{escape(r.outcome)}</dd></dl>'
        f"{receipt(r.brief, brief_receipt(r, o.ended) if r.brief else None)}{text}</article>"
    )


def entry_row(row: TimelineRow) -> str:
    cut = (f' <span class="cut">cut from {row.truncated_from:,} characters</span>'
           if row.truncated_from else "")
    return (f'<div class="entry kind-{escape(row.kind)}"><p class="meta">#{row.seq} · '
            f'{escape(row.at)} · <span class="kind">{escape(row.kind)}</span>'
            f'{" · " + escape(row.engine) if row.engine else ""}{cut}</p>'
            f"<pre>{escape(_cut(row.content, ENTRY_CHARS))}</pre></div>")


def boundary(session_id: str, opened_by_platform: bool) -> str:
    how = "opened by the platform" if opened_by_platform else "seen in the timeline only"
    name = conversation_link(session_id) if opened_by_platform else (
        f"<code>{escape(session_id)}</code>")
    return (f'<h3 class="boundary" data-conversation="{escape(session_id)}">Conversation '
            f"{name} <small>{how}</small></h3>")


def timeline(rows: Sequence[TimelineRow], opens: Sequence[OpenView], labels: dict[str, str]
             ) -> str:
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
            out.append(open_card(view, labels))
        if row.session_id != current:
            current = row.session_id
            out.append(boundary(current, current in platform))
        out.append(entry_row(row))
    for view in pending:
        if view.record.session_id != current:
            current = view.record.session_id
            out.append(boundary(current, True))
        out.append(open_card(view, labels))
    return "".join(out) or '<p class="empty">This repo has no entries yet.</p>'


def repo_page(instance_id: str, repo: str, body: str, older: int | None,
              csrf: str | None = None, before: str = "") -> str:
    query = urlencode({"repo": repo, "before_seq": older})
    more = (f'<p class="older"><a href="/console/repo?{query}">Older entries</a></p>'
            if older else "")
    return page(repo, f'<p><a href="/console">Overview</a></p><h1>{escape(repo)}</h1>{before}'
                f'<section id="timeline">{more}{body}</section>', instance_id, csrf)
