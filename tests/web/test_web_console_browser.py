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

from .conftest import INSTANCE, REPO

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
        await page.goto(f"{web.url}/console?token={web.token}")
        assert "token=" not in page.url  # the token went into a cookie, not the history
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
