"""The runner-gateway's object graph, built the same way in the service and in tests: real
adapters there, fakes here, given as `Ports`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from seedline_contracts.ids import new_session_id
from seedline_contracts.instances import Erasure
from seedline_contracts.sessions import OpenReply
from seedline_contracts.times import now_text
from seedline_platform.erasure import ErasureFollower, Forgotten
from seedline_platform.observability import ServiceMetrics
from seedline_platform.publishing import Publisher
from seedline_platform.sealing import Sealer, unsealed
from seedline_platform.settings import Settings

from .activity import NewestEntries, no_entries
from .api import GatewayApi
from .fold import LifecycleFold
from .forgetting import ForgetHere
from .launch_outcomes import LaunchOutcomes
from .launching import Launcher
from .machine_calls import Machines
from .notify import Notifier
from .presence import MachineWatcher, PresenceView
from .reaper import Reaper
from .reconcile import Reconciler
from .repo_turns import LocalRepoTurns, RepoTurns
from .resume_lost import ResumeLostRecorder
from .saved_objects import KeptInMemory, SavedObjectsKept
from .state import GatewayState
from .stopping import Stopper
from .turns import TimelineFollower

NAME = "runner-gateway"


@dataclass
class Ports:
    """What the runner-gateway talks to."""

    state: GatewayState
    machines: Machines
    publisher: Publisher
    notifier: Notifier
    # The machines' presence, given what to tell when one comes or goes.
    presence: Callable[[MachineWatcher], PresenceView]
    # Where SEEDLINE_SESSIONS ends now: a read of the fold waits up to there.
    stream_end: Callable[[], Awaitable[int]]
    # The reply an open's `opened` event recorded, or None.
    recorded_reply: Callable[[str], Awaitable[OpenReply | None]]
    repo_turns: RepoTurns = field(default_factory=LocalRepoTurns)
    # Each conversation's newest timeline entry (an engine's output is activity too).
    newest_entries: NewestEntries = no_entries
    # Trims the saved checkouts as new saves are recorded.
    saved_objects: SavedObjectsKept = field(default_factory=KeptInMemory)
    sealer: Sealer = field(default_factory=unsealed)
    metrics: ServiceMetrics = field(default_factory=lambda: ServiceMetrics(NAME))
    clock: Callable[[], str] = now_text
    new_id: Callable[[], str] = new_session_id
    # Erasures followed (a JetStream context; none in tests) and what each drops here.
    js: object | None = None
    drop_forgotten: Callable[[Erasure], Awaitable[None]] | None = None
    # Where the fold's consumer stands when it has nothing left, None when it has something
    # (SEEDLINE_SESSIONS may end in events it does not take: consumer_drained); not given
    # in the unit tests, which fold by hand.
    fold_drained: Callable[[], Awaitable[int | None]] | None = None


@dataclass
class Parts:
    fold: LifecycleFold
    stopper: Stopper
    reconciler: Reconciler
    presence: PresenceView
    outcomes: LaunchOutcomes
    launcher: Launcher
    follower: TimelineFollower
    resume_lost: ResumeLostRecorder
    api: GatewayApi
    reaper: Reaper
    forgetting: ErasureFollower


def bootstrap(settings: Settings, ports: Ports) -> Parts:
    forgotten = Forgotten()
    fold = LifecycleFold(ports.state, ports.stream_end, ports.fold_drained, forgotten)
    stopper = Stopper(ports, ports.saved_objects)
    reconciler = Reconciler(ports.state, stopper, fold)
    presence = ports.presence(reconciler)
    outcomes = LaunchOutcomes(ports, stopper, fold.caught_up)
    resume_lost = ResumeLostRecorder(ports)
    forget_here = ForgetHere(ports.state, stopper, forgotten, fold.caught_up,
                             ports.drop_forgotten, ports.clock)
    return Parts(
        fold=fold, stopper=stopper, reconciler=reconciler, presence=presence,
        outcomes=outcomes,
        launcher=Launcher(ports, presence, stopper, reconciler, outcomes, fold.caught_up,
                          forget_here),
        follower=TimelineFollower(ports, presence, stopper, fold),
        resume_lost=resume_lost,
        api=GatewayApi(ports, stopper, resume_lost, fold),
        reaper=Reaper(ports.state, stopper, settings.idle_stop, settings.idle_sweep_seconds,
                      fold.caught_up, ports.newest_entries),
        forgetting=ErasureFollower(ports.js, forget_here, settings.stream_replicas, forgotten),
    )
