"""The console's routes. A token arrives once, by the login form only, and is exchanged
for a login kept on the server (logins.py): the cookie holds only its random
reference (HttpOnly, SameSite=Strict, Secure over TLS). Every form carries the login's
CSRF token, the login form a pre-login one, and a post from another origin is refused.
Every page shows only that token's instance."""

from __future__ import annotations

import asyncio
import secrets
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from seedline_contracts.timeline import MAX_READ_LIMIT

from ..auth import COOKIE
from ..errors import WebError
from ..tenant import Tenant
from . import overview as overview_page, render
from .logins import LOGIN_DAYS, ConsoleLogin, same_secret

router = APIRouter(prefix="/console", include_in_schema=False)
STATIC = Path(__file__).parent / "static"
PAGE_ENTRIES = 200
# The login form's own CSRF token, before there is a login to hold one (double submit).
PRE_LOGIN = "seedline_login_form"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
                               "script-src 'self'; connect-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with
    # every form, and the Origin check below could not tell the console's own forms apart.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
NOT_KNOWN = "That token is not known or was revoked."
BY_LINK = ("A token in a link does not log in (a link on any site could log you into "
           "someone else's instance); paste the token here instead.")
FORM_EXPIRED = ("This form came from another page or has expired; reload the page and send it "
                "again.")


def html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=SECURITY_HEADERS)


def _cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/console")


def login_page(request: Request, message: str | None = None, status: int = 200) -> Response:
    """The login form with a fresh pre-login CSRF token, in the form and in a cookie."""
    csrf = secrets.token_urlsafe(24)
    response = html(render.login(message, csrf), status)
    _cookie(response, request, PRE_LOGIN, csrf, 3600)
    return response


def not_here(status: int, allowed: str) -> Response:
    """The page for an address or method the console does not serve."""
    message = ("This page takes forms sent from the console itself; go back and use them."
               if status == 405 else "The console has no page at this address.")
    response = html(render.error_page(None, message), status)
    if status == 405:
        response.headers["Allow"] = allowed
    return response


def same_origin(request: Request) -> bool:
    """A browser names the page a form was posted from; it must be this server. A
    client that sends no Origin is not a browser, and still needs the CSRF token."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return origin == f"{request.url.scheme}://{request.headers.get('host', '')}"


async def _start_login(request: Request, token: str, to: str) -> Response:
    reference = await request.app.state.web.logins.start(token)
    response = RedirectResponse(to, status_code=303)
    _cookie(response, request, COOKIE, reference, LOGIN_DAYS * 86400)
    response.delete_cookie(PRE_LOGIN, path="/console")
    return response


async def _login(request: Request) -> ConsoleLogin | None:
    return await request.app.state.web.gate.console_login(request)


def _tenant_of(request: Request, login: ConsoleLogin) -> Tenant:
    return Tenant(request.app.state.web.backend, login.instance_id)


def _with_token(request: Request) -> Response | None:
    """A token in the address never logs in: a link on any site could log a browser into
    that token's instance (login CSRF) with none of the form's checks. The address is
    left at once (the token goes out of the page's history) for the form, which says why."""
    if "token" not in request.query_params:
        return None
    return RedirectResponse("/console/login?from=link", status_code=303,
                            headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})


async def _form(request: Request) -> dict[str, str]:
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    return {k: v[0] for k, v in form.items()}


@router.get("/static/icon.svg")
async def icon() -> FileResponse:
    return FileResponse(STATIC / "icon.svg", media_type="image/svg+xml",
                        headers={"Cache-Control": "max-age=86400"})


@router.get("/static/console.css")
async def stylesheet() -> FileResponse:
    return FileResponse(STATIC / "console.css", media_type="text/css",
                        headers={"Cache-Control": "max-age=300"})


@router.get("/login")
async def login_form(request: Request, source: str = Query("", alias="from", max_length=20)
                     ) -> Response:
    """The form on its own address, so reloading after a refused login shows it again."""
    if await _login(request) is not None:
        return RedirectResponse("/console", status_code=303)
    return login_page(request, BY_LINK if source == "link" else None)


@router.post("/login")
async def login(request: Request) -> Response:
    if not same_origin(request):
        return login_page(request, FORM_EXPIRED, 403)
    form = await _form(request)
    if not same_secret(form.get("csrf"), request.cookies.get(PRE_LOGIN) or "\0"):
        return login_page(request, FORM_EXPIRED, 403)
    token = form.get("token", "").strip()
    if not token or await request.app.state.web.gate.tokens.instance_of(token) is None:
        return login_page(request, NOT_KNOWN, 401)
    return await _start_login(request, token, "/console")


@router.post("/logout")
async def logout(request: Request) -> Response:
    login_now = await _login(request)
    form = await _form(request)
    if login_now is not None and (not same_origin(request)
                                  or not same_secret(form.get("csrf"), login_now.csrf)):
        return html(render.error_page(login_now.instance_id, FORM_EXPIRED, login_now.csrf), 403)
    await request.app.state.web.logins.end(request.cookies.get(COOKIE))
    response = RedirectResponse("/console", status_code=303)
    response.delete_cookie(COOKIE, path="/console")
    return response


@router.get("")
async def overview(request: Request, q: str = Query("", max_length=300),
                   machine: str = Query("", max_length=300),
                   state: str = Query("all", pattern="^(all|live|idle)$"),
                   page: int = Query(1, ge=1, le=100_000)) -> Response:
    redirect = _with_token(request)
    if redirect is not None:
        return redirect
    login_now = await _login(request)
    if login_now is None:
        return login_page(request)
    tenant = _tenant_of(request, login_now)
    csrf = login_now.csrf
    web = request.app.state.web
    try:
        machines, live, counts, opened, rejected = await asyncio.gather(
            tenant.machines(), tenant.live(), tenant.repos(),
            web.opens.repos(tenant.instance_id), tenant.rejected())
    except WebError as exc:
        return html(render.error_page(tenant.instance_id, exc.message, csrf), exc.status)
    labels = {o.node_id: o.node_id for o in opened.values()}
    labels.update({m.node_id: m.label for m in machines})
    rows = overview_page.repo_rows(counts, opened, live)
    body = overview_page.overview(
        tenant.instance_id, machines, live, rows, rejected,
        overview_page.Filters(q, machine, state, page), labels, datetime.now(timezone.utc))
    return html(render.page("Overview", body, tenant.instance_id, csrf))


@router.get("/repo")
async def repo_page(request: Request, repo: str = Query(..., max_length=1000),
                    before_seq: int | None = Query(None, ge=1)) -> Response:
    redirect = _with_token(request)
    if redirect is not None:
        return redirect
    login_now = await _login(request)
    if login_now is None:
        return login_page(request)
    tenant = _tenant_of(request, login_now)
    csrf = login_now.csrf
    web = request.app.state.web
    try:
        # Where the page's live stream takes over: read before the page, so nothing that
        # comes meanwhile is missed (what is both shown and sent is shown once).
        sessions_seq, notices_seq = await tenant.backend.stream_ends()
        page = await tenant.read(repo, before_seq=before_seq, limit=min(PAGE_ENTRIES,
                                                                        MAX_READ_LIMIT))
        machines = await tenant.machines()
        await web.opens.catch_up(timeout=1.0)
        records = await web.opens.for_repo(tenant.instance_id, repo)
    except WebError as exc:
        return html(render.error_page(tenant.instance_id, exc.message, csrf), exc.status)
    rows = page.entries
    low = rows[0].seq - 1 if rows and page.has_more else 0
    high = rows[-1].seq if rows and before_seq else None
    shown = [r for r in records if (r.until_seq or 0) >= low
             and (high is None or (r.until_seq or 0) < high)]
    views = [render.OpenView(r, await _brief_text(tenant, r)) for r in shown]
    labels = {m.node_id: m.label for m in machines}
    body = render.timeline(rows, views, labels, datetime.now(timezone.utc))
    older = rows[0].seq if rows and page.has_more else None
    feed = None if before_seq else live_url(
        repo=repo, after=(sessions_seq, rows[-1].seq if rows else 0, notices_seq))
    return html(render.repo_page(tenant.instance_id, repo, body, older, csrf,
                                 before=open_form(login_now, repo, machines), feed=feed))


def live_url(after: tuple[int, int, int], **which: str) -> str:
    """A page's live stream (live.py), starting after what the page shows."""
    return "/console/live?" + urlencode({**which, "after": ".".join(map(str, after))})


async def _brief_text(tenant: Tenant, record) -> str | None:
    """The brief's exact text: recorded with the open, or the one the composer still serves
    when its sha256 is this open's (a later open of the conversation replaces it there)."""
    brief = record.reply.brief if record.reply else None
    if brief is None:
        return None
    if record.brief_text is not None:
        return record.brief_text
    try:
        served = await tenant.backend.brief(record.session_id)
    except WebError:
        return None
    return served.text if served.sha256 == brief.sha256 else None


def open_form(login: ConsoleLogin, repo: str, machines) -> str:
    """The repo page's form to open a conversation (confirmed on the next page)."""
    if not machines:
        return '<p class="empty">No machine is online to open a conversation on.</p>'
    esc = render.escape
    options = "".join(f'<option value="{esc(m.node_id)}">{esc(m.label)}</option>'
                      for m in machines)
    engines = sorted({e for m in machines for e in m.engines})
    engine_options = "".join(f'<option value="{esc(e)}">{esc(e)}</option>' for e in engines)
    return ('<section id="open"><h2>Open a conversation</h2>'
            '<form method="post" action="/console/open" class="action" data-confirm="Open a '
            'conversation on this repo? A conversation live on it is stopped for it.">'
            f'{render.csrf_field(login.csrf)}<input type="hidden" name="repo" '
            f'value="{esc(repo)}"><label for="open-node">Machine</label>'
            f'<select id="open-node" name="node_id">{options}</select>'
            f'<label for="open-engine">Engine</label><select id="open-engine" name="engine">'
            f'{engine_options}</select><label for="open-text">First message</label>'
            '<textarea id="open-text" name="instruction" rows="2"></textarea>'
            '<button type="submit">Open…</button></form>'
            '<p class="action-result" role="status" aria-live="polite"></p></section>')
