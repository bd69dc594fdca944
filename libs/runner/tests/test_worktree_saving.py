"""Saving to the object store on a real nats-server: a machine killed while it saves leaves
the whole object or none, and an object opens only with its conversation's key and under
its own name."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap

import nats
import pytest

from seedline_contracts import subjects
from seedline_contracts.sealed_objects import Unreadable, derive_key
from seedline_platform import natsio
from seedline_runner.worktree.store import SavedObjects

pytestmark = pytest.mark.servers

KEY = derive_key(b"k" * 32, 1, "inst-a", "csess_1")
PUT_FOREVER = textwrap.dedent("""
    import asyncio, os, sys
    import nats
    from seedline_contracts.sealed_objects import derive_key
    from seedline_runner.worktree.store import SavedObjects
    async def main():
        nc = await nats.connect(sys.argv[1])
        key = derive_key(b"k" * 32, 1, "inst-a", "csess_1")
        await SavedObjects(nc.jetstream()).put("inst-a/csess_1/7", key, os.urandom(30_000_000))
    asyncio.run(main())
""")


async def test_a_machine_killed_while_saving_leaves_no_object(nats_url):
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await natsio.ensure_worktrees_bucket(js)
        saving = subprocess.Popen([sys.executable, "-c", PUT_FOREVER, nats_url])
        stream = f"OBJ_{subjects.WORKTREES_BUCKET}"
        for _ in range(600):  # kill -9 once some of its chunks are stored
            if (await js.stream_info(stream)).state.messages >= 5:
                break
            await asyncio.sleep(0.05)
        saving.send_signal(signal.SIGKILL)
        assert saving.wait(10) == -signal.SIGKILL
        assert (await js.stream_info(stream)).state.messages >= 5  # chunks, half a save
        with pytest.raises(Unreadable, match="no saved object"):
            await SavedObjects(js).get("inst-a/csess_1/7", KEY)
    finally:
        await nc.close()


async def test_an_object_opens_only_with_its_key_and_under_its_name(nats_url):
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await natsio.ensure_worktrees_bucket(js)
        objects = SavedObjects(js)
        await objects.put("inst-a/csess_1/7", KEY, b"the tree")
        assert await objects.get("inst-a/csess_1/7", KEY) == b"the tree"
        other = derive_key(b"k" * 32, 1, "inst-a", "csess_2")
        with pytest.raises(Unreadable):
            await objects.get("inst-a/csess_1/7", other)
        # The same bytes stored under another name do not open.
        sealed = (await (await js.object_store(subjects.WORKTREES_BUCKET)).get(
            "inst-a/csess_1/7")).data
        await (await js.object_store(subjects.WORKTREES_BUCKET)).put("inst-a/csess_9/1", sealed)
        with pytest.raises(Unreadable):
            await objects.get("inst-a/csess_9/1", KEY)
        stored = (await js.get_last_msg(f"OBJ_{subjects.WORKTREES_BUCKET}",
                                        "$O.seedline_worktrees.C.>")).data
        assert b"the tree" not in stored  # sealed at rest
    finally:
        await nc.close()
