"""What nats-server's monitoring endpoint says about who is connected."""

from __future__ import annotations

import asyncio
import json
import urllib.request


def _connections(monitor_url: str) -> list[dict]:
    try:
        with urllib.request.urlopen(
            monitor_url.rstrip("/") + "/connz?subs=1&limit=4096", timeout=1
        ) as resp:
            return json.load(resp).get("connections") or []
    except Exception:
        return []


async def subscribed(monitor_url: str, name: str) -> bool:
    """A service subscribes to its seedline subjects only once it can answer them (CONTRACT 7)."""
    for conn in await asyncio.to_thread(_connections, monitor_url):
        if conn.get("name") == name and any(
            s.startswith("seedline.") for s in conn.get("subscriptions_list") or []
        ):
            return True
    return False
