"""Readiness of what `seedline up` started, seen from outside as a client would."""

from __future__ import annotations

import asyncio
import urllib.request

from nats.aio.client import Client

from seedline_cli.monitor import subscribed
from seedline_contracts import subjects

from .processes import DEMO_RUNNER


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
