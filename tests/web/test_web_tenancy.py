"""Two tokens, two instances: neither reads nor writes the other's, by any route."""

from __future__ import annotations

import json

import pytest

from seedline_core.notices import wording_violations

from .conftest import INSTANCE, OTHER, REPO

pytestmark = pytest.mark.servers


def entry(n: int, **over) -> dict:
    body = {"entry_id": f"tenancy-{n}", "repo": REPO, "session_id": "csess_theirs",
            "kind": "chat_user", "content": f"private note {n}"}
    body.update(over)
    return body


async def open_on(client, instance: str) -> dict:
    reply = await client.post(f"/v1/instances/{instance}/conversations", json={
        "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1"})
    assert reply.status_code == 200, reply.text
    return reply.json()


async def test_a_token_neither_reads_nor_writes_another_instance(system, web):
    await system.start_runner()
    async with web.client(web.token) as mine, web.client(web.other_token) as theirs:
        # The other tenant works on a repo with the same name.
        assert (await theirs.post(f"/v1/instances/{OTHER}/timeline/append",
                                  json=entry(1))).status_code == 200

        # The message woke nothing (the repo was never opened): once that notice is kept,
        # the gateway is past it, and the open below cannot receive it as a turn.
        async def told_not_woken() -> bool:
            kept = (await theirs.get(f"/v1/instances/{OTHER}/notices")).json()["notices"]
            return any(n["notice"]["kind"] == "not_woken" for n in kept)

        await system.wait_for(told_not_woken, timeout=30)
        their_open = await open_on(theirs, OTHER)
        their_id = their_open["session_id"]

        refused = [
            await mine.get(f"/v1/instances/{OTHER}/timeline", params={"repo": REPO}),
            await mine.post(f"/v1/instances/{OTHER}/entries", json=entry(2)),
            await mine.post(f"/v1/instances/{OTHER}/entries/batch", json={"entries": [entry(3)]}),
            await mine.post(f"/v1/instances/{OTHER}/timeline/append", json=entry(4)),
            await mine.post(f"/v1/instances/{OTHER}/conversations", json={
                "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1"}),
            await mine.get(f"/v1/instances/{OTHER}/conversations"),
            await mine.get(f"/v1/instances/{OTHER}/machines"),
            await mine.get(f"/v1/instances/{OTHER}/rejected"),
            await mine.get(f"/v1/instances/{OTHER}/notifications"),
        ]
        for reply in refused:
            assert reply.status_code == 403, (reply.request.url, reply.text)
            error = reply.json()["error"]
            assert error["code"] == "not_permitted" and OTHER in error["message"]
            assert not wording_violations(error["message"])

        # Their conversation by its bare id is answered exactly like an id nobody has.
        unknown = await mine.get("/v1/conversations/csess_nobody_has_this/brief")
        assert unknown.status_code == 404
        for method, path, body in [
            ("GET", f"/v1/conversations/{their_id}/brief", None),
            ("POST", f"/v1/conversations/{their_id}/stop", {}),
            ("POST", f"/v1/conversations/{their_id}/relocate", {"node_id": "mac-mini-1"}),
        ]:
            reply = await mine.request(method, path, json=body)
            assert reply.status_code == 404, (path, reply.text)
            # The same answer, the id it was asked for aside.
            assert reply.json() == json.loads(unknown.text.replace("csess_nobody_has_this",
                                                                   their_id))

        # An entry that names the other instance inside its body is refused too.
        sneaky = await mine.post(f"/v1/instances/{INSTANCE}/entries",
                                 json=entry(5, instance_id=OTHER))
        assert sneaky.status_code == 403 and sneaky.json()["error"]["code"] == "not_permitted"

        # Nothing of theirs is visible on my side, and their conversation still runs.
        mine_read = await mine.get(f"/v1/instances/{INSTANCE}/timeline", params={"repo": REPO})
        assert mine_read.json()["entries"] == []
        mine_live = await mine.get(f"/v1/instances/{INSTANCE}/conversations")
        assert mine_live.json()["conversations"] == []
        machines = (await mine.get(f"/v1/instances/{INSTANCE}/machines")).json()["machines"]
        assert machines[0]["node_id"] == "mac-mini-1" and machines[0]["live"] == []
        their_live = await theirs.get(f"/v1/instances/{OTHER}/conversations")
        assert [c["session_id"] for c in their_live.json()["conversations"]] == [their_id]
        their_read = await theirs.get(f"/v1/instances/{OTHER}/timeline", params={"repo": REPO})
        assert [e["entry_id"] for e in their_read.json()["entries"]] == ["tenancy-1"]

        # The owner itself can read its brief and stop it.
        assert (await theirs.get(f"/v1/conversations/{their_id}/brief")).status_code == 200
        stopped = await theirs.post(f"/v1/conversations/{their_id}/stop")
        assert stopped.json()["stopped"] is True


async def test_no_token_or_a_revoked_one_is_refused(system, web):
    async with web.client() as anonymous:
        reply = await anonymous.get(f"/v1/instances/{INSTANCE}/timeline", params={"repo": REPO})
    assert reply.status_code == 401 and reply.headers["www-authenticate"] == "Bearer"
    assert "seedline tokens create" in reply.json()["error"]["message"]
    record, token = await web.app.tokens.create(INSTANCE, "short-lived")
    async with web.client(token) as client:
        ok = await client.get(f"/v1/instances/{INSTANCE}/timeline", params={"repo": REPO})
        assert ok.status_code == 200
        await web.app.tokens.revoke(record.token_id)
        gone = await client.get(f"/v1/instances/{INSTANCE}/timeline", params={"repo": REPO})
    assert gone.status_code == 401 and "revoked" in gone.json()["error"]["message"]
    async with web.client("slt_made_up") as client:
        made_up = await client.get(f"/v1/instances/{INSTANCE}/machines")
    assert made_up.status_code == 401
    assert all(not wording_violations(r.json()["error"]["message"]) for r in (reply, gone, made_up))

