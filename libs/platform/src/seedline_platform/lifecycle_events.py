"""From the events of SEEDLINE_SESSIONS to the pure lifecycle of CONTRACT.md 4.1.

The resolver and the gateway both fold the stream through ``seedline_core.lifecycle``;
this is the one reading of which event means what.
"""

from __future__ import annotations

from seedline_contracts import events as ev
from seedline_core import lifecycle as lc


def lifecycle_event(event: ev.SessionEvent, seq: int) -> lc.Event | None:
    """The lifecycle meaning of a recorded event (None: it changes no state)."""
    if isinstance(event, ev.OpenRequested):
        return lc.Requested(event.session_id, event.instance_id, event.repo, seq,
                            event.node_id, event.engine)
    if isinstance(event, ev.WakeRequested):
        return lc.Requested(event.session_id, event.instance_id, event.repo, seq,
                            event.node_id, event.engine)
    if isinstance(event, ev.Opened):
        return lc.Opened(event.plan.node_id, event.plan.engine, event.engine_session_id,
                         event.at)
    if isinstance(event, ev.OpenFailed):
        return lc.OpenFailed()
    if isinstance(event, ev.Relocated):
        return lc.Relocated(event.to_node_id, event.engine, event.engine_session_id, event.at)
    if isinstance(event, (ev.Stopped, ev.Reaped)):
        return lc.Stopped(event.reason if isinstance(event, ev.Stopped) else "idle")
    if isinstance(event, ev.EngineBound):
        return lc.EngineBound(event.node_id, event.engine_session_id)
    return None
