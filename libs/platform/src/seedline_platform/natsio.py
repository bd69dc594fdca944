"""NATS connection, stream set-up and the durability check (DESIGN.md rule 5)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from dataclasses import dataclass
from typing import Iterable, Sequence

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import NotFoundError
from nats.nuid import NUID

from seedline_contracts import subjects
from seedline_contracts.streams import ALL_STREAMS, StreamSpec

from .logging import get_logger
from .nats_workarounds import connection_of, survive_abandoned_flushes
from .sending import check_send

log = get_logger(__name__)

MIN_SERVER_VERSION = (2, 12, 0)
PUBLISH_ACK_TIMEOUT = 10.0


class DurabilityError(RuntimeError):
    """The server or a stream is weaker than DESIGN.md rule 5 requires."""


async def connect(servers: Sequence[str], name: str, **options) -> Client:
    """Connect and keep reconnecting for ever: a service outlives a NATS restart."""

    async def on_error(exc: Exception) -> None:
        log.warning("nats_error", error=str(exc))

    async def on_disconnect() -> None:
        # close() marks the connection closed before it calls back: a normal end is no warning.
        if nc is not None and nc.is_closed:
            log.info("nats_closed")
        else:
            log.warning("nats_disconnected")
            _AWAY[id(nc)] = time.monotonic()

    async def on_reconnect() -> None:
        log.info("nats_reconnected")
        _AWAY[id(nc)] = time.monotonic()

    nc: Client | None = None
    nc = await nats.connect(
        servers=list(servers),
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        connect_timeout=5,
        error_cb=on_error,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
        **options,
    )
    survive_abandoned_flushes(nc)
    return nc


# When each connection made by connect() last lost or regained its server (by id(), as
# nats-py's Client is not weakly referable): what a request that failed meanwhile needs to
# tell "NATS was away" from "nobody answered".
_AWAY: dict[int, float] = {}


def away_within(nc: Client, seconds: float) -> bool:
    """Whether the connection is down now, or was lost or regained in the last `seconds`."""
    if not nc.is_connected:
        return True
    since = _AWAY.get(id(nc))
    return since is not None and time.monotonic() - since <= seconds


def stream_config(spec: StreamSpec, replicas: int = 1) -> js_api.StreamConfig:
    return js_api.StreamConfig(
        name=spec.name,
        subjects=list(spec.subjects),
        retention=js_api.RetentionPolicy(spec.retention),
        discard=js_api.DiscardPolicy(spec.discard),
        storage=js_api.StorageType(spec.storage),
        duplicate_window=spec.duplicate_window,
        deny_delete=spec.deny_delete,
        deny_purge=spec.deny_purge,
        allow_direct=True,
        num_replicas=replicas,
        allow_atomic=spec.atomic_batches or None,
        max_age=spec.max_age or None,
    )


async def ensure_streams(
    js: JetStreamContext, specs: Iterable[StreamSpec] = ALL_STREAMS, replicas: int = 1
) -> None:
    """Create each stream, or leave it be when it exists (idempotent)."""
    for spec in specs:
        try:
            await js.stream_info(spec.name)
        except NotFoundError:
            await _add_stream(js, spec, replicas)


# A cluster that has just formed elects its JetStream leader before every server has
# told it what it can hold; until then a stream of several replicas finds no peers.
PLACEMENT_WAIT_SECONDS = 30.0
NO_PEERS_FOR_PLACEMENT = 10005


async def _add_stream(js: JetStreamContext, spec: StreamSpec, replicas: int) -> None:
    deadline = asyncio.get_running_loop().time() + PLACEMENT_WAIT_SECONDS
    while True:
        try:
            await js.add_stream(stream_config(spec, replicas))
            log.info("stream_created", stream=spec.name)
            return
        except Exception as exc:
            if "already in use" in str(exc):  # another copy created it first
                return
            if (getattr(exc, "err_code", None) != NO_PEERS_FOR_PLACEMENT
                    or asyncio.get_running_loop().time() > deadline):
                raise
            log.warning("stream_waiting_for_peers", stream=spec.name, replicas=replicas)
            await asyncio.sleep(0.5)


async def ensure_runners_bucket(js: JetStreamContext, replicas: int = 1):
    try:
        return await js.key_value(subjects.RUNNERS_BUCKET)
    except Exception:
        return await js.create_key_value(
            js_api.KeyValueConfig(
                bucket=subjects.RUNNERS_BUCKET,
                history=1,
                ttl=subjects.RUNNERS_TTL_SECONDS,
                storage=js_api.StorageType.FILE,
                replicas=replicas,
            )
        )


async def ensure_worktrees_bucket(js: JetStreamContext, replicas: int = 1):
    """The object store machines save conversations' checkouts to (CONTRACT.md 6)."""
    try:
        return await js.object_store(subjects.WORKTREES_BUCKET)
    except Exception:
        try:
            return await js.create_object_store(subjects.WORKTREES_BUCKET, js_api.ObjectStoreConfig(
                storage=js_api.StorageType.FILE, replicas=replicas,
                description="Conversations' saved working trees and engine records, sealed"))
        except Exception:  # another copy made it first
            return await js.object_store(subjects.WORKTREES_BUCKET)


@dataclass(frozen=True)
class DurabilityReport:
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def _parse_version(text: str) -> tuple[int, int, int]:
    parts = (text.split("-")[0].split(".") + ["0", "0"])[:3]
    return tuple(int(p) if p.isdigit() else 0 for p in parts)  # type: ignore[return-value]


def _fetch_varz(monitor_url: str) -> dict | None:
    try:
        with urllib.request.urlopen(monitor_url.rstrip("/") + "/varz", timeout=2) as resp:
            return json.load(resp)
    except Exception:
        return None


async def check_durability(
    nc: Client, js: JetStreamContext, monitor_url: str, specs: Iterable[StreamSpec] = ALL_STREAMS
) -> DurabilityReport:
    """Name everything weaker than required: server version, fsync policy, stream settings.

    `monitor_url` is one monitoring address or a cluster's, separated by commas: every
    server that answers must fsync every write, and one server of a cluster that is down
    (a service starting again while it is away) does not stop the check."""
    problems: list[str] = []
    server_version = _parse_version(str(nc._server_info.get("version", "0.0.0")))
    if server_version < MIN_SERVER_VERSION:
        problems.append(
            f"nats-server {'.'.join(map(str, server_version))} is older than 2.12; upgrade it"
        )
    urls = [u.strip() for u in monitor_url.split(",") if u.strip()]
    answers = [(u, await asyncio.to_thread(_fetch_varz, u)) for u in urls]
    if not any(varz is not None for _, varz in answers):
        problems.append(
            f"cannot read {' or '.join(f'{u}/varz' for u in urls)} to confirm sync_interval: "
            "always; set SEEDLINE_NATS_MONITOR_URL to the server's monitoring address"
        )
    for url, varz in answers:
        if varz is not None and not varz.get("jetstream", {}).get("config", {}).get(
                "sync_always", False):
            where = f" at {url}" if len(urls) > 1 else ""
            problems.append(
                f"nats-server{where} is not configured with jetstream {{ sync_interval: "
                "always }; acknowledged writes can be lost on a crash"
            )
    for spec in specs:
        try:
            info = await js.stream_info(spec.name)
        except NotFoundError:
            problems.append(f"stream {spec.name} does not exist")
            continue
        cfg = info.config
        if cfg.storage != js_api.StorageType.FILE:
            problems.append(f"stream {spec.name} is not on file storage")
        if spec.deny_delete and not cfg.deny_delete:
            problems.append(f"stream {spec.name} allows deleting messages")
        if spec.deny_purge and not cfg.deny_purge:
            problems.append(f"stream {spec.name} allows purging")
        if spec.discard == "new" and cfg.discard != js_api.DiscardPolicy.NEW:
            problems.append(f"stream {spec.name} discards old messages when full")
        if (cfg.duplicate_window or 0) < spec.duplicate_window:
            problems.append(f"stream {spec.name} has a duplicate window under 2 minutes")
    return DurabilityReport(tuple(problems))


async def enforce_durability(
    nc: Client, js: JetStreamContext, monitor_url: str, strict: bool
) -> DurabilityReport:
    report = await check_durability(nc, js, monitor_url)
    for problem in report.problems:
        log.warning("durability_weaker_than_required", problem=problem)
    if strict and not report.ok:
        raise DurabilityError(
            "refusing to start (SEEDLINE_STRICT_DURABILITY=1): " + "; ".join(report.problems)
        )
    return report


async def publish_window(
    js: JetStreamContext,
    messages: Sequence[tuple[str, bytes, dict | None]],
    timeout: float = PUBLISH_ACK_TIMEOUT,
) -> list[js_api.PubAck]:
    """Publish many messages with all their acks pending at once, in order.

    An awaited publish per message costs a full fsync round trip each (DESIGN.md
    rule 5); a window of pending acks shares them. Raises on the first failure.
    """
    for subject, _, _ in messages:
        check_send(subject)
    futures = [await js.publish_async(s, p, headers=h) for s, p, h in messages]
    return list(await asyncio.wait_for(asyncio.gather(*futures), timeout))


MAX_ATOMIC_BATCH = 1000  # nats-server's limit on messages in one atomic batch


class AtomicBatchRefused(RuntimeError):
    """The server would not store the batch as a whole (a duplicate id, or atomic
    batches not enabled on the stream); nothing of it was stored."""


async def publish_atomic(
    js: JetStreamContext, messages: Sequence[tuple[str, bytes, dict | None]],
    timeout: float = PUBLISH_ACK_TIMEOUT,
) -> list[int]:
    """Store messages as one atomic batch (ADR-50) and return their stream sequences.

    With sync_interval: always, one commit per batch instead of one fsync per
    message: about 18,000 instead of 4,000 messages a second on these machines.
    """
    from nats.js.errors import APIError

    nc: Client = connection_of(js)  # the batch's body goes out as plain publishes on it
    for subject, _, _ in messages:
        check_send(subject)
    seqs: list[int] = []
    for start in range(0, len(messages), MAX_ATOMIC_BATCH):
        chunk = messages[start : start + MAX_ATOMIC_BATCH]
        batch_id = NUID().next().decode()
        for i, (subject, payload, headers) in enumerate(chunk, 1):
            h = dict(headers or {})
            h["Nats-Batch-Id"] = batch_id
            h["Nats-Batch-Sequence"] = str(i)
            if i < len(chunk):
                await nc.publish(subject, payload, headers=h)
                continue
            h["Nats-Batch-Commit"] = "1"
            try:
                ack = await js.publish(subject, payload, headers=h, timeout=timeout)
            except APIError as exc:
                raise AtomicBatchRefused(str(exc)) from exc
            if ack.batch_size != len(chunk):
                raise AtomicBatchRefused(f"stored {ack.batch_size} of {len(chunk)} messages")
            # An atomic batch is stored contiguously, ending at the commit's sequence.
            seqs.extend(range(ack.seq - len(chunk) + 1, ack.seq + 1))
    return seqs


async def park_message(js: JetStreamContext, msg: Msg, reason: str, subject: str) -> None:
    """Copy a message that keeps failing to SEEDLINE_REJECTED, with its origin and reason."""
    import base64

    # Imported here: the codec (msgspec) is a sixth of `seedline status`'s start-up, which
    # reads this module for the durability check only.
    from seedline_contracts.codec import encode
    from seedline_contracts.timeline import RejectedInput
    from seedline_contracts.times import now_text

    try:
        raw, encoding = msg.data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        raw, encoding = base64.b64encode(msg.data).decode("ascii"), "base64"
    record = RejectedInput(
        reason_code="poison", message=reason, raw=raw, raw_encoding=encoding,
        received_at=now_text(), ingest_seq=msg.metadata.sequence.stream,
    )
    # One record per message and consumer, however often that consumer parks it (a batch
    # redelivered after its copy died before the ack parks it again).
    meta = msg.metadata
    origin = f"parked:{meta.stream}:{meta.consumer}:{meta.sequence.stream}"
    await publish_window(js, [(subject, encode(record), {"Nats-Msg-Id": origin})])

