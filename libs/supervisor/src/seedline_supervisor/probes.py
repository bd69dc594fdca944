"""Readiness of what `seedline up` started, seen from outside as a client would."""

from __future__ import annotations

import asyncio
import json
import urllib.request

from nats.aio.client import Client

from seedline_contracts import subjects

from .processes import DEMO_RUNNER


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


async def runner_present(nc: Client, node_id: str = DEMO_RUNNER) -> bool:
    try:
        kv = await nc.jetstream().key_value(subjects.RUNNERS_BUCKET)
        return await kv.get(subjects.presence_key(node_id)) is not None
    except Exception:
        return False


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return resp.status == 200
    except Exception:
        return False


async def is_ready(name: str, nc: Client, monitor_url: str, health_url: str | None = None) -> bool:
    if health_url:  # every service says so itself on /readyz
        return await asyncio.to_thread(_answers, health_url)
    if name == DEMO_RUNNER:
        return await runner_present(nc)
    return await subscribed(monitor_url, name)
