"""The console as a tool: a page per conversation with its whole history, live updates
over Server-Sent Events, and the actions people take (open, send a message, stop, move),
each confirmed before it is done. Every form carries the login's CSRF token and is
refused from another origin (pages.py)."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response, StreamingResponse

from seedline_contracts.sessions import OpenRequest
from seedline_contracts.timeline import MAX_READ_LIMIT, TimelineEntryIn
from seedline_contracts.times import now_text
from seedline_core import lifecycle as lc
from seedline_platform.lifecycle_events import ConversationRecord

from ..errors import WebError
from ..notifications import notification_stream
from . import history, render
from .logins import ConsoleLogin, same_secret
from .pages import (FORM_EXPIRED, _form, _login, _tenant_of, _with_token, html, login_page,
                    same_origin)

router = APIRouter(prefix="/console", include_in_schema=False)
STATIC = Path(__file__).parent / "static"


def conversation_link(session_id: str) -> str:
    return (f'<a href="/console/conversation?{urlencode({"id": session_id})}">'
            f"<code>{escape(session_id)}</code></a>")


@router.get("/static/console.js")
async def script() -> FileResponse:
    return FileResponse(STATIC / "console.js", media_type="text/javascript",
                        headers={"Cache-Control": "max-age=300"})


@router.get("/notifications")
async def live(request: Request) -> Response:
    """The same notices stream as the API's, for the console's login (EventSource sends
    the cookie, never a bearer token)."""
    login = await _login(request)
    if login is None:
        return Response(status_code=401)
    web = request.app.state.web
    reference = request.cookies.get("seedline_login")

    async def still_allowed() -> bool:
        return await web.logins.find(reference) is not None

    stream = await notification_stream(web, _tenant_of(request, login), request,
                                       login.token_sha256, still_allowed)
    return StreamingResponse(stream, media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


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
        record = await tenant.backend.conversation(id)
        page = await tenant.read(owner.repo, session_id=id, limit=MAX_READ_LIMIT)
        kept, _ = await tenant.notices(limit=1000)
        machines = await tenant.machines()
        live = {c.session_id for c in await tenant.live()}
    except WebError as exc:
        return html(render.error_page(login.instance_id, exc.message, login.csrf), exc.status)
    notices = [n for n in kept if n.notice.get("session_id") == id]
    labels = {m.node_id: m.label for m in machines}
    items = history.history(record.events, page.entries, notices, labels,
                            datetime.now(timezone.utc))
    state = "live" if id in live else _state(record)
    body = (f'<p><a href="/console">Overview</a> · <a href="/console/repo?'
            f'{urlencode({"repo": owner.repo})}">{escape(owner.repo)}</a></p>'
            f'<h1>Conversation <code>{escape(id)}</code></h1>'
            f'<p class="state state-{escape(state)}">{escape(state)}</p>'
            + _actions(login, id, state, machines)
            + f'<section id="history" data-conversation="{escape(id)}"><h2>History</h2>'
            + (f'<ol class="history">{"".join(i.html for i in items)}</ol>' if items else
               '<p class="empty">Nothing happened here yet.</p>')
            + '<p class="older">' + ("Only the newest 1,000 entries are shown."
                                     if page.has_more else "") + "</p></section>")
    return html(render.page(id, body, login.instance_id, login.csrf, live=True))


def _state(record: ConversationRecord) -> str:
    """The state its events leave it in (CONTRACT.md 4.1), when no machine lists it live:
    one the events call live is stopped by now."""
    c = record.conversation
    if c is None:
        return "opening"
    return "stopped" if c.state is lc.State.LIVE else c.state.value


def _actions(login: ConsoleLogin, session_id: str, state: str, machines) -> str:
    hidden = (render.csrf_field(login.csrf)
              + f'<input type="hidden" name="id" value="{escape(session_id)}">')
    message = ('<form method="post" action="/console/conversation/message" class="action">'
               f'{hidden}<label for="text">Send a message</label>'
               '<textarea id="text" name="text" rows="3" required></textarea>'
               '<button type="submit">Send</button></form>')
    stop = ('<form method="post" action="/console/conversation/stop" class="action">'
            f'{hidden}<button type="submit" class="danger">Stop…</button></form>'
            if state == "live" else "")
    options = "".join(f'<option value="{escape(m.node_id)}">{escape(m.label)} '
                      f"({escape(m.node_id)})</option>" for m in machines)
    move = ('<form method="post" action="/console/conversation/relocate" class="action">'
            f'{hidden}<label for="node">Move to</label><select id="node" name="node_id">'
            f'{options}</select><button type="submit">Move…</button></form>'
            if options and state in ("live", "stopped") else "")
    return f'<section id="actions"><h2>Actions</h2>{message}<div class="row">{stop}{move}</div>' \
           "</section>"


async def _checked(request: Request) -> tuple[ConsoleLogin, dict[str, str]] | Response:
    login = await _login(request)
    if login is None:
        return login_page(request)
    form = await _form(request)
    if not same_origin(request) or not same_secret(form.get("csrf"), login.csrf):
        return html(render.error_page(login.instance_id, FORM_EXPIRED, login.csrf), 403)
    return login, form


def _confirm(login: ConsoleLogin, action: str, question: str, form: dict[str, str],
             button: str) -> Response:
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


def _done(session_id: str) -> Response:
    return RedirectResponse(f"/console/conversation?{urlencode({'id': session_id})}",
                            status_code=303)


@router.post("/conversation/stop")
async def stop(request: Request) -> Response:
    checked = await _checked(request)
    if isinstance(checked, Response):
        return checked
    login, form = checked
    session_id = form.get("id", "")
    if form.get("confirm") != "yes":
        return _confirm(login, "/console/conversation/stop", f"Stop conversation {session_id}? "
                        "Its timeline stays; the next message to its repo wakes a conversation "
                        "again.", form, "Stop it")
    try:
        await _tenant_of(request, login).stop(session_id, "stopped from the console")
    except WebError as exc:
        return html(render.error_page(login.instance_id, exc.message, login.csrf), exc.status)
    return _done(session_id)


@router.post("/conversation/relocate")
async def relocate(request: Request) -> Response:
    checked = await _checked(request)
    if isinstance(checked, Response):
        return checked
    login, form = checked
    session_id, node_id = form.get("id", ""), form.get("node_id", "")
    if form.get("confirm") != "yes":
        return _confirm(login, "/console/conversation/relocate", f"Move conversation "
                        f"{session_id} to {node_id}? The engine there starts fresh with a brief "
                        "of what happened so far.", form, "Move it")
    try:
        await _tenant_of(request, login).relocate(session_id, node_id)
    except WebError as exc:
        return html(render.error_page(login.instance_id, exc.message, login.csrf), exc.status)
    return _done(session_id)


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
        await tenant.append(TimelineEntryIn(
            entry_id=f"console-{uuid.uuid4().hex}", instance_id=tenant.instance_id,
            repo=owner.repo, session_id=session_id, kind="chat_user", content=text,
            at=now_text()))
    except WebError as exc:
        return html(render.error_page(login.instance_id, exc.message, login.csrf), exc.status)
    return _done(session_id)


@router.post("/open")
async def open_conversation(request: Request) -> Response:
    checked = await _checked(request)
    if isinstance(checked, Response):
        return checked
    login, form = checked
    repo, engine, node_id = form.get("repo", ""), form.get("engine", ""), form.get("node_id", "")
    if form.get("confirm") != "yes":
        return _confirm(login, "/console/open", f"Open a conversation on {repo} with {engine} on "
                        f"{node_id}? A conversation live on the repo is stopped for it.", form,
                        "Open it")
    try:
        reply = await _tenant_of(request, login).open(OpenRequest(
            instance_id=login.instance_id, repo=repo, engine=engine, node_id=node_id,
            instruction=form.get("instruction") or None))
    except WebError as exc:
        return html(render.error_page(login.instance_id, exc.message, login.csrf), exc.status)
    return _done(reply.session_id)
