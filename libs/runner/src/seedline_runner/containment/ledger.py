"""What each conversation's engine is working on, kept on disk for a runner started again.

When an engine starts on a message, the runner notes the conversation, the message's
step id and a digest of the prompt in ``<state folder>/pens/<pen>.json``; when the
conversation ends, the note goes. A runner that died leaves its notes behind: the
next run reads them to find which engine transcript to read and which entry ids the
engine's outputs had (``<session>:<step>:<index>``, as live publishing gives them).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class StepNote:
    session_id: str
    instance_id: str
    repo: str
    engine: str
    step_id: str
    prompt_sha256: str
    # Unix time the step started: transcripts older than this are not this step's.
    started: float


def prompt_digest(prompt: str) -> str:
    return hashlib.sha256(prompt.strip().encode("utf-8")).hexdigest()


class Ledger:
    def __init__(self, state_dir: Path) -> None:
        self.folder = state_dir / "pens"

    def write(self, pen: str, note: StepNote) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{pen}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(note)))
        os.replace(temporary, path)

    def discard(self, pen: str) -> None:
        try:
            (self.folder / f"{pen}.json").unlink()
        except FileNotFoundError:
            pass

    def notes(self) -> dict[str, StepNote]:
        found: dict[str, StepNote] = {}
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                found[path.stem] = StepNote(**json.loads(path.read_text()))
            except (OSError, ValueError, TypeError) as error:
                log.warning("pen_note_unreadable", path=str(path), error=str(error))
        return found


def step_note(
    *, session_id: str, instance_id: str, repo: str, engine: str, step_id: str, prompt: str
) -> StepNote:
    return StepNote(
        session_id=session_id,
        instance_id=instance_id,
        repo=repo,
        engine=engine,
        step_id=step_id,
        prompt_sha256=prompt_digest(prompt),
        started=time.time(),
    )
