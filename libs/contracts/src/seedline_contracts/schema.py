"""JSON Schema for every public message, generated from the types themselves."""

from __future__ import annotations

from typing import Any

import msgspec

from . import errors, events, instances, runner, sessions, timeline

PUBLIC_MESSAGES: dict[str, type] = {
    "TimelineEntryIn": timeline.TimelineEntryIn,
    "TimelineEntry": timeline.TimelineEntry,
    "RejectedInput": timeline.RejectedInput,
    "AppendReply": timeline.AppendReply,
    "TimelineReadRequest": timeline.TimelineReadRequest,
    "TimelineReadReply": timeline.TimelineReadReply,
    "OpenRequest": sessions.OpenRequest,
    "OpenReply": sessions.OpenReply,
    "RelocateRequest": sessions.RelocateRequest,
    "StopRequest": sessions.StopRequest,
    "BriefGetRequest": sessions.BriefGetRequest,
    "BriefGetReply": sessions.BriefGetReply,
    "SessionsListRequest": sessions.SessionsListRequest,
    "SessionsListReply": sessions.SessionsListReply,
    "StoppedIdleNotification": sessions.StoppedIdleNotification,
    "RunnerOfflineNotification": sessions.RunnerOfflineNotification,
    "RunnerRestartedNotification": sessions.RunnerRestartedNotification,
    "NotWokenNotification": sessions.NotWokenNotification,
    "StopReply": sessions.StopReply,
    "ForgetRequest": instances.ForgetRequest,
    "ForgetReply": instances.ForgetReply,
    "ErrorReply": errors.ErrorReply,
    "RunnerPresence": runner.RunnerPresence,
    "LaunchRequest": runner.LaunchRequest,
    "LaunchReply": runner.LaunchReply,
    "TurnRequest": runner.TurnRequest,
    "TurnReply": runner.TurnReply,
    "RunnerStopRequest": runner.RunnerStopRequest,
    "RunnerStopReply": runner.RunnerStopReply,
    "RunnerEvent": runner.RunnerEvent,
    **{cls.__name__: cls for cls in events.EVENT_TYPES},
}


def json_schemas() -> dict[str, dict[str, Any]]:
    """One self-contained JSON Schema document per public message, by name."""
    out: dict[str, dict[str, Any]] = {}
    for name, kind in sorted(PUBLIC_MESSAGES.items()):
        (ref,), components = msgspec.json.schema_components([kind])
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": name,
            **components[ref["$ref"].rsplit("/", 1)[1]],
        }
        extra = {k: v for k, v in components.items() if k != name}
        if extra:
            schema["$defs"] = extra
        out[name] = schema
    return out

