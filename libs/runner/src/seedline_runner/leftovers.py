"""A runner started again ends what its previous run left, and publishes what it recorded.

Run before the presence is put (CONTRACT.md 6): every pen of this runner's key that
still holds processes, and every pen its notes name, is ended; then, for each note,
the step its engine was on is read back from the engine's own transcript and
published with the entry ids live publishing gives, so what was published before the
runner died goes in once and what the engine recorded after is added.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import structlog
from seedline_contracts.timeline import TimelineEntryIn

from .containment import Containment
from .containment.ledger import Ledger, StepNote
from .engines.base import Engine, EngineOutput
from .engines.claude import ClaudeEngine
from .engines.codex import CodexEngine
from .timeline_out import timeline_entry
from .transcript_tail import claude_step, codex_step

log = structlog.get_logger(__name__)

# Transcript files written before the step started are not its (mtime has some slack).
_MTIME_SLACK_SECONDS = 2.0


async def clean_up_previous_run(
    containment: Containment,
    ledger: Ledger | None,
    engines: Mapping[str, Engine],
    publish: Callable[[TimelineEntryIn], Awaitable[None]],
    clock: Callable[[], str],
) -> int:
    """End what a previous run left and publish its engines' tails; how many processes ended."""
    notes = ledger.notes() if ledger is not None else {}
    ended = 0
    for pen in sorted(set(containment.pens_left()) | set(notes)):
        killed = await containment.end(pen)
        ended += killed
        log.info("previous_run_ended", pen=pen, processes=killed)
    for pen, note in notes.items():
        await publish_recorded_step(engines.get(note.engine), note, publish, clock)
        assert ledger is not None
        ledger.discard(pen)
    return ended


async def publish_recorded_step(
    engine: Engine | None,
    note: StepNote,
    publish: Callable[[TimelineEntryIn], Awaitable[None]],
    clock: Callable[[], str],
) -> int:
    """Publish the note's step as the engine's transcript holds it; entries already
    published live carry the same ids and go in once. Returns how many were read."""
    outputs = recorded_step(engine, note) or []
    for index, output in enumerate(outputs):
        await publish(
            timeline_entry(
                instance_id=note.instance_id,
                repo=note.repo,
                session_id=note.session_id,
                engine=note.engine,
                step=note.step_id,
                index=index,
                output=output,
                at=clock(),
            )
        )
    log.info(
        "engine_transcript_published",
        session_id=note.session_id,
        step=note.step_id,
        entries=len(outputs),
    )
    return len(outputs)


def recorded_step(engine: Engine | None, note: StepNote) -> list[EngineOutput] | None:
    """The note's step as the engine's own transcript holds it (None: no transcript of it)."""
    if isinstance(engine, ClaudeEngine):
        files = (engine.transcripts_home / "projects").glob("*/*.jsonl")
        read = claude_step
    elif isinstance(engine, CodexEngine):
        files = (engine.transcripts_home / "sessions").glob("*/*/*/rollout-*.jsonl")
        read = codex_step
    else:
        return None
    for path in _newest_first(files, since=note.started - _MTIME_SLACK_SECONDS):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        outputs = read(lines, note.prompt_sha256)
        if outputs is not None:
            return outputs
    return None


def _newest_first(files, since: float) -> list[Path]:
    dated = []
    for path in files:
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        if mtime >= since:
            dated.append((mtime, path))
    return [path for _, path in sorted(dated, reverse=True)]
