"""Where `seedline capture` stopped in each transcript file, kept across restarts.

One small JSON file: per transcript file, the bytes read so far (always up to the end
of a whole line), how many lines that was (entry ids of lines without an id of their
own use the line number), and what its earlier lines said that later lines need (the
conversation's id, working folder and latest time, Codex's way of recording the
person's words, and whether a Seedline runner made the run). Written whole to a
temporary file and renamed, so a capture killed at any moment finds either the old
state or the new one; the worst case is lines published again, which the timeline
keeps once (their entry ids are the same).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .transcripts import Transcript

STATE_VERSION = 1


@dataclass
class FileState:
    offset: int = 0
    lines: int = 0
    session_id: str | None = None
    cwd: str | None = None
    last_at: str | None = None
    runner_run: bool = False
    seedline_brief: bool = False
    typed_messages: bool = False

    def transcript(self, engine: str) -> Transcript:
        """A transcript that goes on from the lines read so far."""
        return Transcript(
            engine=engine, session_id=self.session_id, cwd=self.cwd, last_at=self.last_at,
            runner_run=self.runner_run, seedline_brief=self.seedline_brief,
            typed_messages=self.typed_messages,
        )

    def advance(self, transcript: Transcript, offset: int, lines: int) -> None:
        self.offset, self.lines = offset, lines
        self.session_id, self.cwd, self.last_at = (
            transcript.session_id, transcript.cwd, transcript.last_at)
        self.runner_run = transcript.runner_run
        self.seedline_brief = transcript.seedline_brief
        self.typed_messages = transcript.typed_messages


@dataclass
class CaptureState:
    files: dict[str, FileState] = field(default_factory=dict)
    # False until the first pass: files already there then are followed from their end.
    started: bool = False


def default_state_path(engine: str, instance: str) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "seedline" / f"capture-{engine}-{instance}.json"


def load(path: Path) -> CaptureState:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return CaptureState()
    known = {f.name for f in fields(FileState)}
    files = {
        name: FileState(**{k: v for k, v in entry.items() if k in known})
        for name, entry in (raw.get("files") or {}).items()
    }
    return CaptureState(files=files, started=bool(raw.get("started")))


def save(path: Path, state: CaptureState) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"version": STATE_VERSION, "started": state.started,
            "files": {name: asdict(entry) for name, entry in state.files.items()}}
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(body, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)
