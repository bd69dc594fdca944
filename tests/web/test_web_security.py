"""The web process holds up against clients that misbehave: a revoked token's open
stream ends, the console's login cannot be forged from another site (nor made by a link)
and its cookie is no bearer token, slow or partial requests are cut off, the token is
checked before a body is read (and only one is taken), one token or address holds only
its share of the streams, a client that leaves mid-body is a 499 (MCP too), never a 500,
and a limit doing its work is logged at info.

Only NATS, Postgres and the web process run here: none of this needs the services."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from contextlib import asynccontextmanager

import httpx
import pytest
from structlog.testing import capture_logs

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


async def test_a_client_gone_mid_body_on_mcp_is_a_499_logged_at_info(settings, caplog):
    async with web_process(settings) as app:
        _, token = await app.tokens.create(INSTANCE)
        head = _post_head("/mcp", token, 100).replace(
            b"\r\n\r\n", b"\r\nAccept: application/json, text/event-stream\r\n\r\n")
        with capture_logs() as logs:
            await _raw(app, head + b'{"jsonrpc": ', then_close=True)
            async with httpx.AsyncClient(base_url=app.url, timeout=10) as client:
                metrics = ""
                for _ in range(100):
                    metrics = (await client.get("/metrics")).text
                    if 'route="/mcp",status="499"' in metrics:
                        break
                    await asyncio.sleep(0.05)
    assert 'route="/mcp",status="499"' in metrics
    assert 'route="/mcp",status="500"' not in metrics
    assert {"event": "client_disconnected", "status": 499, "method": "POST", "route": "/mcp",
            "log_level": "info"} in logs
    assert not [e for e in logs if e["log_level"] in ("error", "critical")], logs
    assert not [r for r in caplog.records if r.levelno >= 40], caplog.records


async def test_a_second_authorization_header_is_refused_with_400(settings):
    async with web_process(settings) as app:
        _, token = await app.tokens.create(INSTANCE)
        _, other = await app.tokens.create("other-instance")
        async with httpx.AsyncClient(base_url=app.url, timeout=10) as client:
            twice = [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {other}")]
            api = await client.get(f"/v1/instances/{INSTANCE}/notices", headers=twice)
            mcp = await client.post("/mcp", headers=twice, json={})
            once = await client.get(f"/v1/instances/{INSTANCE}/notices",
                                    headers={"Authorization": f"Bearer {token}"})
    for reply in (api, mcp):
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["code"] == "invalid_request"
        assert "2 Authorization headers" in reply.json()["error"]["message"]
    assert once.status_code == 200


async def test_an_oversized_chunked_body_is_413_and_logged_at_info(settings, caplog):
    async with web_process(settings, web_max_body_bytes=2048) as app:
        _, token = await app.tokens.create(INSTANCE)

        async def chunks():
            for _ in range(20):
                yield b"x" * 500

        with capture_logs() as logs:
            async with httpx.AsyncClient(base_url=app.url, timeout=10, headers={
                    "Authorization": f"Bearer {token}"}) as client:
                api = await client.post(f"/v1/instances/{INSTANCE}/entries", content=chunks())
                mcp = await client.post("/mcp", content=chunks(), headers={
                    "Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json"})
    assert api.status_code == 413 and mcp.status_code == 413
    assert "SEEDLINE_WEB_MAX_BODY_BYTES" in api.json()["error"]["message"]
    refused = [e for e in logs if e["event"] == "request_body_too_large"]
    assert len(refused) == 2 and all(e["log_level"] == "info" for e in refused)
    assert not [e for e in logs if e["log_level"] in ("warning", "error", "critical")], logs
    assert not [r for r in caplog.records if r.levelno >= 40], caplog.records


# -- streams: a share per token and per address ----------------------------------------------


async def _open_stream(client: httpx.AsyncClient, url: str, held: list) -> httpx.Response:
    """A stream opened and kept open (its context in `held`), or the refusal's answer."""
    context = client.stream("GET", url)
    reply = await context.__aenter__()
    if reply.status_code == 200:
        held.append(context)
    else:
        await reply.aread()
        await context.__aexit__(None, None, None)
    return reply


async def test_one_token_and_one_address_hold_only_their_share_of_streams(settings):
    async with web_process(settings, web_max_streams_per_token=2,
                           web_max_streams_per_client=3) as app:
        _, first = await app.tokens.create(INSTANCE)
        _, second = await app.tokens.create(INSTANCE)
        url = f"/v1/instances/{INSTANCE}/notifications"
        held: list = []
        async with httpx.AsyncClient(base_url=app.url, timeout=30,
                                     limits=httpx.Limits(max_connections=20)) as client:
            try:
                client.headers["Authorization"] = f"Bearer {first}"
                taken = [await _open_stream(client, url, held) for _ in range(2)]
                over_token = await _open_stream(client, url, held)
                client.headers["Authorization"] = f"Bearer {second}"
                another_token = await _open_stream(client, url, held)
                over_address = await _open_stream(client, url, held)
                gauge = (await client.get("/metrics")).text
            finally:
                for context in held:
                    await context.__aexit__(None, None, None)
            # Given back as they close: the first token is served again.
            client.headers["Authorization"] = f"Bearer {first}"
            again: list = []
            for _ in range(100):
                reply = await _open_stream(client, url, again)
                if reply.status_code == 200:
                    break
                await asyncio.sleep(0.05)
            for context in again:
                await context.__aexit__(None, None, None)
    assert [r.status_code for r in taken] == [200, 200] and another_token.status_code == 200
    assert over_token.status_code == 429
    assert over_token.json()["error"]["code"] == "too_many_streams"
    assert "SEEDLINE_WEB_MAX_STREAMS_PER_TOKEN" in over_token.json()["error"]["message"]
    assert over_address.status_code == 429
    assert "SEEDLINE_WEB_MAX_STREAMS_PER_CLIENT" in over_address.json()["error"]["message"]
    assert "seedline_web_notification_streams 3.0" in gauge
    assert reply.status_code == 200


async def test_a_console_login_counts_against_its_tokens_share(settings):
    async with web_process(settings, web_max_streams_per_token=1) as app:
        _, token = await app.tokens.create(INSTANCE)
        held: list = []
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as browser:
            form = await browser.get("/console")
            await browser.post("/console/login", data={"token": token, "csrf": _csrf(form.text)},
                               headers={"Origin": app.url})
            try:
                console = await _open_stream(browser, "/console/notifications", held)
                browser.headers["Authorization"] = f"Bearer {token}"
                api = await _open_stream(browser, f"/v1/instances/{INSTANCE}/notifications",
                                         held)
            finally:
                for context in held:
                    await context.__aexit__(None, None, None)
    assert console.status_code == 200
    assert api.status_code == 429 and "SEEDLINE_WEB_MAX_STREAMS_PER_TOKEN" in api.text


# -- no login by a link ---------------------------------------------------------------------


async def test_a_token_in_a_link_never_logs_in(settings):
    async with web_process(settings) as app:
        _, token = await app.tokens.create(INSTANCE)
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as browser:
            linked = await browser.get(f"/console?token={token}")
            deep = await browser.get(f"/console/repo?repo=apps%2Fhello&token={token}")
            shown = await browser.get(linked.headers["location"])
            overview = await browser.get("/console")
    for reply in (linked, deep):
        assert reply.status_code == 303
        assert reply.headers["location"] == "/console/login?from=link"
        assert not any(c.startswith("seedline_login=")
                       for c in reply.headers.get_list("set-cookie"))
    assert "A token in a link does not log in" in shown.text
    assert token not in shown.text
    assert "Log in" in overview.text and INSTANCE not in overview.text


async def test_the_console_answers_pages_never_json(settings):
    """A reload after a refused login asks for /console/login again, and an address
    the console does not serve is a page saying so."""
    async with web_process(settings) as app:
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as browser:
            form = await browser.get("/console/login")
            refused = await browser.post("/console/login", headers={"Origin": app.url},
                                         data={"token": "slt_wrong", "csrf": _csrf(form.text)})
            reloaded = await browser.get("/console/login")
            missing = await browser.get("/console/nothing-here")
            wrong_method = await browser.put("/console/login")
    assert form.status_code == 200 and 'action="/console/login"' in form.text
    assert refused.status_code == 401 and "not known" in refused.text
    assert reloaded.status_code == 200 and 'action="/console/login"' in reloaded.text
    for reply in (missing, wrong_method):
        assert reply.headers["content-type"].startswith("text/html"), reply.text
    assert missing.status_code == 404 and wrong_method.status_code == 405
    assert "GET" in wrong_method.headers["allow"] and "POST" in wrong_method.headers["allow"]
