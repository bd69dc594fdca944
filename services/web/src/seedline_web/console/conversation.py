"""The console as a tool: a page per conversation with its whole history, kept live from
its own stream (live.py), and the actions people take on it (send a message, stop, move,
open a fresh one). Each action is confirmed first; with the page's script it is sent in
place and its result shown there (JSON), without it a confirmation page and a redirect do
the same. Every form carries the login's CSRF token and is refused from another origin
(pages.py)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from html import escape
from pathlib import Path
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import (FileResponse, JSONResponse, RedirectResponse, Response,
                               StreamingResponse)

from seedline_contracts.sessions import OpenReply, OpenRequest
from seedline_contracts.timeline import MAX_READ_LIMIT, TimelineEntryIn
from seedline_contracts.times import now_text, parse_rfc3339
from seedline_core import lifecycle as lc
from seedline_core.notices import next_message_text
from seedline_platform.lifecycle_events import ConversationRecord

from ..errors import WebError
from ..notifications import notification_stream
from . import history, live as live_feed, render
from .logins import ConsoleLogin, same_secret
from .pages import (FORM_EXPIRED, _form, _login, _tenant_of, _with_token, html, live_url,
                    login_page, same_origin)

router = APIRouter(prefix="/console", include_in_schema=False)
STATIC = Path(__file__).parent / "static"
# Notices about a conversation are read from a little before its first event.
NOTICES_BEFORE = timedelta(minutes=1)


@router.get("/static/console.js")
async def script() -> FileResponse:
    return FileResponse(STATIC / "console.js", media_type="text/javascript",
                        headers={"Cache-Control": "max-age=300"})


@router.get("/notifications")
async def notifications(request: Request) -> Response:
    """The same notices stream as the API's, for the console's login (EventSource sends
    the cookie, never a bearer token)."""
    login = await _login(request)
    if login is None:
        return Response(status_code=401)
    stream = await notification_stream(request.app.state.web, _tenant_of(request, login),
                                       request, login.token_sha256,
                                       live_feed.login_still_valid(request))
    return StreamingResponse(stream, media_type="text/event-stream", headers=live_feed.HEADERS)


@router.get("/conversation")
async def conversation_page(request: Request, id: str = Query(..., max_length=300)) -> Response:
    redirect = _with_token(request)
    if redirect is not None:
        return redirect
    login = await _login(request)
    if login is None:
        return login_page(request)
    tenant = _tenant_of(request, login)
    try:
        owner = await tenant.owner(id)
        # Where the page's live stream takes over: its notices read before the page (what
        # is both shown and sent is shown once), its events and entries where they end.
        _, notices_seq = await tenant.backend.stream_ends()
        record = await tenant.backend.conversation(id)
        page = await tenant.read(owner.repo, session_id=id, limit=MAX_READ_LIMIT)
        kept, _ = await tenant.notices(since=_notices_since(record), limit=1000)
        machines = await tenant.machines()
        live = {c.session_id for c in await tenant.live()}
    except WebError as exc:
        return html(render.error_page(login.instance_id, exc.message, login.csrf), exc.status)
    notices = [n for n in kept if n.notice.get("session_id") == id]
    labels = {m.node_id: m.label for m in machines}
    items = history.history(record, page.entries, notices, labels, datetime.now(timezone.utc))
    state = initial_state(record, id in live)
    after = (max((seq for seq, _ in record.events), default=0),
             max((row.seq for row in page.entries), default=0), notices_seq)
    ran = record.conversation
    body = (f'<p><a href="/console">Overview</a> · <a href="/console/repo?'
            f'{urlencode({"repo": owner.repo})}">{escape(owner.repo)}</a></p>'
            f'<h1>Conversation <code>{escape(id)}</code></h1>'
            f'<p class="state state-{escape(state)}" id="state">{escape(state)}</p>'
            + _actions(login, id, owner.repo, state, machines,
                       ran.node_id if ran else None, ran.engine if ran else None)
            + f'<section id="history" data-conversation="{escape(id)}"><h2>History</h2>'
            + f'<ol class="history">{"".join(i.html for i in items)}</ol>'
            + ('<p class="empty" id="nothing-yet">Nothing happened here yet.</p>'
               if not items else "")
            + '<p class="older">' + ("Only the newest 1,000 entries are shown."
                                     if page.has_more else "") + "</p></section>")
    return html(render.page(id, body, login.instance_id, login.csrf,
                            feed=live_url(conversation=id, after=after)))


def _notices_since(record: ConversationRecord) -> datetime | None:
    if not record.events:
        return None
    try:
        return parse_rfc3339(record.events[0][1].at) - NOTICES_BEFORE
    except (ValueError, OverflowError):
        return None


def initial_state(record: ConversationRecord, live: bool) -> str:
    """What the page first says: the gateway's word that it is live wins; one its events
    call live that no machine lists is stopped by now."""
    if live:
        return "live"
    state = history.state_of(record)
    return "stopped" if state == lc.State.LIVE.value else state


def _actions(login: ConsoleLogin, session_id: str, repo: str, state: str, machines,
             node_id: str | None, engine: str | None) -> str:
    """The actions, each shown only in the states it applies to (the page's script shows
    and hides them as the state changes live)."""
    hidden = (render.csrf_field(login.csrf)
              + f'<input type="hidden" name="id" value="{escape(session_id)}">')

    def shown(states: str) -> str:
        return f' data-when="{states}"' + ("" if state in states.split() else " hidden")

    message = ('<form method="post" action="/console/conversation/message" class="action">'
               f'{hidden}<label for="text">Send a message</label>'
               '<textarea id="text" name="text" rows="3" required></textarea>'
               '<button type="submit">Send</button></form>')
    stop = ('<form method="post" action="/console/conversation/stop" class="action" '
            f'data-confirm="{escape(stop_question(session_id))}"{shown("live")}>'
            f'{hidden}<button type="submit" class="danger">Stop…</button></form>')
    options = "".join(
        f'<option value="{escape(m.node_id)}"{" selected" if m.node_id == node_id else ""}>'
        f"{escape(m.label)} ({escape(m.node_id)})</option>" for m in machines)
    move = ('<form method="post" action="/console/conversation/relocate" class="action" '
            f'data-confirm="{escape(move_question(session_id))}"{shown("live stopped")}>'
            f'{hidden}<label for="node">Move to</label><select id="node" name="node_id">'
            f'{options}</select><button type="submit">Move…</button></form>'
            if options else "")
    engines = sorted({e for m in machines for e in m.engines} | ({engine} if engine else set()))
    engine_options = "".join(
        f'<option value="{escape(e)}"{" selected" if e == engine else ""}>{escape(e)}</option>'
        for e in engines)
    fresh = ('<form method="post" action="/console/open" class="action" '
             f'data-confirm="{escape(fresh_question(repo))}">{render.csrf_field(login.csrf)}'
             f'<input type="hidden" name="repo" value="{escape(repo)}">'
             '<input type="hidden" name="force_fresh" value="yes">'
             f'<label for="fresh-node">Open fresh on</label><select id="fresh-node" '
             f'name="node_id">{options}</select><label for="fresh-engine">with</label>'
             f'<select id="fresh-engine" name="engine">{engine_options}</select>'
             '<button type="submit">Open fresh…</button></form>' if options else "")
    return ('<section id="actions"><h2>Actions</h2>'
            f'{message}<div class="row">{stop}{move}{fresh}</div>'
            '<p id="action-result" role="status" aria-live="polite"></p></section>')


def stop_question(session_id: str) -> str:
    return (f"Stop conversation {session_id}? Its timeline stays. "
            f"{next_message_text()}")


def move_question(session_id: str) -> str:
    return (f"Move conversation {session_id} to this machine? It keeps its id; its working tree "
            "and the engine's own record come along when they were saved, and the answer says "
            "whether the engine there continued its own conversation or started fresh with a "
            "brief.")


def fresh_question(repo: str) -> str:
    return (f"Open a fresh conversation on {repo}? The engine starts with no brief and none of "
            "the earlier work; a conversation live on the repo is stopped for it.")


async def _checked(request: Request) -> tuple[ConsoleLogin, dict[str, str]] | Response:
    login = await _login(request)
    if login is None:
        return (_json_error(401, "Your login has ended; log in again.") if _wants_json(request)
                else login_page(request))
    form = await _form(request)
    if not same_origin(request) or not same_secret(form.get("csrf"), login.csrf):
        return _failed(request, login, WebError("not_permitted", FORM_EXPIRED, status=403))
    return login, form


def _wants_json(request: Request) -> bool:
    """The page's script asks for the result in place (`Accept: application/json`)."""
    return "application/json" in request.headers.get("accept", "")


def _json_error(status: int, message: str) -> Response:
    return JSONResponse({"ok": False, "error": {"message": message}}, status_code=status,
                        headers={"Cache-Control": "no-store"})


def _failed(request: Request, login: ConsoleLogin, exc: WebError) -> Response:
    if _wants_json(request):
        return _json_error(exc.status, exc.message)
    return html(render.error_page(login.instance_id, exc.message, login.csrf), exc.status)


def _done(request: Request, session_id: str, message: str) -> Response:
    link = f"/console/conversation?{urlencode({'id': session_id})}"
    if _wants_json(request):
        return JSONResponse({"ok": True, "message": message, "session_id": session_id,
                             "link": link}, headers={"Cache-Control": "no-store"})
    return RedirectResponse(link, status_code=303)


def _opened(reply: OpenReply, verb: str) -> str:
    return f"{verb} conversation {reply.session_id}: {reply.notice.console}"


def _confirm(login: ConsoleLogin, action: str, question: str, form: dict[str, str],
             button: str) -> Response:
    """Without the page's script: the question on a page of its own."""
    kept = "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">'
                   for k, v in form.items() if k not in ("csrf", "confirm"))
    back = form.get("id")
    cancel = (f'/console/conversation?{urlencode({"id": back})}' if back else "/console")
    body = (f'<h1>Are you sure?</h1><p class="question">{escape(question)}</p>'
            f'<form method="post" action="{escape(action)}" class="confirm">'
            f'{render.csrf_field(login.csrf)}{kept}<input type="hidden" name="confirm" '
            f'value="yes"><button type="submit" class="danger">{escape(button)}</button> '
            f'<a href="{escape(cancel)}">Cancel</a></form>')
    return html(render.page("Confirm", body, login.instance_id, login.csrf))


@router.post("/conversation/stop")
async def stop(request: Request) -> Response:
    checked = await _checked(request)
    if isinstance(checked, Response):
        return checked
    login, form = checked
    session_id = form.get("id", "")
    if form.get("confirm") != "yes":
        return _confirm(login, "/console/conversation/stop", stop_question(session_id), form,
                        "Stop it")
    try:
        reply = await _tenant_of(request, login).stop(session_id, "stopped from the console")
    except WebError as exc:
        return _failed(request, login, exc)
    said = (f"Stopped. {next_message_text()}" if reply.stopped else
            "It was not running, so nothing changed.")
    return _done(request, session_id, said)


@router.post("/conversation/relocate")
async def relocate(request: Request) -> Response:
    checked = await _checked(request)
    if isinstance(checked, Response):
        return checked
    login, form = checked
    session_id, node_id = form.get("id", ""), form.get("node_id", "")
    if form.get("confirm") != "yes":
        return _confirm(login, "/console/conversation/relocate", move_question(session_id),
                        form, "Move it")
    try:
        reply = await _tenant_of(request, login).relocate(session_id, node_id)
    except WebError as exc:
        return _failed(request, login, exc)
    return _done(request, session_id, _opened(reply, f"Moved to {node_id}:"))


@router.post("/conversation/message")
async def message(request: Request) -> Response:
    checked = await _checked(request)
    if isinstance(checked, Response):
        return checked
    login, form = checked
    session_id, text = form.get("id", ""), form.get("text", "")
    tenant = _tenant_of(request, login)
    try:
        owner = await tenant.owner(session_id)
        if not text.strip():
            raise WebError("invalid_request", "The message is empty; write something to send.")
        appended = await tenant.append(TimelineEntryIn(
            entry_id=f"console-{uuid.uuid4().hex}", instance_id=tenant.instance_id,
            repo=owner.repo, session_id=session_id, kind="chat_user", content=text,
            at=now_text()))
        live = any(c.repo == owner.repo for c in await tenant.live())
    except WebError as exc:
        return _failed(request, login, exc)
    said = (f"Sent (#{appended.seq}): it reaches the conversation live on this repo as its "
            "next turn." if live else
            f"Sent (#{appended.seq}). {next_message_text(message='This message')}")
    return _done(request, session_id, said)


@router.post("/open")
async def open_conversation(request: Request) -> Response:
    checked = await _checked(request)
    if isinstance(checked, Response):
        return checked
    login, form = checked
    repo, engine, node_id = form.get("repo", ""), form.get("engine", ""), form.get("node_id", "")
    fresh = form.get("force_fresh") == "yes"
    if form.get("confirm") != "yes":
        question = (fresh_question(repo) if fresh else
                    f"Open a conversation on {repo} with {engine} on {node_id}? A conversation "
                    "live on the repo is stopped for it.")
        return _confirm(login, "/console/open", question, form, "Open it")
    try:
        reply = await _tenant_of(request, login).open(OpenRequest(
            instance_id=login.instance_id, repo=repo, engine=engine, node_id=node_id,
            instruction=form.get("instruction") or None, force_fresh=fresh))
    except WebError as exc:
        return _failed(request, login, exc)
    return _done(request, reply.session_id, _opened(reply, "Opened"))
