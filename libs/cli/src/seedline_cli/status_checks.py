"""What `seedline status` looks at, each seen from outside as a client would.

Services are found by NATS service discovery ($SRV.PING, as `nats micro ls` does).
Against services that do not answer it yet, readiness falls back to the probes
`seedline up` uses (a timeline read; a subscription seen on the monitor's connz).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.js.errors import NotFoundError

from seedline_contracts import subjects
from seedline_contracts.streams import ALL_STREAMS
from seedline_core.disk_full import MB
from seedline_platform import disk_space
from seedline_platform.natsio import check_durability
from seedline_platform.settings import Settings

from . import pg_probe, up_state
from .config import safe_url
from .monitor import subscribed
from .runners_cmd import read_presence
from .surfaces import WEB, down_text, unavailable

# The four services of the contract (CONTRACT.md, Processes); others that answer discovery
# are listed too.
SERVICES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway")
# Listed always, so a person sees whether it runs. It is down, not merely absent, once this
# system offers it: `seedline up` runs it, or it has run here (its durable consumer, the
# projection of opens in seedline_web.opens, is named with this prefix and outlives it).
WEB_CONSUMER_PREFIX = f"{WEB}-"

DISCOVERY_WAIT = 0.75
GRACE = 0.1
STATS_WAIT = 0.5


@dataclass
class ServiceState:
    name: str
    up: bool
    instances: int = 0
    version: str | None = None
    requests: int | None = None
    errors: int | None = None
    last_error: str | None = None
    checked_by: str = "service discovery"
    # Each copy's side port (/metrics, /healthz, /readyz), as its discovery info announces it.
    side_ports: list[str] = field(default_factory=list)


@dataclass
class Status:
    nats_url: str
    server_version: str | None
    max_payload: int
    sync_interval: str | None
    durability_problems: list[str]
    streams: list[dict]
    services: list[ServiceState]
    consumers: list[dict]
    machines: list[dict]
    postgres: dict
    # What `seedline up` on SEEDLINE_HOME supervises: restarts and last exit of each process.
    processes: list[dict] | None = None
    monitor_url: str = ""
    web_offered: bool = False
    # The disk of SEEDLINE_HOME, when that folder is on this machine.
    disk: dict | None = None
    problems: list[str] = field(default_factory=list)
    # Each process found down, with what a person cannot use meanwhile (surfaces.py).
    unavailable: list[dict] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": not self.problems,
            "problems": self.problems,
            "nats": {"url": self.nats_url, "up": True, "version": self.server_version,
                     "max_payload": self.max_payload},
            "durability": {"sync_interval": self.sync_interval,
                           "known": self.sync_interval is not None,
                           "monitor_url": self.monitor_url,
                           "problems": self.durability_problems},
            "postgres": self.postgres,
            "streams": self.streams,
            "services": [s.__dict__ for s in self.services],
            "consumers": self.consumers,
            "machines": self.machines,
            "processes": self.processes,
            "unavailable": self.unavailable,
            "disk": self.disk,
        }


async def gather(nc: Client, subject: str, wait: float, enough: int | None = None,
                 names: frozenset[str] = frozenset()) -> list[dict]:
    """Every JSON reply to one publish that arrives within ``wait`` seconds; or, sooner,
    ``enough`` replies, or replies from every one of ``names`` and then those that come
    within GRACE (more copies of a service answer within milliseconds of the first)."""
    replies: list[dict] = []
    done = asyncio.Event()
    heard: set[str] = set()

    async def on_reply(msg) -> None:
        try:
            body = json.loads(msg.data)
        except ValueError:
            return
        if isinstance(body, dict):
            replies.append(body)
            heard.add(str(body.get("name", "")))
        if enough is not None and len(replies) >= enough:
            done.set()
        elif names and names <= heard and not done.is_set():
            asyncio.get_running_loop().call_later(GRACE, done.set)

    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, cb=on_reply)
    try:
        await nc.publish(subject, b"", reply=inbox)
        try:
            await asyncio.wait_for(done.wait(), wait)
        except TimeoutError:
            pass
    finally:
        await sub.unsubscribe()
    return list(replies)


def side_port(ping: dict) -> str:
    """Where one copy serves /metrics, /healthz and /readyz, or why it is not known."""
    url = (ping.get("metadata") or {}).get("http_url")
    if url is None:
        return "side port not announced"
    return url or "side port not bound (see its log)"


async def services(nc: Client, monitor_url: str, expected: frozenset[str] = frozenset(SERVICES)
                   ) -> list[ServiceState]:
    """Each service as discovery finds it: the wait ends once every ``expected`` one has
    answered (the four, and the web when `seedline up` runs it), else after DISCOVERY_WAIT."""
    pings = await gather(nc, "$SRV.PING", DISCOVERY_WAIT, names=expected)
    if not pings:
        return [
            ServiceState(name, await subscribed(monitor_url, name),
                         checked_by="readiness probe (no service answers $SRV.PING)")
            for name in SERVICES
        ]
    found: list[ServiceState] = []
    others = {p.get("name", "") for p in pings} - set(SERVICES) - {WEB, ""}
    names = [*SERVICES, WEB, *sorted(others)]
    for name in names:
        mine = [p for p in pings if p.get("name") == name]
        state = ServiceState(name, bool(mine), len(mine),
                             mine[0].get("version") if mine else None,
                             side_ports=sorted(side_port(p) for p in mine))
        if mine:
            stats = await gather(nc, f"$SRV.STATS.{name}", STATS_WAIT, enough=len(mine))
            endpoints = [e for s in stats for e in s.get("endpoints") or []]
            if not endpoints:
                found.append(state)
                continue
            state.requests = sum(int(e.get("num_requests") or 0) for e in endpoints)
            state.errors = sum(int(e.get("num_errors") or 0) for e in endpoints)
            state.last_error = next(
                (str(e["last_error"]) for e in endpoints if e.get("last_error")), None
            )
        found.append(state)
    return found


async def streams_and_consumers(nc: Client) -> tuple[list[dict], list[dict]]:
    """Each stream's size, or that it is missing; each durable consumer's lag."""
    js = nc.jetstream()
    streams: list[dict] = []
    consumers: list[dict] = []
    for spec in ALL_STREAMS:
        try:
            info = await js.stream_info(spec.name)
        except NotFoundError:
            streams.append({"name": spec.name, "exists": False, "messages": None})
            continue
        streams.append({"name": spec.name, "exists": True, "messages": info.state.messages,
                        "last_seq": info.state.last_seq})
        for consumer in await js.consumers_info(spec.name):
            if not consumer.config.durable_name:
                continue
            pending, acking = consumer.num_pending or 0, consumer.num_ack_pending or 0
            consumers.append({
                "stream": spec.name, "consumer": consumer.config.durable_name,
                "num_pending": pending, "num_ack_pending": acking, "lag": pending + acking,
            })
    return streams, consumers


def _varz(monitor_url: str) -> dict | None:
    try:
        with urllib.request.urlopen(monitor_url.rstrip("/") + "/varz", timeout=2) as resp:
            return json.load(resp)
    except Exception:
        return None


def sync_interval(varz: dict | None) -> str | None:
    """'always', or the interval between fsyncs; None when the monitor cannot be read."""
    if varz is None:
        return None
    config = (varz.get("jetstream") or {}).get("config") or {}
    if config.get("sync_always"):
        return "always"
    nanos = config.get("sync_interval")
    return f"{nanos / 1e9:g} s" if isinstance(nanos, (int, float)) else "unknown"


async def machines(nc: Client, live_by_node: dict[str, list[str]]) -> list[dict]:
    try:
        rows = await read_presence(nc)
    except Exception:
        return []
    for row in rows:
        # The machine's own word (presence `live`, protocol 2), else the gateway's record.
        if row.get("live") is None:
            row["live"] = live_by_node.get(row["node_id"], [])
    return rows


async def live_by_node(nc: Client) -> dict[str, list[str]] | None:
    try:
        msg = await nc.request(subjects.API_SESSIONS_LIST, b"{}", timeout=3)
        reply = json.loads(msg.data)
    except Exception:
        return None
    found: dict[str, list[str]] = {}
    for row in reply.get("conversations") or []:
        found.setdefault(row.get("node_id", ""), []).append(row.get("session_id", ""))
    return found


async def postgres(settings: Settings, explicit: bool) -> dict:
    """Checked when its place is known: SEEDLINE_DATABASE_URL, or the embedded one of
    SEEDLINE_HOME. A CLI on another machine often cannot reach it, and that is no fault."""
    url = safe_url(settings.database_url)
    embedded = settings.home / "postgres"
    if not explicit and not embedded.is_dir():
        return {"checked": False, "url": url, "up": None}
    if not explicit:  # the socket of `seedline up`'s own Postgres: no driver needed
        up, why = await asyncio.to_thread(pg_probe.answers, embedded)
        return {"checked": True, "url": url, "up": True} if up else {
            "checked": True, "url": url, "up": False, "error": why}
    import psycopg

    try:
        conn = await psycopg.AsyncConnection.connect(settings.database_url, connect_timeout=3)
    except Exception as exc:
        return {"checked": True, "url": url, "up": False, "error": str(exc).strip()[:300]}
    await conn.close()
    return {"checked": True, "url": url, "up": True}


async def collect(nc: Client, settings: Settings, database_explicit: bool) -> Status:
    # A cluster's several monitoring addresses: the first is read for the connections.
    monitor = settings.nats_monitor_url.split(",")[0].strip()
    varz = await asyncio.to_thread(_varz, monitor)
    stream_rows, consumer_rows = await streams_and_consumers(nc)
    existing = {s["name"] for s in stream_rows if s["exists"]}
    # A missing stream is down, not weak: its own row says so.
    durability = await check_durability(nc, nc.jetstream(), settings.nats_monitor_url,
                                        [spec for spec in ALL_STREAMS if spec.name in existing])
    supervised = up_state.read(settings.home)
    expected = frozenset(SERVICES) | (
        {WEB} if any(p["name"] == WEB for p in supervised or []) else set())
    service_rows = await services(nc, monitor, expected)
    hosted = await live_by_node(nc)
    status = Status(
        nats_url=settings.nats_url,
        server_version=(nc._server_info or {}).get("version"),
        max_payload=nc.max_payload,
        sync_interval=sync_interval(varz),
        durability_problems=list(durability.problems),
        streams=stream_rows,
        services=service_rows,
        consumers=consumer_rows,
        machines=await machines(nc, hosted or {}),
        postgres=await postgres(settings, database_explicit),
        processes=supervised,
        monitor_url=settings.nats_monitor_url,
    )
    status.disk = disk(settings)
    status.web_offered = web_offered(status)
    status.unavailable = down_processes(status)
    status.problems = problems_of(status)
    return status


def disk(settings: Settings) -> dict | None:
    """How much room the disk of SEEDLINE_HOME has; None when that folder is not here."""
    home = settings.home
    if not home.is_dir():
        return None
    needed = settings.min_free_mb * MB
    full = disk_space.check(home, needed)
    if full is not None:
        return full.to_json()
    try:
        free = disk_space.free_bytes(home)
    except OSError:
        return None
    return {"full": False, "folder": str(home.resolve()), "free_bytes": free,
            "needed_bytes": needed}


def web_offered(status: Status) -> bool:
    """`seedline up` runs the web process here, or it has run on this system."""
    supervised = {p["name"] for p in status.processes or []}
    return WEB in supervised or any(
        c["consumer"].startswith(WEB_CONSUMER_PREFIX) for c in status.consumers)


def down_processes(status: Status) -> list[dict]:
    """Every process this system offers that is down now, how, and what is unavailable."""
    down: dict[str, str] = {}
    for s in status.services:
        if not s.up and (s.name in SERVICES or (s.name == WEB and status.web_offered)):
            down[s.name] = "is not running"
    for p in status.processes or []:
        if p.get("state") == "crash loop":
            down[p["name"]] = f"is in a crash loop (its log: {p['log']})"
        elif p.get("state") == "restarting" and p["name"] not in down:
            down[p["name"]] = f"is starting again after it stopped ({p.get('last_exit')})"
        elif p.get("state") != "running" and p["name"] not in down:  # waiting for room
            down[p["name"]] = f"stopped ({p.get('last_exit')}) and is {p.get('state')}"
    return [{"process": name, "how": how, "surfaces": unavailable(name)}
            for name, how in down.items()]


def problems_of(status: Status) -> list[str]:
    """What is down, or cannot be checked. Weaker durability and consumer lag are shown,
    never counted as down; durability that cannot be checked at all is a problem."""
    found = [f"stream {s['name']} does not exist" for s in status.streams if not s["exists"]]
    found += [down_text(d["process"], d["how"]) for d in status.unavailable]
    if status.sync_interval is None:
        found.append("durability is unknown: the nats-server monitoring endpoint cannot be "
                     "read, so sync_interval cannot be checked (set SEEDLINE_NATS_MONITOR_URL)")
    if status.postgres.get("checked") and not status.postgres.get("up"):
        found.append(f"Postgres at {status.postgres['url']} does not answer")
    if status.disk and status.disk["full"]:
        found.append(status.disk["message"].rstrip("."))
    return found
