"""The faults of a run, drawn from its seed alone: the same seed gives the same schedule.

A run exercises one kind of fault (the seed picks it: ``KINDS[seed % len(KINDS)]``), a few
times over, each held for a drawn span and then healed, with a quiet spell between; in some
runs every link is also slowed and lossy (``tc netem`` delay and loss where the kernel has
it). Targets are drawn from the hosts, never chosen from what the system is doing, so a
seed replays the same faults against whatever the system then does.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

NODES = ("n1", "n2", "n3")
SERVICE_HOSTS = ("a", "b")
SERVICES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway",
            "seedline-web")
RUNNER_HOSTS = ("r1", "r2")

# What each kind does while it holds; each is healed when its span ends.
KINDS = {
    "partition-node": "one nats-server node cut off from the other two (clients still reach it)",
    "majority-without-services": "the hosts split so that two nodes are on one side and every "
                                 "service copy and runner with the third node on the other",
    "isolate-service": "one host of service copies cut off from every nats-server node",
    "pause-node": "one nats-server node stopped with SIGSTOP past the heartbeat and client "
                  "timeouts, then SIGCONT",
    "pause-service": "one service copy stopped with SIGSTOP past the client timeouts",
    "kill-node": "kill -9 of one nats-server node, started again on its data",
    "lose-disk": "kill -9 of one nats-server node, started again on an emptied data folder",
    "runner-cut-mid-turn": "a runner machine cut off from every node while a turn runs on it",
    "postgres-away": "Postgres cut off from every host for 20 s",
}
SPANS = {  # seconds a fault of the kind holds: (shortest, longest)
    "partition-node": (8, 20),
    "majority-without-services": (8, 20),
    "isolate-service": (8, 20),
    "pause-node": (12, 20),
    "pause-service": (12, 20),
    "kill-node": (3, 12),
    "lose-disk": (3, 12),
    # Beyond the presence TTL (30 s) in some: the platform then takes the machine for gone.
    "runner-cut-mid-turn": (10, 40),
    "postgres-away": (20, 20),
}
FIRST_AT, QUIET = 6.0, (5.0, 10.0)


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str  # a host, a node, or "<service>@<host>"
    at: float  # seconds after the workload started
    lasts: float

    def describe(self) -> str:
        return f"{self.kind} {self.target} at {self.at:.1f} s for {self.lasts:.1f} s"


@dataclass(frozen=True)
class Links:
    delay_ms: int
    loss_percent: float


@dataclass(frozen=True)
class Plan:
    seed: int
    kind: str
    faults: tuple[Fault, ...]
    links: Links | None

    def describe(self) -> str:
        links = (f"; every link {self.links.delay_ms} ms slower and {self.links.loss_percent}% "
                 f"lossy" if self.links else "")
        return f"{self.kind}: " + "; ".join(f.describe() for f in self.faults) + links


def kind_of(seed: int) -> str:
    return list(KINDS)[seed % len(KINDS)]


def _target(kind: str, draw: random.Random) -> str:
    if kind in ("partition-node", "pause-node", "kill-node", "lose-disk",
                "majority-without-services"):
        return draw.choice(NODES)  # for the split: the node that stays with the services
    if kind == "isolate-service":
        return draw.choice(SERVICE_HOSTS)
    if kind == "pause-service":
        return f"{draw.choice(SERVICES)}@{draw.choice(SERVICE_HOSTS)}"
    if kind == "runner-cut-mid-turn":
        return draw.choice(RUNNER_HOSTS)
    return "db"


def plan(seed: int, seconds: float, kind: str | None = None) -> Plan:
    """The schedule of a run of ``seconds``: faults until the last few seconds."""
    draw = random.Random(seed)
    kind = kind or kind_of(seed)
    links = Links(draw.choice((5, 20, 50)), draw.choice((0.5, 1.0, 2.0))) \
        if draw.random() < 1 / 3 else None
    faults: list[Fault] = []
    at = FIRST_AT
    shortest, longest = SPANS[kind]
    while True:
        lasts = round(draw.uniform(shortest, longest), 1)
        if faults and at + lasts > seconds - 3:
            break
        lasts = min(lasts, max(3.0, seconds - at - 3))  # a short run's one fault fits
        faults.append(Fault(kind, _target(kind, draw), round(at, 1), lasts))
        at += faults[-1].lasts + draw.uniform(*QUIET)
    return Plan(seed, kind, tuple(faults), links)
