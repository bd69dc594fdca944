"""The web process holds up against clients that misbehave: a revoked token's open
stream ends, the console's login cannot be forged from another site and its cookie is
no bearer token, slow or partial requests are cut off, the token is checked before a
body is read, and a client that leaves mid-body is a 499, never a 500.

Only NATS, Postgres and the web process run here: none of this needs the services."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from contextlib import asynccontextmanager

import httpx
import pytest

from seedline_devtools.embedded import free_port
from seedline_devtools.testing import running
from seedline_web.app import create_app

pytestmark = pytest.mark.servers

INSTANCE = "bd43f4de"


@asynccontextmanager
async def web_process(settings, **changes):
    settings = dataclasses.replace(settings, web_port=free_port(), **changes)
    async with running(create_app(settings)) as app:
        yield app


async def _raw(app, data: bytes, then_close: bool = False) -> tuple[asyncio.StreamReader,
                                                                     asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", app.port)
    writer.write(data)
    await writer.drain()
    if then_close:
        writer.close()
    return reader, writer


def _post_head(path: str, token: str | None, length: int) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json"
            f"\r\nContent-Length: {length}\r\n\r\n").encode()


# -- a stream ends with its token -----------------------------------------------------------


async def test_a_notices_stream_ends_within_five_seconds_of_its_tokens_revocation(settings):
    async with web_process(settings) as app:
        record, token = await app.tokens.create(INSTANCE, "soon revoked")
        ready = asyncio.Event()
        async with httpx.AsyncClient(base_url=app.url, timeout=None,
                                     headers={"Authorization": f"Bearer {token}"}) as client:

            async def listen() -> None:
                async with client.stream("GET", f"/v1/instances/{INSTANCE}/notifications") as r:
                    assert r.status_code == 200
                    async for line in r.aiter_lines():
                        if line == ": ready":
                            ready.set()

            listener = asyncio.create_task(listen())
            await asyncio.wait_for(ready.wait(), 10)
            await app.tokens.revoke(record.token_id)
            try:
                await asyncio.wait_for(listener, 5.0)
            finally:
                listener.cancel()
            after = await client.get(f"/v1/instances/{INSTANCE}/machines")
    assert after.status_code == 401


# -- the console's login ----------------------------------------------------------------------


def _csrf(page: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


async def test_the_console_login_checks_origin_and_csrf_and_its_cookie_is_no_token(settings):
    async with web_process(settings) as app:
        record, token = await app.tokens.create(INSTANCE, "console")
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as browser:
            form = await browser.get("/console")
            csrf = _csrf(form.text)
            forged = await browser.post("/console/login", data={"token": token, "csrf": csrf},
                                        headers={"Origin": "http://evil.example"})
            no_csrf = await browser.post("/console/login", data={"token": token},
                                         headers={"Origin": app.url})
            assert "seedline_login=" not in forged.headers.get("set-cookie", "")
            assert "seedline_login=" not in no_csrf.headers.get("set-cookie", "")
            # Each refusal serves a fresh form; the person sends that one.
            login = await browser.post("/console/login", headers={"Origin": app.url},
                                       data={"token": token, "csrf": _csrf(no_csrf.text)})
            overview = await browser.get("/console")
            logout_forged = await browser.post("/console/logout", data={"csrf": "guess"})
            still_in = await browser.get("/console")
            await app.tokens.revoke(record.token_id)
            after_revoke = await browser.get("/console")
    assert forged.status_code == 403 and no_csrf.status_code == 403
    assert login.status_code == 303
    cookie = next(c for c in login.headers.get_list("set-cookie")
                  if c.startswith("seedline_login="))
    attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict"} <= attributes
    assert token not in cookie and not any(token in c for c in login.headers.get_list(
        "set-cookie"))
    assert f"instance <code>{INSTANCE}</code>" in overview.text
    assert logout_forged.status_code == 403
    assert f"instance <code>{INSTANCE}</code>" in still_in.text
    assert "Log in" in after_revoke.text and INSTANCE not in after_revoke.text


async def test_the_console_cookie_is_secure_when_served_over_tls(settings):
    async with web_process(settings) as app:
        _, token = await app.tokens.create(INSTANCE)
        # What a TLS-terminating client sees: the scheme the app was reached by is https.
        transport = httpx.ASGITransport(app=app.asgi)
        async with httpx.AsyncClient(transport=transport, base_url="https://seedline.test") as tls:
            form = await tls.get("/console")
            login = await tls.post("/console/login", data={"token": token, "csrf": _csrf(
                form.text)}, headers={"Origin": "https://seedline.test"})
    cookie = next(c for c in login.headers.get_list("set-cookie")
                  if c.startswith("seedline_login="))
    assert login.status_code == 303 and "secure" in cookie.lower()


# -- slow and partial requests, and the per-client cap -------------------------------------


async def test_headers_that_never_finish_are_cut_off(settings):
    async with web_process(settings, web_header_timeout_seconds=1.0) as app:
        silent, silent_writer = await _raw(app, b"")
        partial, partial_writer = await _raw(app, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        # The server closes both; reading returns end of stream instead of hanging.
        assert await asyncio.wait_for(silent.read(), 10) == b""
        assert await asyncio.wait_for(partial.read(), 10) == b""
        for writer in (silent_writer, partial_writer):
            writer.close()


async def test_a_body_that_never_finishes_is_answered_408(settings):
    async with web_process(settings, web_body_timeout_seconds=1.0) as app:
        _, token = await app.tokens.create(INSTANCE)
        reader, writer = await _raw(app, _post_head(f"/v1/instances/{INSTANCE}/entries", token,
                                                    100) + b'{"entry_id"')
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), head
    assert json.loads(body)["error"]["code"] == "request_timeout"
    assert b"SEEDLINE_WEB_BODY_TIMEOUT_SECONDS" in body


async def test_one_client_holds_at_most_the_configured_connections(settings):
    async with web_process(settings, web_max_connections_per_client=3,
                           web_header_timeout_seconds=30.0) as app:
        held = [await _raw(app, b"") for _ in range(3)]
        reader, writer = await _raw(app, b"")
        refused = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        for _, w in held:
            w.close()
            await w.wait_closed()
        # Once they are closed, the same client is served again.
        async with httpx.AsyncClient(base_url=app.url, timeout=10) as client:
            served = await _eventually(lambda: client.get("/healthz"))
    assert refused.startswith(b"HTTP/1.1 503"), refused[:80]
    assert b"SEEDLINE_WEB_MAX_CONNECTIONS_PER_CLIENT" in refused
    assert served.status_code == 200


async def _eventually(call, tries: int = 50):
    for _ in range(tries):
        try:
            reply = await call()
            if reply.status_code == 200:
                return reply
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    return reply


# -- the token before the body ------------------------------------------------------------


async def test_a_large_body_without_a_valid_token_is_401_not_413(settings):
    async with web_process(settings) as app:
        async with httpx.AsyncClient(base_url=app.url, timeout=60) as client:
            url = f"/v1/instances/{INSTANCE}/entries"
            big = b'{"entries": [' + b" " * 5_000_000 + b"]}"
            anonymous = await client.post(url, content=big)
            unknown = await client.post(url, content=big,
                                        headers={"Authorization": "Bearer slt_unknown"})
    for reply in (anonymous, unknown):
        assert reply.status_code == 401, reply.text
        assert reply.headers["www-authenticate"] == "Bearer"
        assert reply.json()["error"]["code"] == "unauthorized"


# -- a client that leaves mid-body -----------------------------------------------------------


async def test_a_client_gone_mid_body_is_a_499_never_a_500(settings):
    async with web_process(settings) as app:
        _, token = await app.tokens.create(INSTANCE)
        route = "/v1/instances/{instance_id}/entries"
        await _raw(app, _post_head(f"/v1/instances/{INSTANCE}/entries", token, 100)
                   + b'{"entry_id": ', then_close=True)
        async with httpx.AsyncClient(base_url=app.url, timeout=10) as client:

            async def counted() -> str | None:
                text = (await client.get("/metrics")).text
                return text if f'route="{route}",status="499"' in text else None

            metrics = None
            for _ in range(100):
                if (metrics := await counted()) is not None:
                    break
                await asyncio.sleep(0.05)
    assert metrics is not None, "the disconnect was not counted as a 499"
    assert 'status="500"' not in metrics
