"""The console in a real headless browser (Debian's chromium, driven by Playwright):
a repo with two conversations shows the boundary, each open's decision in the console
notice's words, and the brief's receipt.

`make test` installs chromium when it can; without it this test is skipped. With
SEEDLINE_UPDATE_SCREENSHOT=1 the page's screenshot replaces docs/console.png.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from seedline_core.notices import wording_violations

from .conftest import INSTANCE, REPO, browser_login

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "console.png"

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="the console browser test needs Debian's "
                       "chromium at /usr/bin/chromium; `make test` installs it when run as root "
                       "with apt-get"),
]


async def test_the_console_shows_each_open_as_it_was_decided(system, web, tmp_path):
    from playwright.async_api import async_playwright

    await system.start_runner()
    for n in range(1, 4):
        await system.append(n, content=f"Sketched the board, step {n}.", session_id="csess_sketch")
    async with web.client(web.token) as client:
        first = (await client.post(f"/v1/instances/{INSTANCE}/conversations", json={
            "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1",
            "instruction": "Add castling."})).json()
        await system.wait_for(lambda: _has_reply(client, first["session_id"]))
        second = (await client.post(f"/v1/instances/{INSTANCE}/conversations", json={
            "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1",
            "instruction": "What were we doing?"})).json()
        await client.post(f"/v1/conversations/{second['session_id']}/stop")
    assert first["outcome"] == "briefed" and second["outcome"] == "resumed"

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = await browser.new_page(viewport={"width": 1200, "height": 900})
        await browser_login(page, web.url, web.token)
        await page.click(f"text={REPO}")
        await page.wait_for_selector("#timeline")

        boundaries = await page.locator("h3.boundary").evaluate_all(
            "nodes => nodes.map(n => n.dataset.conversation)")
        assert boundaries == ["csess_sketch", first["session_id"], second["session_id"]]
        cards = page.locator("article.open")
        assert await cards.count() == 2
        for card, reply in zip([cards.nth(0), cards.nth(1)], [first, second]):
            assert await card.locator(".notice").inner_text() == reply["notice"]["console"]
            assert await card.locator(".reason").inner_text() == reply["continuity"]["reason"]
            assert await card.locator(".outcome").inner_text() == reply["outcome"]
            receipt = reply["brief"]
            assert await card.locator('[data-field="sha256"]').inner_text() == receipt["sha256"]
            assert await card.locator('[data-field="entries"]').inner_text() == str(
                receipt["rows"])
            assert await card.locator('[data-field="up to seq"]').inner_text() == str(
                receipt["until_seq"])
        first_card = cards.nth(0)
        await first_card.locator("summary").click()
        brief_text = await first_card.locator("pre.brief-text").inner_text()
        assert "Sketched the board, step 3." in brief_text
        assert not wording_violations(await page.locator("main").inner_text())

        shot = tmp_path / "console.png"
        await page.screenshot(path=str(shot), full_page=True)
        await browser.close()
    assert shot.stat().st_size > 10_000
    if os.environ.get("SEEDLINE_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, SCREENSHOT)


async def _has_reply(client, session_id: str) -> bool:
    """The scripted engine has answered the instruction: the first conversation has work."""
    reply = await client.get(f"/v1/instances/{INSTANCE}/timeline",
                             params={"repo": REPO, "session_id": session_id})
    return any(e["kind"] == "chat_assistant" for e in reply.json()["entries"])


CONVERSATION_SHOTS = {1200: "console-conversation.png", 390: "console-conversation-390.png"}


async def _wait_reply(client, session_id: str, count: int) -> bool:
    reply = await client.get(f"/v1/instances/{INSTANCE}/timeline",
                             params={"repo": REPO, "session_id": session_id})
    return sum(e["kind"] == "chat_assistant" for e in reply.json()["entries"]) >= count


async def test_a_conversation_page_shows_its_whole_history_live_and_takes_actions(system, web,
                                                                                  tmp_path):
    import json

    from playwright.async_api import async_playwright

    from seedline_contracts import subjects

    await system.start_runner()
    await system.start_runner("linux-1", "Linux box")
    async with web.client(web.token) as client:
        opened = (await client.post(f"/v1/instances/{INSTANCE}/conversations", json={
            "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1",
            "instruction": "Add castling."})).json()
        sid = opened["session_id"]
        await system.wait_for(lambda: _wait_reply(client, sid, 1))
        turn = await client.post(f"/v1/instances/{INSTANCE}/timeline/append", json={
            "entry_id": "console-turn-1", "repo": REPO, "session_id": sid, "kind": "chat_user",
            "content": "Now en passant. " + "A long explanation follows. " * 60})
        assert turn.status_code == 200, turn.text
        await system.wait_for(lambda: _wait_reply(client, sid, 2))
        moved = await client.post(f"/v1/conversations/{sid}/relocate",
                                  json={"node_id": "linux-1"})
        assert moved.status_code == 200, moved.text

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = await browser.new_page(viewport={"width": 1200, "height": 900})
        await browser_login(page, web.url, web.token)
        await page.fill("#q", "chess")
        await page.click("form.filter button")
        await page.click(f"#live a:has-text('{sid}')")
        await page.wait_for_selector("#history")
        assert (await page.locator(".state").inner_text()) == "live"
        # Stop, confirmed on a page of its own.
        await page.click("text=Stop…")
        assert "Stop conversation" in await page.locator(".question").inner_text()
        await page.click("text=Stop it")
        await page.wait_for_selector("#history")
        assert (await page.locator(".state").inner_text()) == "stopped"
        kinds = await page.locator("ol.history > li.event").evaluate_all(
            "nodes => nodes.map(n => n.querySelector('.meta').textContent.split(' ')[0])")
        order = [k for k in kinds if k in ("open_requested", "opened", "relocated", "stopped")]
        # A relocation stops the conversation on the machine it leaves first (its checkout
        # is saved as it stops), then it runs on the other.
        assert order == ["open_requested", "opened", "stopped", "relocated", "stopped"], kinds
        assert await page.locator("li.entry").count() >= 4
        assert await page.locator("time[title]").count() > 0
        assert await page.locator("details.fold").count() >= 1  # the long turn is folded
        assert "given to the engine" in await page.locator(".spent").first.inner_text()

        # A notice about this conversation arrives while the page is open: shown at once.
        text = "The engine could not continue its earlier conversation after all."
        from seedline_contracts.times import now_text

        await system.nc.publish(subjects.notify_subject(INSTANCE), json.dumps({
            "kind": "resume_lost", "session_id": sid, "text": text, "at": now_text()}).encode())
        await page.wait_for_selector(f"#live-notices >> text={text}", timeout=15000)
        await page.wait_for_selector(f"li.notice-item >> text={text}", timeout=15000)
        assert not wording_violations(await page.locator("main").inner_text())

        shots = {}
        for width, name in CONVERSATION_SHOTS.items():
            await page.set_viewport_size({"width": width, "height": 900})
            overflow = await page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, (width, overflow)
            shots[name] = tmp_path / name
            await page.screenshot(path=str(shots[name]), full_page=True)
        await browser.close()
    for name, shot in shots.items():
        assert shot.stat().st_size > 10_000
        if os.environ.get("SEEDLINE_UPDATE_SCREENSHOT") == "1":
            shutil.copyfile(shot, SCREENSHOT.with_name(name))
