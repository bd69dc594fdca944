"""The console in a real headless browser (Debian's chromium, driven by Playwright), at
desktop and phone widths, with no error in the browser's console:

- a repo page shows each open as it was decided, and stays live: an entry stored and an
  open made elsewhere appear without a reload;
- a conversation page shows the brief as text with its receipt, and stays live: an engine's
  reply and a stop made through the API change the open page without a reload; its
  actions are confirmed and answered in place;
- the overview pages its repos and finds them by name, machine and state, and says when
  nothing matches.

`make test` installs chromium when it can; without it these tests are skipped. With
SEEDLINE_UPDATE_SCREENSHOT=1 the screenshots replace those in docs/.
"""

from __future__ import annotations

import os
import shutil
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from seedline_core.notices import wording_violations

from .conftest import INSTANCE, REPO, browser_login

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DOCS = Path(__file__).resolve().parents[2] / "docs"
WIDTHS = {"desktop": 1280, "phone": 390}
# Long enough for the page's stream on a loaded machine; the tests assert nothing of time.
LIVE_MS = 20_000

pytestmark = [
    pytest.mark.servers,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="the console browser test needs Debian's "
                       "chromium at /usr/bin/chromium; `make test` installs it when run as root "
                       "with apt-get"),
]


@asynccontextmanager
async def console(web):
    """A logged-in page, and every error the browser reports while it is used."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = await browser.new_page(viewport={"width": WIDTHS["desktop"], "height": 900})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        await browser_login(page, web.url, web.token)
        try:
            yield page, errors
        finally:
            await browser.close()


async def no_reload_since(page, marker: str) -> bool:
    """Whether the page is the same document it was when `mark` set the marker."""
    return await page.evaluate(f"window.{marker} === true")


async def shoot(page, tmp_path, name: str) -> None:
    """The page at each width, never wider than the screen; copied to docs/ on request."""
    for width_name, width in WIDTHS.items():
        await page.set_viewport_size({"width": width, "height": 900})
        overflow = await page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, (name, width, overflow)
        file = f"{name}.png" if width_name == "desktop" else f"{name}-{width}.png"
        shot = tmp_path / file
        await page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        if os.environ.get("SEEDLINE_UPDATE_SCREENSHOT") == "1":
            shutil.copyfile(shot, DOCS / file)
    await page.set_viewport_size({"width": WIDTHS["desktop"], "height": 900})


async def _entries(client, session_id: str | None = None) -> list[dict]:
    params = {"repo": REPO, **({"session_id": session_id} if session_id else {})}
    reply = await client.get(f"/v1/instances/{INSTANCE}/timeline", params=params)
    return reply.json()["entries"]


async def _replies(client, session_id: str, count: int) -> bool:
    return sum(e["kind"] == "chat_assistant" for e in await _entries(client, session_id)) >= count


async def _open(client, instruction: str, node: str = "mac-mini-1") -> dict:
    reply = await client.post(f"/v1/instances/{INSTANCE}/conversations", json={
        "repo": REPO, "engine": "scripted", "node_id": node, "instruction": instruction})
    assert reply.status_code == 200, reply.text
    return reply.json()


async def test_a_repo_page_shows_each_open_as_decided_and_stays_live(system, web, tmp_path):
    await system.start_runner()
    for n in range(1, 4):
        await system.append(n, content=f"Sketched the board, step {n}.", session_id="csess_sketch")
    async with web.client(web.token) as client:
        first = await _open(client, "Add castling.")
        await system.wait_for(lambda: _replies(client, first["session_id"], 1))
        second = await _open(client, "What were we doing?")
        await client.post(f"/v1/conversations/{second['session_id']}/stop")
        assert first["outcome"] == "briefed" and second["outcome"] == "resumed"

        async with console(web) as (page, errors):
            await page.click(f"#repos a:has-text('{REPO}')")
            await page.wait_for_selector("#timeline")
            await page.wait_for_selector("#live-status.on", timeout=LIVE_MS)
            await page.evaluate("window.sameDocument = true")

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
                assert await card.locator('[data-field="sha256"]').inner_text() == (
                    receipt["sha256"])
                assert await card.locator('[data-field="entries"]').inner_text() == str(
                    receipt["rows"])
                assert await card.locator('[data-field="up to seq"]').inner_text() == str(
                    receipt["until_seq"])
            await cards.nth(0).locator("summary").click()
            brief_text = await cards.nth(0).locator("pre.brief-text").inner_text()
            assert "Sketched the board, step 3." in brief_text

            # Made elsewhere while the page is open: an entry, then a third open.
            seq = await system.append(4, content="Written while the page was open.",
                                      session_id="csess_other", at=None)
            await page.wait_for_selector(f"#entry-{seq} >> text=Written while the page was open.",
                                         timeout=LIVE_MS)
            third = await _open(client, "Carry on.")
            await page.wait_for_selector(
                f"article.open[data-conversation='{third['session_id']}'] .outcome",
                timeout=LIVE_MS)
            assert await cards.count() == 3
            assert await no_reload_since(page, "sameDocument")
            assert not wording_violations(await page.locator("main").inner_text())
            assert "seedline-sealed" not in await page.content()
            await shoot(page, tmp_path, "console")
            assert errors == []


async def test_a_conversation_page_shows_its_brief_and_stays_live_without_a_reload(
        system, web, tmp_path):
    await system.start_runner()
    await system.start_runner("linux-1", "Linux box")
    for n in range(1, 3):
        await system.append(n, content=f"Drew the board, step {n}.", session_id="csess_before")
    async with web.client(web.token) as client:
        opened = await _open(client, "Add castling.")
        sid = opened["session_id"]
        assert opened["outcome"] == "briefed"
        await system.wait_for(lambda: _replies(client, sid, 1))

        async with console(web) as (page, errors):
            await page.goto(f"{web.url}/console/conversation?id={sid}")
            await page.wait_for_selector("#live-status.on", timeout=LIVE_MS)
            await page.evaluate("window.sameDocument = true")
            assert await page.locator("#state").inner_text() == "live"

            # The brief as text, its seal opened, with its receipt.
            composed = page.locator("li.ev-seed_composed")
            await composed.locator("details.fold summary").click()
            assert "Drew the board, step 2." in await composed.locator(
                "pre.brief-text").inner_text()
            receipt = await composed.locator("p.receipt").inner_text()
            assert f"{opened['brief']['rows']} entries" in receipt
            assert "given to the engine" in receipt
            assert "seedline-sealed" not in await page.content()
            outcome = page.locator("li.ev-opened .outcome")
            assert await outcome.inner_text() == "briefed"

            # A message sent from the page, confirmed in place; the engine's reply arrives.
            await page.fill("#text", "Now en passant.")
            await page.click("#actions form.action button:has-text('Send')")
            await page.wait_for_selector("#action-result.ok", timeout=LIVE_MS)
            assert "Sent (#" in await page.locator("#action-result").inner_text()
            replies = page.locator("li.entry.kind-chat_assistant")
            await page.wait_for_function(
                "n => document.querySelectorAll('li.entry.kind-chat_assistant').length >= n",
                arg=2, timeout=LIVE_MS)
            assert await replies.count() >= 2

            # Moved from the page: asked in place, answered in place, still live.
            await page.select_option("#node", "linux-1")
            await page.click("text=Move…")
            await page.click(".confirm-inline button.danger")
            await page.wait_for_selector("#action-result.ok", timeout=LIVE_MS)
            assert "Moved to linux-1" in await page.locator("#action-result").inner_text()
            await page.wait_for_selector("li.ev-relocated", timeout=LIVE_MS)

            # Stopped through the API, elsewhere: the open page says so, no reload.
            stopped = await client.post(f"/v1/conversations/{sid}/stop")
            assert stopped.json()["stopped"] is True
            await page.wait_for_selector("#state.state-stopped", timeout=LIVE_MS)
            await page.wait_for_selector("li.ev-stopped", timeout=LIVE_MS)
            assert await page.locator("form[data-when='live']").is_hidden()
            assert await no_reload_since(page, "sameDocument")

            # A notice about it: at the top of the page and in its history.
            import json

            from seedline_contracts import subjects
            from seedline_contracts.times import now_text

            text = "The engine could not continue its earlier conversation after all."
            await system.nc.publish(subjects.notify_subject(INSTANCE), json.dumps({
                "kind": "resume_lost", "session_id": sid, "text": text,
                "at": now_text()}).encode())
            await page.wait_for_selector(f"#live-notices >> text={text}", timeout=LIVE_MS)
            await page.wait_for_selector(f"li.notice-item >> text={text}", timeout=LIVE_MS)

            kinds = await page.locator("ol.history > li.event").evaluate_all(
                "nodes => nodes.map(n => n.querySelector('.meta').textContent.split(' ')[0])")
            order = [k for k in kinds if k in ("open_requested", "opened", "relocated",
                                               "stopped")]
            # A relocation stops the conversation on the machine it leaves first.
            assert order == ["open_requested", "opened", "stopped", "relocated", "stopped"], kinds
            # Each item once, in order, though some came with the page and some live.
            keys = await page.locator("ol.history > li").evaluate_all(
                "nodes => nodes.map(n => n.dataset.key)")
            assert keys == sorted(keys) and len(keys) == len(set(keys))
            assert await page.locator("time[title]").count() > 0
            assert not wording_violations(await page.locator("main").inner_text())
            await shoot(page, tmp_path, "console-conversation")
            assert errors == []


async def test_the_overview_pages_and_finds_repos_and_says_when_nothing_matches(
        system, web, tmp_path):
    await system.start_runner()
    async with web.client(web.token) as client:
        batch = [{"entry_id": f"many-{i}", "repo": f"team/service-{i:02d}",
                  "session_id": f"work-{i}", "kind": "chat_user",
                  "content": f"Set up service {i}."} for i in range(64)]
        published = await client.post(f"/v1/instances/{INSTANCE}/entries/batch",
                                      json={"entries": batch})
        assert published.status_code == 202, published.text
        opened = await _open(client, "Add castling.")
        assert opened["outcome"] in ("fresh", "briefed", "unbriefed")

        async with console(web) as (page, errors):
            async def shows_all() -> bool:
                await page.goto(f"{web.url}/console")
                return "of 65" in await page.locator("#repos p.count").inner_text()

            await system.wait_for(shows_all, timeout=30)
            count = page.locator("#repos p.count")
            assert "Repos 1–50 of 65 (1 live)" in await count.inner_text()
            first_row = page.locator("#repos tbody tr").first
            assert REPO in await first_row.inner_text()  # live first
            assert await page.locator("#repos tbody tr").count() == 50
            assert await page.locator("#repos time[title]").count() >= 1

            await page.click("nav.pager a[rel=next]")
            await page.wait_for_selector("#repos p.count")
            assert "Repos 51–65 of 65" in await count.inner_text()
            assert "Page 2 of 2" in await page.locator("nav.pager").inner_text()

            await page.fill("#q", "service-1")
            await page.click("form.filter button")
            await page.wait_for_selector("#repos p.count")
            names = await page.locator("#repos tbody tr td:first-child").all_inner_texts()
            assert sorted(names) == [f"team/service-{i}" for i in range(10, 20)]

            await page.select_option("#machine", "mac-mini-1")
            await page.fill("#q", "")
            await page.select_option("#state", "live")
            await page.click("form.filter button")
            assert await page.locator("#repos tbody tr td:first-child").all_inner_texts() == [
                REPO]

            await page.fill("#q", "nothing-like-it")
            await page.click("form.filter button")
            said = await page.locator("#repos p.empty").inner_text()
            assert said.startswith("No repo matches a name holding “nothing-like-it”, on Mac "
                                   "mini, live (of 65 on this instance).")
            await page.click("text=Clear the filters")
            await page.wait_for_selector("#repos p.count")
            assert not wording_violations(await page.locator("main").inner_text())
            await shoot(page, tmp_path, "console-overview")
            assert errors == []
