"""The continuity-resolver's object graph, built the same way in the service and in tests:
real adapters there, fakes here, given as `Ports`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from seedline_contracts.ids import new_session_id
from seedline_contracts.instances import Erasure
from seedline_contracts.times import utc_now
from seedline_core import decision as core
from seedline_platform.erasure import ErasureFollower, Forgotten
from seedline_platform.observability import ServiceMetrics
from seedline_platform.publishing import Publisher
from seedline_platform.sealing import Sealer, unsealed
from seedline_platform.settings import Settings
from seedline_timeline_view import TimelineView

from .answers import Answers
from .catch_up import CatchUp, StreamEnds
from .machines import MachineDirectory, StaticDirectory
from .opening import Opener
from .opening_api import OpeningApi
from .pending import PendingOpens
from .projection import ResolverProjection
from .repository import ConversationRepository

NAME = "continuity-resolver"


async def _no_stop(session_id: str, reason: str) -> None:
    return None


@dataclass
class Ports:
    """What the continuity-resolver talks to."""

    repo: ConversationRepository
    view: TimelineView
    publisher: Publisher
    # Whether a conversation's open decision is in SEEDLINE_SESSIONS: an open asked again
    # whose first ask recorded none (the streams were away) is decided then.
    decision_recorded: Callable[[str], Awaitable[bool]]
    machines: MachineDirectory = field(default_factory=StaticDirectory)
    # Where each stream ends now (a decision reads up to there); None: its projection
    # is fed by hand (tests).
    stream_ends: StreamEnds | None = None
    # Where the lifecycle fold's consumer stands when it has nothing left, None when it has
    # something (a stream may end in events it does not take: consumer_drained); not given
    # in the unit tests, which fold by hand.
    sessions_drained: Callable[[], Awaitable[int | None]] | None = None
    sealer: Sealer = field(default_factory=unsealed)
    metrics: ServiceMetrics = field(default_factory=lambda: ServiceMetrics(NAME))
    clock: Callable[[], datetime] = utc_now
    new_id: Callable[[], str] = new_session_id
    # Stops a live conversation (the gateway's sessions.stop): a relocation stops it first.
    stop: Callable[[str, str], Awaitable[None]] = _no_stop
    # Erasures followed (a JetStream context; none in tests) and what each drops here.
    js: object | None = None
    drop_forgotten: Callable[[Erasure], Awaitable[None]] | None = None


@dataclass
class Parts:
    projection: ResolverProjection
    pending: PendingOpens
    catch_up: CatchUp
    opener: Opener
    opening: OpeningApi
    forgetting: ErasureFollower


def bootstrap(settings: Settings, ports: Ports) -> Parts:
    forgotten = Forgotten()
    projection = ResolverProjection(ports.repo, ports.sessions_drained, forgotten)
    pending = PendingOpens()
    catch_up = CatchUp(ports.repo, ports.view, ports.stream_ends,
                       projection.reached if ports.stream_ends is not None else None)
    opener = Opener(
        ports, catch_up=catch_up,
        answers=Answers(ports.repo, pending, settings.open_timeout_seconds),
        decision=core.DecisionSettings(resume_window=settings.resume_window,
                                       stateless_engines=settings.stateless_engines),
        forgotten=forgotten,
    )
    return Parts(projection=projection, pending=pending, catch_up=catch_up, opener=opener,
                 opening=OpeningApi(opener),
                 forgetting=ErasureFollower(ports.js, ports.drop_forgotten,
                                            settings.stream_replicas, forgotten))
