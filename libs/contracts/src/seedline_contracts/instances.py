"""Forgetting an instance (CONTRACT.md Conventions, Erasure)."""

from __future__ import annotations

import msgspec

from . import subjects
from .channel import Api

MAX_REASON_CHARS = 200


class ForgetRequest(msgspec.Struct, forbid_unknown_fields=False):
    """seedline.api.instances.forget: only an operator's NATS user may send it."""

    instance_id: str
    reason: str
    # Who asked, as the operator's tool names them (the CLI sends the login name).
    by: str | None = None


class ForgetReply(msgspec.Struct):
    entries: int
    ok: bool = True


class Erasure(msgspec.Struct):
    """The record that an instance was forgotten, kept in the seedline_forgotten bucket:
    who, when, why, how many entries, and the timeline seq it reached (entries up to it
    are left out of every rebuild and replay)."""

    instance_id: str
    reason: str
    by: str | None
    at: str
    entries: int
    through_seq: int


# -- its channels (seedline_contracts.channels gathers them) ----------------------

INSTANCES_FORGET = Api(
    "instancesForget", subjects.API_INSTANCES_FORGET, (ForgetRequest,),
    "Forget an instance: its key, its rows, its notices (Erasure); operators only.",
    reply=ForgetReply, title="forget")
