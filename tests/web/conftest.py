"""The web process against the running system: real nats-server, Postgres, the four
services and a runner, and seedline-web listening on a port of its own."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import httpx
import pytest

from seedline_devtools.embedded import free_port
from seedline_devtools.testing import running
from seedline_web.app import create_app

INSTANCE = "bd43f4de"
OTHER = "other-instance"
REPO = "apps/chess-academy"


@dataclass
class Web:
    app: object
    url: str
    token: str  # for INSTANCE
    other_token: str  # for OTHER

    def client(self, token: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=40)


@pytest.fixture
async def web(system):
    settings = dataclasses.replace(system.settings, web_port=free_port())
    async with running(create_app(settings)) as app:
        _, token = await app.tokens.create(INSTANCE, "tests")
        _, other = await app.tokens.create(OTHER, "the other tenant")
        yield Web(app, app.url, token, other)


async def console_login(browser: httpx.AsyncClient, token: str) -> httpx.Response:
    """Log a plain HTTP client into the console by its form (the only way in)."""
    import re

    form = await browser.get("/console/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
    return await browser.post("/console/login", data={"token": token, "csrf": csrf})


async def browser_login(page, url: str, token: str) -> None:
    """Log a Playwright page into the console by its form."""
    await page.goto(f"{url}/console/login")
    await page.fill("#token", token)
    await page.click("form.login button")
    await page.wait_for_url(f"{url}/console")
