"""The runner-gateway's routing table: what it answers, consumes, runs and may send."""

from __future__ import annotations

from seedline_contracts import channels, subjects
from seedline_contracts.events import (
    BriefGiven,
    EngineBound,
    OpenFailed,
    Opened,
    Reaped,
    Relocated,
    ResumeLost,
    SeedComposed,
    SessionEvent,
    Stopped,
    WakeRequested,
    WorktreeApplied,
    WorktreeSaved,
)
from seedline_contracts.runner import RunnerEvent
from seedline_contracts.timeline import TimelineEntry
from seedline_platform import erasure
from seedline_platform.lifecycle_events import LIFECYCLE_EVENTS
from seedline_platform.routing import Kind, Route
from seedline_platform.settings import Settings

from .api import GatewayApi, read_list
from .fold import FOLD_DURABLE, LifecycleFold
from .launching import Launcher
from .presence import KvPresence
from .reaper import Reaper
from .turns import TimelineFollower

# Ending a conversation records it, asks its machine and tells its people; what the
# machine saved of its checkout is recorded and the older saves trimmed (stopping.py).
ENDING = (Stopped, channels.RUNNER_STOP, channels.NOTIFY, WorktreeSaved, channels.WORKTREES)
# Machines' reports handled at once by one copy.
RUNNER_EVENT_WORKERS = 32


def routes(settings: Settings) -> tuple[Route, ...]:
    return (
        Route.event(SeedComposed, Launcher.handle, durable="runner-gateway-launch",
                    # A launch waits for its machine, and a relocation for two.
                    ack_wait=settings.launch_timeout_seconds * 3 + 30,
                    description="Launches each composed open on its machine (CONTRACT.md 6).",
                    # The machine is given keys of the instance's objects (made on first use).
                    sends=(channels.RUNNER_LAUNCH, Opened, Relocated, OpenFailed,
                           WorktreeApplied, channels.KEY_RINGS, *ENDING)),
        Route(Kind.MESSAGE, channels.RUNNER_EVENTS.filter, GatewayApi.on_runner_event,
              message=RunnerEvent,
              description="engine_bound, resume_lost, brief_given and exited from machines "
                          "(6).",
              sends=(EngineBound, ResumeLost, BriefGiven, channels.NOTIFY, WorktreeSaved,
                     channels.WORKTREES),
              # A report may wait up to api.SETTLE_SECONDS for its launch to be folded (one
              # on a conversation stopped meanwhile waits it out): one at a time, every
              # machine's reports queued behind each such wait.
              workers=RUNNER_EVENT_WORKERS),
        Route.request(channels.SESSIONS_STOP, GatewayApi.stop,
                      description="Stop a live conversation (CONTRACT.md 4, 4.1).",
                      sends=ENDING),
        Route.request(channels.MACHINES_REMOVE, GatewayApi.remove_machine,
                      description="An operator removes a machine: what runs on it is "
                                  "stopped and its people told (6).",
                      sends=ENDING),
        Route.request(channels.SESSIONS_LIST, GatewayApi.list_live, decode=read_list,
                      description="The conversations live now, optionally of one instance."),
        Route.fold(LIFECYCLE_EVENTS, LifecycleFold.apply_sessions, durable=FOLD_DURABLE,
                   message=SessionEvent,
                   description="Folds each conversation's lifecycle: what runs where (4.1)."),
        # A person's messages alone: an engine's output is activity the idle sweep reads
        # from the timeline's projection when it looks (activity.py), not a delivery here.
        Route(Kind.BATCH, subjects.TIMELINE_CHAT_USER, TimelineFollower.handle,
              stream=subjects.TIMELINE_STREAM, durable="runner-gateway-timeline",
              park=subjects.REJECTED_TIMELINE, message=TimelineEntry,
              description="A person's message: a turn of the live conversation, or a wake (4).",
              sends=(channels.RUNNER_TURN, WakeRequested, *ENDING)),
        Route(Kind.LOOP, channels.PRESENCE.filter, KvPresence.watch,
              description="Follows the machines' presence as they put it (6).",
              sends=ENDING),
        Route(Kind.LOOP, "every few seconds", KvPresence.run_sweeps,
              description="Declares offline a machine whose presence expired (6).",
              sends=ENDING),
        Route(Kind.LOOP, "every SEEDLINE_IDLE_SWEEP_SECONDS", Reaper.run,
              description="Stops conversations idle longer than SEEDLINE_IDLE_STOP_MINUTES.",
              sends=(Reaped, *ENDING)),
        erasure.route("its rows, once what still runs of it is stopped", sends=ENDING),
    )

