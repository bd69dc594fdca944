"""Saving a conversation's checkout when it stops, and applying what a launch carries before
the engine starts (CONTRACT.md 6): the one place the runner does either."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import structlog

from seedline_contracts import subjects
from seedline_contracts.runner import LaunchRequest
from seedline_contracts.worktrees import (
    AppliedTree,
    Carry,
    EngineRecord,
    LeftOut,
    SavedTree,
    Snapshot,
)

from .apply import apply_tree
from .git import GitError, is_checkout
from .records import keeper_of, localised, portable, write_record
from .sentences import applied_sentence
from .snapshot import Limits, take
from .store import SavedObjects

log = structlog.get_logger(__name__)

RECORD = "-record"


@dataclass(frozen=True)
class Arrival:
    worktree: AppliedTree | None
    record_placed: bool


class Carrier:
    def __init__(self, objects: SavedObjects, limits: Limits = Limits()) -> None:
        self._objects = objects
        self._limits = limits

    async def save(self, request: LaunchRequest, checkout: Path | None, engine: object,
                   engine_session_id: str | None, n: int) -> SavedTree | None:
        """What was saved of the conversation's checkout (None: it ran in none). Without a
        key from the platform nothing is stored; what was there is still said."""
        if not await is_checkout(checkout):
            return None
        try:
            taken = await take(checkout, self._limits)
        except (GitError, OSError) as error:
            log.warning("worktree_not_saved", session_id=request.session_id, error=str(error))
            return None
        key = request.seal
        snapshot = None
        if taken.archive is not None and key is not None:
            name = subjects.worktree_object(request.instance_id, request.session_id, n)
            await self._objects.put(name, key, taken.archive)
            snapshot = Snapshot(object=name, files=taken.files, bytes=len(taken.archive),
                                sha256=hashlib.sha256(taken.archive).hexdigest())
        record = None
        if key is not None and engine_session_id:
            record = await self._save_record(request, checkout, engine, engine_session_id, n)
        return SavedTree(
            base_commit=taken.base_commit, branch=taken.branch, clean=taken.clean,
            snapshot=snapshot, left_out=[LeftOut(path, why) for path, why in taken.left_out],
            over_limit=taken.over_limit, engine_record=record,
            key_version=key.version if key is not None and (snapshot or record) else None)

    async def _save_record(self, request: LaunchRequest, checkout: Path, engine: object,
                           engine_session_id: str, n: int) -> EngineRecord | None:
        keeper = keeper_of(engine)
        found = keeper.find(engine_session_id, checkout) if keeper is not None else None
        if found is None:
            return None
        try:
            text = found.path.read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            return None
        header = json.dumps({"relative": found.relative}).encode()
        body = header + b"\n" + portable(text, checkout).encode("utf-8", "surrogateescape")
        name = subjects.worktree_object(request.instance_id, request.session_id, n, RECORD)
        await self._objects.put(name, request.seal, body)
        return EngineRecord(object=name, engine=request.engine,
                            sha256=hashlib.sha256(body).hexdigest(), bytes=len(body),
                            engine_session_id=engine_session_id)

    async def arrive(self, carry: Carry, request: LaunchRequest, checkout: Path | None,
                     engine: object) -> Arrival:
        """The carried tree applied (or why not) and the engine's record placed, before the
        engine starts."""
        applied = None
        if carry.worktree is not None:
            archive = await self._open(carry, carry.worktree.snapshot.object
                                       if carry.worktree.snapshot else None)
            outcome = await apply_tree(checkout, carry.worktree, archive)
            applied = AppliedTree(
                applied=outcome.applied, files=outcome.files, bytes=outcome.bytes,
                reason=outcome.reason,
                sentence=applied_sentence(outcome, carry.worktree, carry.from_label,
                                          request.repo))
            log.info("worktree_arrived", session_id=request.session_id,
                     applied=outcome.applied, reason=outcome.reason, files=outcome.files)
        return Arrival(applied, await self._place(carry, checkout, engine))

    async def _place(self, carry: Carry, checkout: Path | None, engine: object) -> bool:
        record, keeper = carry.engine_record, keeper_of(engine)
        if record is None or keeper is None or checkout is None:
            return False
        body = await self._open(carry, record.object)
        if body is None or hashlib.sha256(body).hexdigest() != record.sha256:
            return False
        header, _, text = body.partition(b"\n")
        try:
            target = keeper.place(json.loads(header)["relative"], checkout)
        except (ValueError, KeyError, TypeError):
            return False
        if target is None:
            return False
        write_record(target, localised(text.decode("utf-8", "surrogateescape"), checkout))
        return True

    async def _open(self, carry: Carry, name: str | None) -> bytes | None:
        if name is None or carry.key is None:
            return None
        try:
            return await self._objects.get(name, carry.key)
        except Exception as error:  # not there, not opening, or NATS away: not readable
            log.warning("saved_object_unreadable", name=name, error=str(error))
            return None
