"""A conversation that moves whole (CONTRACT.md 6, 7): the working tree and the engine's own
record, saved when the conversation stops and carried by a launch on another machine."""

from __future__ import annotations

import msgspec

# Why a carried tree was not applied (CONTRACT.md 6), each told with a sentence.
NOT_APPLIED = ("own_changes", "base_missing", "conflict", "over_limit", "no_checkout",
               "unreadable")


class Snapshot(msgspec.Struct):
    """One sealed object holding what `git status` shows against the base commit."""

    object: str
    files: int
    bytes: int
    sha256: str  # of the snapshot as saved, before it was sealed


class LeftOut(msgspec.Struct):
    path: str
    why: str


class EngineRecord(msgspec.Struct):
    """The engine's own record of the conversation (Claude Code's transcript, Codex's
    rollout), saved as one more sealed object."""

    object: str
    engine: str
    sha256: str
    bytes: int
    # The engine's own id of the conversation the record holds: the one a resume on
    # another machine names.
    engine_session_id: str | None = None


class SavedTree(msgspec.Struct):
    """A stop reply's `worktree`, recorded as `worktree_saved`."""

    base_commit: str
    branch: str | None
    clean: bool
    snapshot: Snapshot | None
    left_out: list[LeftOut]
    over_limit: bool
    engine_record: EngineRecord | None
    # Which version of the instance's key sealed its objects (None: nothing stored).
    key_version: int | None = None


class AppliedTree(msgspec.Struct):
    """A launch reply's `worktree`: what the machine did with the tree it was carried."""

    applied: bool
    files: int
    bytes: int
    reason: str | None  # one of NOT_APPLIED when not applied
    # The machine's sentence about it, the same line it adds after the brief.
    sentence: str = ""


class SealKey(msgspec.Struct):
    """A key of one conversation's saved objects, derived from its instance's key: the
    machine seals and opens them with it and never reads the instance's key ring."""

    version: int
    key: str  # standard base64 of 32 bytes


class Carry(msgspec.Struct):
    """A launch's `carry`: the repo's previous conversation stopped on another machine."""

    from_node: str
    from_label: str
    worktree: SavedTree | None
    engine_record: EngineRecord | None
    # Opens the carried objects (None when the platform could not give one).
    key: SealKey | None = None


class SavedWork(msgspec.Struct):
    """What a decision found saved of the repo's previous conversation (its newest
    `worktree_saved`), recorded in the launch plan: the launch carries it, and the brief
    says what came along from these bytes alone, so a replay gives the same brief."""

    session_id: str  # the conversation it was saved from
    node_id: str
    label: str
    engine: str | None
    worktree: SavedTree
