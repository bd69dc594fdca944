"""What the clients do during a run, and the history they leave (in the style of Jepsen).

- Producers append entries with idempotent ids over several instances and repos, one at a
  time (the next only once the last was acknowledged), retrying an unanswered publish with
  the same id; each records which entries were acknowledged and in what order it sent them.
- People write messages (``chat_user``, synchronous append) to hot repos: a turn for the
  repo's live conversation, or a wake.
- Openers open the hot repos on either machine with a ``request_id`` each, and relocate and
  stop the newest conversation there, all racing one another; every request and every reply
  (or its absence) is logged. An open that was not answered, or answered ``timeout``, is
  asked again with its ``request_id`` until it is answered.
- A sampler reads each machine's presence (what it says it hosts) all through the run.

Everything goes into ``History``; nothing here decides what a fault does.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field

import nats
import nats.errors
from nats.js.errors import KeyDeletedError, KeyNotFoundError, NotFoundError

from seedline_contracts import subjects

MACHINES = ("m1", "m2")
REQUEST_TIMEOUT = 35.0  # past the open timeout (30 s): a slow open still answers
PUBLISH_TIMEOUT = 5.0


@dataclass
class History:
    """Everything the clients did and saw, with times (seconds since the run began)."""

    began: float = field(default_factory=time.monotonic)
    wall: float = field(default_factory=time.time)  # the wall clock when the run began
    ops: list[dict] = field(default_factory=list)
    acked: dict[str, dict] = field(default_factory=dict)  # entry_id -> how it was acknowledged
    sent: dict[str, list[str]] = field(default_factory=dict)  # producer -> entry ids in order
    opens: dict[str, dict] = field(default_factory=dict)  # request_id -> request and replies
    # What both machines' presence said, read one after the other: (time, {node: live}),
    # kept when it changed.
    presence: list[tuple[float, dict[str, tuple[str, ...]]]] = field(default_factory=list)
    # The machines' own reports that a conversation ended there: (time, node, session_id).
    exited: list[tuple[float, str, str]] = field(default_factory=list)

    def now(self) -> float:
        return round(time.monotonic() - self.began, 3)

    def op(self, what: str, /, **fields) -> dict:
        record = {"t": self.now(), "op": what, **fields}
        self.ops.append(record)
        return record

    def dump(self, path) -> None:
        with open(path, "w") as out:
            for record in self.ops:
                out.write(json.dumps(record, default=str) + "\n")
            for t, hosted in self.presence:
                out.write(json.dumps({"t": t, "op": "presence", "hosted": hosted}) + "\n")
            for t, node, session_id in self.exited:
                out.write(json.dumps({"t": t, "op": "exited", "node": node,
                                      "session_id": session_id}) + "\n")


@dataclass(frozen=True)
class World:
    """The names a run's clients use: instances, repos and which of them are hot."""

    token: str
    instances: tuple[str, ...]
    cold_repos: tuple[str, ...] = ("apps/cold-1", "apps/cold-2", "apps/cold-3")
    hot_repos: tuple[str, ...] = ("apps/hot-1", "apps/hot-2")
    probe_instance: str = ""

    @classmethod
    def named(cls, token: str) -> "World":
        return cls(token, (f"i1-{token}", f"i2-{token}"), probe_instance=f"probe-{token}")

    @property
    def hot(self) -> list[tuple[str, str]]:
        return [(i, r) for i in self.instances for r in self.hot_repos]


async def connect(urls: list[str], name: str):
    # Pings every 2 s, gone after 3 unanswered: a connection to a host that a partition
    # hides is dropped and another server tried, as the services do.
    return await nats.connect(servers=urls, name=name, max_reconnect_attempts=-1,
                              reconnect_time_wait=0.5, connect_timeout=3, ping_interval=2,
                              max_outstanding_pings=3, error_cb=_quiet,
                              disconnected_cb=_quiet, reconnected_cb=_quiet, closed_cb=_quiet)


async def _quiet(*_args) -> None:
    pass


class Workload:
    def __init__(self, urls: list[str], world: World, history: History, seed: int,
                 producers: int = 3, rate: float = 15.0) -> None:
        self.urls, self.world, self.h = urls, world, history
        self.draw = random.Random(seed ^ 0x5EED)
        self.producers, self.rate = producers, rate
        self.stopping = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.conns: list = []
        # The newest conversation each hot repo was opened or woken with, as replies said.
        self.newest: dict[tuple[str, str], tuple[str, str]] = {}
        self.nc = None

    async def start(self) -> None:
        self.nc = await connect(self.urls, "workload")
        self.conns.append(self.nc)
        for k in range(self.producers):
            nc = await connect(self.urls, f"producer-{k}")
            self.conns.append(nc)
            self.tasks.append(asyncio.create_task(self._produce(nc, k)))
        for k in range(2):
            self.tasks.append(asyncio.create_task(self._open_and_move(k)))
        self.tasks.append(asyncio.create_task(self._people()))
        self.tasks.append(asyncio.create_task(self._sample_presence()))
        await self.nc.subscribe("seedline.runner.*.events", cb=self._on_runner_event)

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def close(self) -> None:
        for nc in self.conns:
            try:
                await nc.close()
            except Exception:
                pass

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stopping.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    # -- producers ----------------------------------------------------------------------

    async def _produce(self, nc, k: int) -> None:
        js = nc.jetstream()
        producer = f"p{k}"
        sent = self.h.sent.setdefault(producer, [])
        n = 0
        while not self.stopping.is_set():
            n += 1
            instance = self.world.instances[n % len(self.world.instances)]
            repos = self.world.cold_repos + self.world.hot_repos
            entry = {"entry_id": f"{producer}-{self.world.token}-{n:06d}",
                     "instance_id": instance, "repo": repos[n % len(repos)],
                     "session_id": f"{producer}-s{n % 3}",
                     "kind": ("terminal", "command", "chat_assistant")[n % 3],
                     "content": f"entry {n} of producer {producer}"}
            sent.append(entry["entry_id"])
            body = json.dumps(entry).encode()
            tries = 0
            while True:  # the same id until acknowledged: one entry however often sent
                tries += 1
                try:
                    ack = await js.publish(subjects.INGEST_TIMELINE, body, timeout=PUBLISH_TIMEOUT,
                                           headers={"Nats-Msg-Id": entry["entry_id"]})
                except Exception as exc:
                    if self.stopping.is_set():
                        self.h.op("append_unknown", entry_id=entry["entry_id"],
                                  producer=producer, error=type(exc).__name__)
                        return
                    await asyncio.sleep(0.2)
                    continue
                self.h.acked[entry["entry_id"]] = {"producer": producer, "n": n,
                                                   "instance": instance, "ingest_seq": ack.seq,
                                                   "t": self.h.now(), "tries": tries}
                break
            await self._pause(1 / self.rate)

    # -- people's messages --------------------------------------------------------------

    async def _people(self) -> None:
        n = 0
        while not self.stopping.is_set():
            n += 1
            instance, repo = self.draw.choice(self.world.hot)
            await self.message(instance, repo, f"message {n}", f"m-{self.world.token}-{n}")
            await self._pause(self.draw.uniform(0.5, 2.0))

    async def message(self, instance: str, repo: str, text: str, entry_id: str) -> dict | None:
        """A person's message now (synchronous append), asked again until answered."""
        entry = {"entry_id": entry_id, "instance_id": instance, "repo": repo,
                 "session_id": f"person-{self.world.token}", "kind": "chat_user",
                 "content": text, "at": _now_text()}
        record = self.h.op("message", entry_id=entry_id, instance=instance, repo=repo)
        for _ in range(10):
            try:
                reply = await self.request(subjects.API_TIMELINE_APPEND, entry, 10.0)
            except Exception as exc:
                record.setdefault("errors", []).append(type(exc).__name__)
                if self.stopping.is_set():
                    return None
                await asyncio.sleep(0.5)
                continue
            record["reply"], record["t_reply"] = reply, self.h.now()
            if reply.get("ok"):
                self.h.acked[entry_id] = {"producer": None, "instance": instance,
                                          "t": self.h.now(), "seq": reply["seq"]}
                return reply
            if reply.get("error", {}).get("code") != "unavailable" or self.stopping.is_set():
                return reply
            await asyncio.sleep(0.5)
        return None

    # -- opens, relocations, stops --------------------------------------------------------

    async def _open_and_move(self, k: int) -> None:
        n = 0
        while not self.stopping.is_set():
            n += 1
            instance, repo = self.draw.choice(self.world.hot)
            roll = self.draw.random()
            if roll < 0.6 or (instance, repo) not in self.newest:
                await self.open(instance, repo, self.draw.choice(MACHINES),
                                f"o{k}-{self.world.token}-{n}")
            elif roll < 0.85:
                session_id, node = self.newest[(instance, repo)]
                await self.relocate(session_id, next(m for m in MACHINES if m != node))
            else:
                await self.stop_conversation(self.newest[(instance, repo)][0])
            await self._pause(self.draw.uniform(0.2, 1.5))

    async def open(self, instance: str, repo: str, node: str, request_id: str,
                   stopping: asyncio.Event | None = None) -> dict | None:
        """Open and ask again by request_id until a reply other than `timeout` comes."""
        stopping = stopping or self.stopping
        body = {"request_id": request_id, "instance_id": instance, "repo": repo,
                "engine": "scripted", "node_id": node}
        record = self.h.opens.setdefault(request_id, {"request": body, "t": self.h.now(),
                                                      "attempts": []})
        while True:
            reply = await self._ask_open(record)
            if reply is not None and _final(reply):
                if reply.get("ok"):
                    self.newest[(instance, repo)] = (reply["session_id"], reply["node_id"])
                return reply
            if stopping.is_set():
                return None  # asked again after the heal (History.opens keeps it)
            await asyncio.sleep(1.0)

    async def _ask_open(self, record: dict) -> dict | None:
        attempt = {"t": self.h.now()}
        record["attempts"].append(attempt)
        try:
            reply = await self.request(subjects.API_SESSIONS_OPEN, record["request"],
                                       REQUEST_TIMEOUT)
        except Exception as exc:
            attempt["error"] = type(exc).__name__
            return None
        attempt["reply"], attempt["t_reply"] = _short(reply), self.h.now()
        if _final(reply):
            record["final"] = attempt["reply"]
        return reply

    async def ask_again(self, request_id: str) -> dict | None:
        """After the heal: the same request_id once more (one ask, or its timeout)."""
        record = self.h.opens[request_id]
        return await self._ask_open(record)

    async def relocate(self, session_id: str, node: str) -> None:
        record = self.h.op("relocate", session_id=session_id, node=node)
        try:
            reply = await self.request(subjects.API_SESSIONS_RELOCATE,
                                       {"session_id": session_id, "node_id": node},
                                       REQUEST_TIMEOUT)
        except Exception as exc:
            record["error"] = type(exc).__name__
            return
        record["reply"], record["t_reply"] = _short(reply), self.h.now()

    async def stop_conversation(self, session_id: str) -> None:
        record = self.h.op("stop", session_id=session_id)
        try:
            reply = await self.request(subjects.API_SESSIONS_STOP,
                                       {"session_id": session_id, "reason": "requested"}, 15.0)
        except Exception as exc:
            record["error"] = type(exc).__name__
            return
        record["reply"], record["t_reply"] = reply, self.h.now()

    async def request(self, subject: str, body: dict, timeout: float) -> dict:
        msg = await self.nc.request(subject, json.dumps(body).encode(), timeout=timeout)
        return json.loads(msg.data)

    # -- what the machines say ------------------------------------------------------------

    async def _on_runner_event(self, msg) -> None:
        try:
            event = json.loads(msg.data)
        except ValueError:
            return
        if event.get("type") == "exited":
            self.h.exited.append((self.h.now(), msg.subject.split(".")[2], event["session_id"]))

    async def _sample_presence(self) -> None:
        kv = None
        last: dict[str, tuple[str, ...]] = {}
        while not self.stopping.is_set():
            try:
                kv = kv or await self.nc.jetstream().key_value(subjects.RUNNERS_BUCKET)
                hosted = await _presence_at_once(kv)
                if hosted is not None and hosted != last:
                    last = hosted
                    self.h.presence.append((self.h.now(), hosted))
            except Exception:
                pass  # the bucket may be without a leader for a while: no sample
            await self._pause(0.1)


async def _presence_at_once(kv) -> dict[str, tuple[str, ...]] | None:
    """What every machine's presence said at one moment: the keys are read one after the
    other, so the first is read again at the end, and the reads count only when it had not
    changed meanwhile (a stop and a launch elsewhere between two reads would otherwise show
    a repo on both machines). None when no such moment was caught."""
    for _ in range(5):
        first = await _presence_live(kv, MACHINES[0])
        rest = [await _presence_live(kv, node) for node in MACHINES[1:]]
        if await _presence_live(kv, MACHINES[0]) == first:
            return {node: live for node, (_, live) in zip(MACHINES, [first, *rest])}
    return None


async def _presence_live(kv, node: str) -> tuple[int, tuple[str, ...]]:
    """(revision, what it hosts) of a machine's presence; (0, ()) when it has none."""
    try:
        entry = await asyncio.wait_for(kv.get(subjects.presence_key(node)), 2.0)
    except (KeyNotFoundError, KeyDeletedError, NotFoundError):
        return 0, ()
    live = tuple(sorted(json.loads(entry.value).get("live") or ())) if entry.value else ()
    return int(entry.revision or 0), live


def _final(reply: dict) -> bool:
    """A reply that ends an open: ok, or an error other than `timeout`."""
    return reply.get("ok") or reply.get("error", {}).get("code") != "timeout"


def _short(reply: dict) -> dict:
    if reply.get("ok"):
        return {k: reply.get(k) for k in ("ok", "session_id", "node_id", "outcome")}
    return {"ok": False, "error": reply.get("error")}


def _now_text() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
