"""A forgotten instance over HTTP (CONTRACT.md Erasure, 1.2): its tokens stop working and
nothing of it is served; the other instance's token reads all it had."""

from __future__ import annotations

import pytest

from seedline_contracts import subjects

from .conftest import INSTANCE, OTHER, REPO

pytestmark = pytest.mark.servers


def entry(n: int, who: str) -> dict:
    return {"entry_id": f"{who}-{n}", "repo": REPO, "session_id": "csess_web",
            "kind": "chat_assistant", "content": f"{who} note {n}"}


async def test_a_forgotten_instance_is_gone_from_the_http_api(system, web):
    async with web.client(web.token) as mine, web.client(web.other_token) as theirs:
        for n in range(5):
            assert (await mine.post(f"/v1/instances/{INSTANCE}/timeline/append",
                                    json=entry(n, "mine"))).status_code == 200
            assert (await theirs.post(f"/v1/instances/{OTHER}/timeline/append",
                                      json=entry(n, "theirs"))).status_code == 200
        before = await mine.get(f"/v1/instances/{INSTANCE}/timeline", params={"repo": REPO})
        assert before.status_code == 200 and "mine note 4" in before.text

        reply = await system.request(subjects.API_INSTANCES_FORGET,
                                     {"instance_id": INSTANCE, "reason": "asked to be erased"})
        assert reply == {"ok": True, "entries": 5}

        async def refused():
            gone = await mine.get(f"/v1/instances/{INSTANCE}/timeline", params={"repo": REPO})
            return gone.status_code == 401 and gone
        gone = await system.wait_for(refused, timeout=20)
        assert "mine note" not in gone.text
        kept = await theirs.get(f"/v1/instances/{OTHER}/timeline", params={"repo": REPO})
        assert kept.status_code == 200
        assert all(f"theirs note {n}" in kept.text for n in range(5))
        assert "mine note" not in kept.text
