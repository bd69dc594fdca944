"""The console's pages over plain HTTP: each open as decided then (a relocation and a
failed open included), and nothing of another instance."""

from __future__ import annotations

import re
from html import unescape

import httpx
import pytest

from seedline_core.notices import wording_violations

from .conftest import INSTANCE, OTHER, REPO, console_login

pytestmark = pytest.mark.servers


def text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", html))


async def test_a_relocation_and_a_failed_open_are_shown_where_they_happened(system, web):
    await system.start_runner()
    await system.start_runner("linux-1", "Linux box")
    async with web.client(web.token) as api:
        opened = (await api.post(f"/v1/instances/{INSTANCE}/conversations", json={
            "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1",
            "instruction": "Add castling."})).json()
        moved = (await api.post(f"/v1/conversations/{opened['session_id']}/relocate",
                                json={"node_id": "linux-1"})).json()
        failed = await api.post(f"/v1/instances/{INSTANCE}/conversations", json={
            "repo": REPO, "engine": "scripted", "node_id": "ghost-box"})
    assert moved["continuity"]["reason_code"] == "other_machine", moved
    assert failed.status_code == 409

    async with httpx.AsyncClient(base_url=web.url, timeout=30) as browser:
        form = await browser.get("/console")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
        login = await browser.post("/console/login", data={"token": web.token, "csrf": csrf})
        assert login.status_code == 303 and "HttpOnly" in login.headers["set-cookie"]
        assert "SameSite=strict" in login.headers["set-cookie"]
        page = await browser.get("/console/repo", params={"repo": REPO})
    assert page.status_code == 200
    assert "default-src 'none'" in page.headers["content-security-policy"]
    heads = re.findall(r'<p class="open-head">(.*?)</p>', page.text)
    assert [text(h).split(" with ")[0].strip() for h in heads] == [
        "Opened on Mac mini", "Moved to Linux box from Mac mini", "Tried to open on ghost-box"]
    body = text(page.text)
    assert opened["notice"]["console"] in body and moved["notice"]["console"] in body
    assert failed.json()["error"]["message"] in body
    assert moved["brief"]["sha256"] in body and not wording_violations(body)


async def test_the_console_shows_only_the_tokens_instance(system, web):
    await system.append(1, content="ours: the board renders")
    await system.append(2, content="theirs: a private plan", instance_id=OTHER)
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as browser:
        assert (await console_login(browser, "slt_wrong")).status_code == 401
        login = await console_login(browser, web.other_token)
        assert login.status_code == 303 and login.headers["location"] == "/console"
        overview = await browser.get("/console")
        page = await browser.get("/console/repo", params={"repo": REPO})
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        await browser.post("/console/logout", data={"csrf": csrf})
        after = await browser.get("/console/repo", params={"repo": REPO})
    assert f"Instance {OTHER}" in text(overview.text) and REPO in overview.text
    assert "theirs: a private plan" in page.text and "ours: the board" not in page.text
    assert "Log in" in after.text and "a private plan" not in after.text


async def test_actions_asked_in_place_are_answered_in_json(system, web):
    """The page's script sends an action with `Accept: application/json` and shows the
    answer beside it: a fresh open's notice and link, a stop's sentence, a refusal's."""
    await system.start_runner()
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as browser:
        await console_login(browser, web.token)
        page = await browser.get("/console/repo", params={"repo": REPO})
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        wants = {"Accept": "application/json", "Origin": web.url}
        fresh = await browser.post("/console/open", headers=wants, data={
            "csrf": csrf, "repo": REPO, "node_id": "mac-mini-1", "engine": "scripted",
            "force_fresh": "yes", "confirm": "yes"})
        sid = fresh.json()["session_id"]
        stopped = await browser.post("/console/conversation/stop", headers=wants, data={
            "csrf": csrf, "id": sid, "confirm": "yes"})
        forged = await browser.post("/console/conversation/stop", data={
            "csrf": "guess", "id": sid, "confirm": "yes"},
            headers={"Accept": "application/json", "Origin": "http://evil.example"})
        unknown = await browser.post("/console/conversation/stop", headers=wants, data={
            "csrf": csrf, "id": "csess_nope", "confirm": "yes"})
    assert fresh.status_code == 200 and fresh.json()["ok"] is True
    said = fresh.json()["message"]
    assert said.startswith(f"Opened conversation {sid}: ") and "no earlier context" in said
    assert fresh.json()["link"] == f"/console/conversation?id={sid}"
    assert stopped.json()["message"].startswith("Stopped. Your next message to this repo "
                                                "starts a new conversation")
    assert forged.status_code == 403 and forged.json()["ok"] is False
    assert unknown.status_code == 404 and "No conversation csess_nope" in unknown.text
    for reply in (fresh, stopped, forged, unknown):
        assert not wording_violations(reply.text)
