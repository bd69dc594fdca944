"""Telling the platform this machine is online: a KV key refreshed on a timer.

The bucket's TTL turns a key that stops being refreshed into "offline", so a
machine that dies without saying goodbye is still seen as gone. The presence also
lists the conversations the machine hosts now (protocol 2); it is put again right
after each accepted launch and each stop, so the platform's reconciliation sees
what the machine really hosts without waiting for the timer.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib import metadata

import structlog
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError
from nats.js.kv import KeyValue
from seedline_contracts.codec import encode
from seedline_contracts.runner import PROTOCOL_VERSION, RunnerPresence
from seedline_contracts.subjects import (
    PRESENCE_INTERVAL_SECONDS,
    RUNNERS_BUCKET,
    RUNNERS_TTL_SECONDS,
    presence_key,
)

from .engines.base import Engine

log = structlog.get_logger(__name__)
STOP_DELETE_SECONDS = 1.0
FULL_PACE_PUTS = 2  # after the one at start: CONTRACT.md 4, "Presence and reality"


@cache
def runner_version() -> str | None:
    """The release of this runner (the seedline-runner distribution), said in its presence."""
    try:
        return metadata.version("seedline-runner")
    except metadata.PackageNotFoundError:
        return None


def presence_of(
    node_id: str,
    label: str,
    engines: Mapping[str, Engine],
    live: Sequence[str],
    instances: Sequence[str] = (),
    *,
    containment: str | None = None,
) -> RunnerPresence:
    return RunnerPresence(
        node_id=node_id,
        label=label,
        engines=list(engines),
        # An ACP agent that can neither load nor resume keeps no conversation of its own
        # beyond its process (it says so in its first handshake).
        stateless_engines=[
            name
            for name, engine in engines.items()
            if engine.stateless or getattr(engine, "keeps_no_conversation", False)
        ],
        protocol=PROTOCOL_VERSION,
        live=list(live),
        instances=list(instances),
        containment=containment,
        version=runner_version(),
    )


async def bind_runners_bucket(js: JetStreamContext) -> KeyValue:
    try:
        return await js.key_value(RUNNERS_BUCKET)
    except BucketNotFoundError:
        pass
    config = KeyValueConfig(
        bucket=RUNNERS_BUCKET,
        ttl=float(RUNNERS_TTL_SECONDS),
        history=1,
        storage=StorageType.FILE,
    )
    try:
        return await js.create_key_value(config)
    except Exception:
        # Another machine may have created it first, with settings of its own.
        return await js.key_value(RUNNERS_BUCKET)


class PresenceHeartbeat:
    def __init__(
        self,
        js: JetStreamContext,
        node_id: str,
        presence: Callable[[], RunnerPresence],
        interval: float,
        hosting: Callable[[], bool] = lambda: True,
    ) -> None:
        if not 0 < interval <= PRESENCE_INTERVAL_SECONDS:
            raise ValueError(
                f"presence_interval must be more than 0 and at most {PRESENCE_INTERVAL_SECONDS} s"
            )
        self._js = js
        self._key = presence_key(node_id)
        self._presence = presence
        self._interval = interval
        # A machine that hosts nothing puts half as often, within the contract's longest
        # gap: its puts are most of an idle system's work. One that hosts conversations
        # keeps `interval`, which its lease is counted against.
        self._idle_interval = min(2 * interval, PRESENCE_INTERVAL_SECONDS)
        self._hosting = hosting
        self._kv: KeyValue | None = None
        self._task: asyncio.Task[None] | None = None
        # One put at a time, each built when it is made: a put from the timer can never
        # land after a later put and undo what that one said.
        self._putting = asyncio.Lock()
        self._stopped = False
        # When the newest put that landed was started (monotonic): the platform has heard
        # from this machine since at least then.
        self._renewed_at: float | None = None

    async def beat(self) -> bool:
        """Put the presence as it is now; False (and logged) when it could not be put."""
        async with self._putting:
            if self._stopped:
                return False
            started = time.monotonic()
            try:
                if self._kv is None:
                    self._kv = await bind_runners_bucket(self._js)
                await self._kv.put(self._key, encode(self._presence()))
            except Exception as error:
                log.warning("presence_not_put", key=self._key, error=str(error))
                return False
            self._renewed_at = started
            return True

    @property
    def interval(self) -> float:
        """Seconds from one put of the timer to the next, as things are now."""
        return self._interval if self._hosting() else self._idle_interval

    def out_of_touch_for(self) -> float:
        """Seconds since the newest put that landed was started (infinite before one)."""
        if self._renewed_at is None:
            return float("inf")
        return time.monotonic() - self._renewed_at

    async def start(self) -> None:
        self._stopped = False
        await self.beat()
        self._task = asyncio.create_task(self._loop(), name=f"presence:{self._key}")

    async def stop(self) -> None:
        """Stop refreshing and delete the key: a clean stop means offline at once."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        async with self._putting:
            self._stopped = True
            if self._kv is None:
                return
            try:
                # Bounded: with NATS away the delete cannot land, and a stop must be quick;
                # the key then ends by its TTL.
                await asyncio.wait_for(self._kv.delete(self._key), STOP_DELETE_SECONDS)
            except Exception as error:
                log.warning("presence_not_deleted", key=self._key,
                            error=str(error) or type(error).__name__)

    async def _loop(self) -> None:
        # The first puts keep the full pace whatever it hosts: two puts of a machine started
        # again are how the platform learns it no longer runs what its previous run did.
        for beats in itertools.count():
            await asyncio.sleep(self._interval if beats < FULL_PACE_PUTS else self.interval)
            await self.beat()
