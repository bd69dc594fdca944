"""The runner-gateway's routing table: what it answers, consumes, runs and may send."""

from __future__ import annotations

from seedline_contracts import subjects
from seedline_contracts.events import SeedComposed, SessionEvent
from seedline_contracts.timeline import TimelineEntry
from seedline_platform.routing import Kind, Route
from seedline_platform.settings import Settings

LAUNCH = "seedline.runner.{node}.launch"
TURN = "seedline.runner.{node}.turn"
STOP = "seedline.runner.{node}.stop"
NOTIFY = "seedline.notify.{instance}"


def routes(settings: Settings) -> tuple[Route, ...]:
    return (
        Route(Kind.EVENT, subjects.session_event_filter("seed_composed"), "launcher.handle",
              stream=subjects.SESSIONS_STREAM, durable="runner-gateway-launch",
              message=SeedComposed,
              park=subjects.REJECTED_SESSIONS,
              # A launch waits for its machine, and a relocation for two.
              ack_wait=settings.launch_timeout_seconds * 3 + 30,
              description="Launches each composed open on its machine (CONTRACT.md 6).",
              sends=(STOP, LAUNCH, "opened", "relocated", "open_failed", "stopped", NOTIFY)),
        Route(Kind.MESSAGE, "seedline.runner.*.events", "api.on_runner_event",
              description="engine_bound, resume_lost and exited from machines (6).",
              sends=("engine_bound", "resume_lost", "stopped", NOTIFY)),
        Route(Kind.REQUEST, subjects.API_SESSIONS_STOP, "api.stop",
              description="Stop a live conversation (CONTRACT.md 4, 4.1).",
              sends=(STOP, "stopped")),
        Route(Kind.REQUEST, subjects.API_SESSIONS_LIST, "api.list_live",
              description="The conversations live now, optionally of one instance."),
        Route(Kind.BATCH, subjects.SESSION_EVENTS_ALL, "apply_sessions",
              stream=subjects.SESSIONS_STREAM, durable="runner-gateway-sessions",
              park=subjects.REJECTED_SESSIONS, idempotent=True, message=SessionEvent,
              description="Folds each conversation's lifecycle: what runs where (4.1)."),
        Route(Kind.BATCH, subjects.TIMELINE_ALL, "follower.handle",
              stream=subjects.TIMELINE_STREAM, durable="runner-gateway-timeline",
              park=subjects.REJECTED_TIMELINE, message=TimelineEntry,
              description="A person's message: a turn of the live conversation, or a wake (4).",
              sends=(TURN, "wake_requested", NOTIFY)),
        Route(Kind.LOOP, f"KV {subjects.RUNNERS_BUCKET}", "presence.watch",
              description="Follows the machines' presence as they put it (6).",
              sends=("stopped", NOTIFY)),
        Route(Kind.LOOP, "every few seconds", "presence.run_sweeps",
              description="Declares offline a machine whose presence expired (6).",
              sends=("stopped", NOTIFY)),
        Route(Kind.LOOP, "every SEEDLINE_IDLE_SWEEP_SECONDS", "reaper.run",
              description="Stops conversations idle longer than SEEDLINE_IDLE_STOP_MINUTES.",
              sends=(STOP, "reaped", NOTIFY)),
    )
