"""The names in the object store of saved checkouts (CONTRACT.md 6), and deleting them.

Listed through the one reader that cannot end early (seedline_platform.replay.stored): the
object store's own listing is a watch, which may end before values on their way, and a
forget must find every object of its instance.
"""

from __future__ import annotations

import json

from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import NotFoundError

from seedline_contracts import channels, subjects

from .replay import stored
from .sending import check_send

_META = f"$O.{subjects.WORKTREES_BUCKET}.M.>"


async def object_names(js: JetStreamContext, prefix: str) -> list[str]:
    """Every object stored now whose name starts with `prefix`, deleted ones left out."""
    names = []
    try:
        async for msg in stored(js, f"OBJ_{subjects.WORKTREES_BUCKET}", _META,
                                deliver_policy=js_api.DeliverPolicy.LAST_PER_SUBJECT):
            try:
                meta = json.loads(msg.data)
            except ValueError:
                continue
            name = meta.get("name") if isinstance(meta, dict) else None
            if isinstance(name, str) and name.startswith(prefix) and not meta.get("deleted"):
                names.append(name)
    except NotFoundError:  # no bucket yet: nothing was saved
        return []
    return names


async def delete_objects(js: JetStreamContext, names: list[str]) -> None:
    if not names:
        return
    store = await js.object_store(subjects.WORKTREES_BUCKET)
    for name in names:
        check_send(channels.WORKTREES.address)
        await store.delete(name)
