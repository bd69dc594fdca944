"""The console's overview: the machines online, the live conversations, every repo of the
instance (found by name, machine and state, a page at a time, the newest work first) and
the rejected entries. Pure: built from what the pages read, no I/O; every value escaped."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from html import escape
from typing import Sequence
from urllib.parse import urlencode

from seedline_contracts.sessions import LiveConversation
from seedline_contracts.timeline import RejectedInput

from ..opens import RepoOpen
from ..tenant import Machine
from . import render
from .history import ago

PAGE_SIZE = 50
STATES = {"all": "any state", "live": "live", "idle": "no live conversation"}


@dataclass(frozen=True)
class Filters:
    q: str = ""
    machine: str = ""
    state: str = "all"
    page: int = 1

    def query(self, **changes) -> str:
        chosen = replace(self, **changes)
        pairs = {"q": chosen.q, "machine": chosen.machine,
                 "state": "" if chosen.state == "all" else chosen.state,
                 "page": "" if chosen.page == 1 else str(chosen.page)}
        return urlencode({k: v for k, v in pairs.items() if v})

    @property
    def any(self) -> bool:
        return bool(self.q.strip() or self.machine or self.state != "all")


@dataclass(frozen=True)
class RepoRow:
    repo: str
    entries: int
    live: LiveConversation | None
    last: RepoOpen | None  # the newest open the platform made on it

    @property
    def node_id(self) -> str | None:
        if self.live is not None:
            return self.live.node_id
        return self.last.node_id if self.last else None

    @property
    def when(self) -> str:
        """Its newest activity the console knows: the live conversation's, else its last
        open's (RFC 3339 in UTC, so they compare as text)."""
        if self.live is not None:
            return self.live.last_activity_at
        return self.last.at if self.last else ""


def repo_rows(counts: dict[str, int], opened: dict[str, RepoOpen],
              live: Sequence[LiveConversation]) -> list[RepoRow]:
    """Every repo: those with entries and those the platform opened conversations on."""
    live_by_repo = {c.repo: c for c in live}
    names = set(counts) | set(opened) | set(live_by_repo)
    rows = [RepoRow(r, counts.get(r, 0), live_by_repo.get(r), opened.get(r)) for r in names]
    # Live ones first, then the most recent work, then by name (each sort keeps the last).
    rows.sort(key=lambda row: row.repo)
    rows.sort(key=lambda row: row.when, reverse=True)
    rows.sort(key=lambda row: row.live is None)
    return rows


def matching(rows: Sequence[RepoRow], filters: Filters) -> list[RepoRow]:
    found = filters.q.strip().lower()
    return [row for row in rows
            if found in row.repo.lower()
            and (not filters.machine or row.node_id == filters.machine)
            and (filters.state == "all" or (filters.state == "live") == (row.live is not None))]


def page_of(rows: Sequence[RepoRow], page: int, size: int = PAGE_SIZE
            ) -> tuple[list[RepoRow], int, int]:
    """The rows of one page, the page (within range) and how many pages there are."""
    pages = max(1, -(-len(rows) // size))
    page = min(max(1, page), pages)
    return list(rows[(page - 1) * size: page * size]), page, pages


def filter_form(filters: Filters, machines: dict[str, str]) -> str:
    options = "".join(
        f'<option value="{escape(node)}"{" selected" if node == filters.machine else ""}>'
        f"{escape(label)}</option>" for node, label in sorted(machines.items(),
                                                               key=lambda m: m[1].lower()))
    states = "".join(f'<option value="{s}"{" selected" if s == filters.state else ""}>'
                     f"{escape(words)}</option>" for s, words in STATES.items())
    return ('<form method="get" action="/console" class="inline filter" role="search">'
            '<label for="q">Repo</label>'
            f'<input id="q" name="q" type="search" value="{escape(filters.q)}" '
            'placeholder="part of its name">'
            '<label for="machine">Machine</label><select id="machine" name="machine">'
            f'<option value="">any machine</option>{options}</select>'
            f'<label for="state">State</label><select id="state" name="state">{states}</select>'
            '<button type="submit">Find</button>'
            + ('<a href="/console" class="clear">Clear</a>' if filters.any else "")
            + "</form>")


def _described(filters: Filters, machines: dict[str, str]) -> str:
    said = []
    if filters.q.strip():
        said.append(f"a name holding “{filters.q.strip()}”")
    if filters.machine:
        said.append(f"on {machines.get(filters.machine, filters.machine)}")
    if filters.state != "all":
        said.append(STATES[filters.state])
    return ", ".join(said)


def repos_section(rows: Sequence[RepoRow], filters: Filters, machines: dict[str, str],
                  now: datetime, total: int) -> str:
    found = matching(rows, filters)
    shown, page, pages = page_of(found, filters.page)
    if not found:
        if total == 0:
            empty = "No entries on this instance yet."
        else:
            empty = (f"No repo matches {_described(filters, machines)} (of {total:,} on this "
                     "instance).")
        body = (f'<p class="empty" role="status">{escape(empty)}'
                + (' <a href="/console">Clear the filters</a>.' if filters.any else "")
                + "</p>")
    else:
        first = (page - 1) * PAGE_SIZE + 1
        live = sum(1 for r in found if r.live is not None)
        what = _described(filters, machines)
        head = (f'<p class="count" role="status">Repos {first:,}–{first + len(shown) - 1:,} '
                f"of {len(found):,}{' matching ' + escape(what) if what else ''} "
                f"({live:,} live)</p>")
        table_rows = "".join(_repo_row(r, machines, now) for r in shown)
        body = (head + '<table class="repos"><thead><tr><th>repo</th><th>state</th>'
                "<th>machine</th><th>engine</th><th>last open</th><th>entries</th></tr>"
                f"</thead><tbody>{table_rows}</tbody></table>"
                + _pager(filters, page, pages))
    return f'<section id="repos"><h2>Repos</h2>{body}</section>'


def _repo_row(row: RepoRow, machines: dict[str, str], now: datetime) -> str:
    if row.live is not None:
        state = (f'<span class="badge live">live</span> '
                 f"{render.conversation_link(row.live.session_id)}")
    else:
        state = '<span class="badge">no live conversation</span>'
    node = row.node_id
    machine = escape(machines.get(node, node)) if node else "-"
    engine = escape(row.live.engine if row.live else row.last.engine if row.last else "-")
    when = ago(row.last.at, now) if row.last else "never opened here"
    return (f'<tr><td>{render.repo_link(row.repo)}</td><td>{state}</td><td>{machine}</td>'
            f"<td>{engine}</td><td>{when}</td><td>{row.entries:,}</td></tr>")


def _pager(filters: Filters, page: int, pages: int) -> str:
    if pages <= 1:
        return ""
    earlier = (f'<a href="/console?{escape(filters.query(page=page - 1))}" rel="prev">'
               "Previous</a>" if page > 1 else '<span class="off">Previous</span>')
    later = (f'<a href="/console?{escape(filters.query(page=page + 1))}" rel="next">Next</a>'
             if page < pages else '<span class="off">Next</span>')
    return (f'<nav class="pager" aria-label="Pages of repos">{earlier}'
            f"<span>Page {page} of {pages}</span>{later}</nav>")


def live_section(live: Sequence[LiveConversation], machines: dict[str, str],
                 now: datetime) -> str:
    rows = [(render.repo_link(c.repo), render.conversation_link(c.session_id),
             escape(c.engine), escape(machines.get(c.node_id, c.node_id)),
             escape(c.outcome or "-"), ago(c.last_activity_at, now)) for c in live]
    return ('<section id="live"><h2>Live conversations</h2>'
            + render.table(("repo", "conversation", "engine", "machine", "outcome",
                            "last activity"), rows,
                           "No conversation is live here.") + "</section>")


def rejected_section(rejected: Sequence[tuple[int, RejectedInput]], now: datetime) -> str:
    rows = [(str(seq), f"<code>{escape(r.reason_code)}</code>", escape(r.message),
             ago(r.received_at, now), f"<pre>{escape(render.cut(r.raw, render.RAW_CHARS))}</pre>")
            for seq, r in reversed(rejected)]
    return ('<section id="rejected"><h2>Rejected entries</h2>'
            "<p>Entries naming this instance that the timeline was given but could not "
            "accept, newest first, with the reason.</p>"
            + render.table(("#", "reason", "what was wrong", "received", "as sent"), rows,
                           "Nothing was rejected.") + "</section>")


def overview(instance_id: str, machines_online: Sequence[Machine], live: Sequence[LiveConversation],
             rows: Sequence[RepoRow], rejected: Sequence[tuple[int, RejectedInput]],
             filters: Filters, labels: dict[str, str], now: datetime) -> str:
    """The page's body. `labels` names every machine known (online, or of a repo's last
    open), so a machine offline now can still be searched by."""
    shown_live = [c for c in live if filters.q.strip().lower() in c.repo.lower()
                  and (not filters.machine or c.node_id == filters.machine)
                  and filters.state != "idle"]
    return (f"<h1>Instance {escape(instance_id)}</h1>"
            + filter_form(filters, labels)
            + render.machines_section(machines_online)
            + live_section(shown_live, labels, now)
            + repos_section(rows, filters, labels, now, len(rows))
            + rejected_section(rejected, now))
