"""The console's routes. A token arrives once, by the login form or `?token=`, and
lives in an HttpOnly, SameSite cookie; every page shows only that token's instance."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from seedline_contracts.timeline import MAX_READ_LIMIT

from ..auth import COOKIE
from ..errors import WebError
from ..tenant import Tenant
from . import render

router = APIRouter(prefix="/console", include_in_schema=False)
STATIC = Path(__file__).parent / "static"
PAGE_ENTRIES = 200
COOKIE_DAYS = 30
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=SECURITY_HEADERS)


def _set_cookie(response: Response, request: Request, token: str) -> None:
    response.set_cookie(COOKIE, token, max_age=COOKIE_DAYS * 86400, httponly=True,
                        samesite="lax", secure=request.url.scheme == "https", path="/console")


def _without_token(request: Request) -> str:
    rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    return request.url.path + (f"?{urlencode(rest)}" if rest else "")


async def _tenant(request: Request) -> Tenant | None:
    return await request.app.state.web.gate.console_tenant(request)


async def _with_token(request: Request) -> Response | None:
    """`?token=` logs in and redirects to the same page without it in the address."""
    token = request.query_params.get("token")
    if token is None:
        return None
    gate = request.app.state.web.gate
    if not token or await gate.tokens.instance_of(token) is None:
        return html(render.login("That token is not known or was revoked."), 401)
    response = RedirectResponse(_without_token(request), status_code=303)
    _set_cookie(response, request, token)
    return response


@router.get("/static/console.css")
async def stylesheet() -> FileResponse:
    return FileResponse(STATIC / "console.css", media_type="text/css",
                        headers={"Cache-Control": "max-age=300"})


@router.post("/login")
async def login(request: Request) -> Response:
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = (form.get("token") or [""])[0].strip()
    if not token or await request.app.state.web.gate.tokens.instance_of(token) is None:
        return html(render.login("That token is not known or was revoked."), 401)
    response = RedirectResponse("/console", status_code=303)
    _set_cookie(response, request, token)
    return response


@router.post("/logout")
async def logout() -> Response:
    response = RedirectResponse("/console", status_code=303)
    response.delete_cookie(COOKIE, path="/console")
    return response


@router.get("")
async def overview(request: Request) -> Response:
    redirect = await _with_token(request)
    if redirect is not None:
        return redirect
    tenant = await _tenant(request)
    if tenant is None:
        return html(render.login())
    try:
        machines, live, repos, rejected = await asyncio.gather(
            tenant.machines(), tenant.live(), _repos(request, tenant), tenant.rejected())
    except WebError as exc:
        return html(render.error_page(tenant.instance_id, exc.message), exc.status)
    labels = {m.node_id: m.label for m in machines}
    body = (f"<h1>Instance {render.escape(tenant.instance_id)}</h1>"
            + render.machines_section(machines) + render.live_section(live, labels)
            + render.repos_section(repos) + render.rejected_section(rejected))
    return html(render.page("Overview", body, tenant.instance_id))


async def _repos(request: Request, tenant: Tenant) -> dict[str, int]:
    counts = await tenant.repos()
    for repo, _opens in await request.app.state.web.opens.repos(tenant.instance_id):
        counts.setdefault(repo, 0)
    return counts


@router.get("/repo")
async def repo_page(request: Request, repo: str = Query(..., max_length=1000),
                    before_seq: int | None = Query(None, ge=1)) -> Response:
    redirect = await _with_token(request)
    if redirect is not None:
        return redirect
    tenant = await _tenant(request)
    if tenant is None:
        return html(render.login())
    web = request.app.state.web
    try:
        page = await tenant.read(repo, before_seq=before_seq, limit=min(PAGE_ENTRIES,
                                                                        MAX_READ_LIMIT))
        machines = await tenant.machines()
        await web.opens.catch_up(timeout=1.0)
        records = await web.opens.for_repo(tenant.instance_id, repo)
    except WebError as exc:
        return html(render.error_page(tenant.instance_id, exc.message), exc.status)
    rows = page.entries
    low = rows[0].seq - 1 if rows and page.has_more else 0
    high = rows[-1].seq if rows and before_seq else None
    shown = [r for r in records if (r.until_seq or 0) >= low
             and (high is None or (r.until_seq or 0) < high)]
    views = [render.OpenView(r, await _brief_text(tenant, r)) for r in shown]
    labels = {m.node_id: m.label for m in machines}
    body = render.timeline(rows, views, labels)
    older = rows[0].seq if rows and page.has_more else None
    return html(render.repo_page(tenant.instance_id, repo, body, older))


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
