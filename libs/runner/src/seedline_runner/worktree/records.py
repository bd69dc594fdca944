"""The engine's own record of a conversation, found where its CLI keeps it and placed where
the CLI on another machine looks for it (CONTRACT.md 6).

Claude Code keeps a transcript per conversation under its config folder, in a folder
named after the checkout's path; Codex keeps a rollout per thread under its home, by
date. Both write the checkout's absolute path into the record (the `cwd` of each line):
saved, that path becomes a placeholder, and placed, the placeholder becomes this
machine's checkout, so the engine there reads a record of its own checkout.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..engines.claude import ClaudeEngine, project_dir_names
from ..engines.codex import CodexEngine

CHECKOUT = "{{seedline:checkout}}"


@dataclass(frozen=True)
class Found:
    path: Path
    relative: str  # where under the engine's home it goes on another machine


def _claude_find(home: Path, engine_id: str, workdir: Path) -> Found | None:
    for folder in sorted(project_dir_names(workdir)):
        path = home / "projects" / folder / f"{engine_id}.jsonl"
        if path.is_file():
            return Found(path, f"projects/{{folder}}/{engine_id}.jsonl")
    return None


def _codex_find(home: Path, engine_id: str, workdir: Path) -> Found | None:
    for path in sorted((home / "sessions").glob(f"*/*/*/rollout-*-{engine_id}.jsonl")):
        return Found(path, str(path.relative_to(home)))
    return None


def _claude_place(home: Path, relative: str, workdir: Path) -> Path:
    # The folder Claude Code names after this machine's checkout.
    folder = re.sub(r"[^A-Za-z0-9]", "-", str(workdir))
    return home / relative.replace("{folder}", folder)


def _codex_place(home: Path, relative: str, workdir: Path) -> Path:
    return home / relative


@dataclass(frozen=True)
class Keeper:
    """Where one engine CLI keeps its records."""

    home: Path
    find_in: object
    place_in: object

    def find(self, engine_id: str, workdir: Path) -> Found | None:
        if not engine_id or "/" in engine_id or engine_id.startswith("."):
            return None
        return self.find_in(self.home, engine_id, workdir)

    def place(self, relative: str, workdir: Path) -> Path | None:
        target = self.place_in(self.home, relative, workdir)
        # Never outside the engine's home, whatever a saved record names.
        if not target.resolve().is_relative_to(self.home.resolve()):
            return None
        return target


def keeper_of(engine: object) -> Keeper | None:
    """The engine's record keeper; None for an engine whose record cannot travel."""
    if isinstance(engine, ClaudeEngine):
        return Keeper(engine.transcripts_home, _claude_find, _claude_place)
    if isinstance(engine, CodexEngine):
        return Keeper(engine.transcripts_home, _codex_find, _codex_place)
    return None


def _json_text(path: Path) -> str:
    return json.dumps(str(path))[1:-1]  # as the path is written inside a JSON string


def portable(text: str, workdir: Path) -> str:
    """A record's text with this checkout's path made a placeholder."""
    return text.replace(_json_text(workdir), CHECKOUT)


def localised(text: str, workdir: Path) -> str:
    """A saved record's text with the placeholder made this machine's checkout."""
    return text.replace(CHECKOUT, _json_text(workdir))


def write_record(target: Path, text: str) -> None:
    """Write atomically: an engine never reads half a record."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".seedline-partial")
    partial.write_text(text, encoding="utf-8", errors="surrogateescape")
    os.replace(partial, target)
