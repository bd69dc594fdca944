"""What a runner machine speaks (CONTRACT.md section 6)."""

from __future__ import annotations

from typing import Literal

import msgspec

from . import subjects
from .channel import Api, Channel, MachineCall

from .worktrees import AppliedTree, Carry, SavedTree, SealKey

# Protocol 2 (CONTRACT.md 6): presence carries `live`, the conversations the
# machine hosts now; a protocol-1 presence has none and is never reconciled.
# Protocol 3: the machine takes a launch's `carry` (1.3), and its presence says which
# release of the runner it runs (`version`).
PROTOCOL_VERSION = 3
CARRY_PROTOCOL = 3
# The first release of the runner (the seedline-runner distribution) that speaks each
# protocol: what a launch refused for an older machine names to install.
FIRST_RELEASE = {1: "0.1.0", 2: "0.1.0", 3: "0.2.0"}


class RunnerPresence(msgspec.Struct):
    node_id: str
    label: str
    engines: list[str]
    protocol: int = PROTOCOL_VERSION
    seed_capable: bool = True
    stateless_engines: list[str] = []
    # None: a protocol-1 machine that does not report what it hosts.
    live: list[str] | None = None
    # The instances this machine serves; empty serves every instance (CONTRACT.md 4.1).
    instances: list[str] = []
    # How the machine holds its engines' processes ("cgroup", "subreaper",
    # "process-group"); None from a runner that does not say.
    containment: str | None = None
    # The release of the runner software the machine runs (e.g. "0.2.0"); None from a
    # runner older than protocol 3.
    version: str | None = None


class ResumeExpect(msgspec.Struct):
    """The newest turn the engine was given or produced in this conversation.

    A runner reports a resume only when the engine's own record holds it
    (CONTRACT.md 3.2 and 6): `seq` is that entry's timeline seq, `kind` its kind
    (`chat_user` or `chat_assistant`), `excerpt` its first 200 characters.
    """

    seq: int
    kind: str
    excerpt: str


class LaunchResume(msgspec.Struct):
    engine_session_id: str
    # None: this conversation has no chat entry yet (nothing to prove beyond the id).
    expect: ResumeExpect | None = None


class Seed(msgspec.Struct):
    text: str
    sha256: str


class LaunchRequest(msgspec.Struct):
    session_id: str
    instance_id: str
    repo: str
    engine: str
    resume: LaunchResume | None
    seed: Seed | None
    instruction: str | None
    # The repo's fencing generation of this launch: the SEEDLINE_SESSIONS seq of the
    # decision it carries out. A machine refuses a launch older than one it has taken for
    # the same (instance, repo), and ends its older conversations of the repo first.
    fence: int | None = None
    # The repo's previous conversation stopped on another machine: its working tree and
    # engine record, applied and placed before the engine starts (CONTRACT.md 6).
    carry: Carry | None = None
    # Seals what this machine saves of the conversation when it stops.
    seal: SealKey | None = None


def protocol_needed(request: LaunchRequest) -> int:
    """The oldest runner protocol that can carry out this launch as it is asked."""
    return CARRY_PROTOCOL if request.carry is not None else 1


class LaunchReply(msgspec.Struct):
    accepted: bool
    # Optional on the wire: a runner that omits them reports nothing, which the
    # platform reads as "not resumed" and "not seeded" (CONTRACT.md 3.2).
    resumed_conversation: bool | None = None
    seeded: bool | None = None
    engine_session_id: str | None = None
    reason: str | None = None
    # What it did with a carried tree and record (CONTRACT.md 6).
    worktree: AppliedTree | None = None
    record_placed: bool | None = None
    # `seeded` with no instruction to give it with: the brief waits for the first message,
    # and the machine reports `brief_given` once the engine has answered a turn with it.
    brief_held: bool | None = None


class TurnRequest(msgspec.Struct):
    session_id: str
    seq: int
    content: str


class TurnReply(msgspec.Struct):
    accepted: bool
    reason: str | None = None


class RunnerStopRequest(msgspec.Struct):
    session_id: str
    reason: str


class RunnerStopReply(msgspec.Struct):
    stopped: bool
    reason: str | None = None
    # What was saved of the conversation's checkout (null: it ran in none).
    worktree: SavedTree | None = None


class RunnerEvent(msgspec.Struct):
    # resume_lost: the engine refused a resume after the launch reply said it
    # resumed; the brief goes with the next message. brief_given: the engine answered the
    # first turn of a launch whose reply said `brief_held`; `brief_sha256` names the brief.
    type: Literal["engine_bound", "exited", "resume_lost", "brief_given"]
    session_id: str
    at: str
    engine_session_id: str | None = None
    reason: str | None = None
    brief_sha256: str | None = None
    # `exited`: what was saved of the conversation's checkout as it stopped, whatever
    # stopped it (the machine itself, shutting down, included).
    worktree: SavedTree | None = None


class MachineRemoveRequest(msgspec.Struct, forbid_unknown_fields=False):
    """seedline.api.machines.remove: an operator takes a machine away; only an operator's
    NATS user may send it."""

    node_id: str
    # Who asked, as the operator's tool names them (the CLI sends the login name).
    by: str | None = None


class MachineRemoveReply(msgspec.Struct):
    # The conversations that were live on the machine and are now stopped.
    stopped: list[str]
    ok: bool = True


# -- its channels (seedline_contracts.channels gathers them) ----------------------

RUNNER_LAUNCH = MachineCall(
    "runnerLaunch", "seedline.runner.{node}.launch", (LaunchRequest,),
    "The gateway asks a machine to launch an engine (6).", reply=LaunchReply)

RUNNER_TURN = MachineCall(
    "runnerTurn", "seedline.runner.{node}.turn", (TurnRequest,),
    "A person's message for a live conversation; at least once (6).", reply=TurnReply)

RUNNER_STOP = MachineCall(
    "runnerStop", "seedline.runner.{node}.stop", (RunnerStopRequest,),
    "The gateway asks a machine to stop a conversation (6).", reply=RunnerStopReply)

RUNNER_EVENTS = Channel(
    "runnerEvents", "seedline.runner.{node}.events", (RunnerEvent,),
    "A machine reports engine_bound, resume_lost, brief_given and exited (6).")

PRESENCE = Channel(
    "runnerPresence", f"$KV.{subjects.RUNNERS_BUCKET}.{{presence_key}}",
    (RunnerPresence,),
    f"KV bucket {subjects.RUNNERS_BUCKET} (TTL {subjects.RUNNERS_TTL_SECONDS} s): a machine "
    f"puts its presence at least every {subjects.PRESENCE_INTERVAL_SECONDS} s; a missing key "
    "means offline (6).")

MACHINES_REMOVE = Api(
    "machinesRemove", subjects.API_MACHINES_REMOVE, (MachineRemoveRequest,),
    "An operator removes a machine: its live conversations are stopped and their people "
    "told; operators only.", reply=MachineRemoveReply, title="remove machine")
