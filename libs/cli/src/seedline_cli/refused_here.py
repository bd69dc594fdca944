"""Lines `seedline publish --file` refused on this machine before sending them: they never
reach the platform, so SEEDLINE_REJECTED cannot hold them, and `seedline rejected` counts
them apart from what the platform rejected. Kept in SEEDLINE_HOME (the newest KEEP)."""

from __future__ import annotations

import json
from pathlib import Path

NAME = "refused-here.jsonl"
KEEP = 500


def record(home: Path, file: Path, skipped: list[tuple[int, str]], at: str) -> None:
    """Add the lines one run refused; a folder that cannot be written is no error (the run
    itself listed them)."""
    if not skipped:
        return
    rows = read(home) + [{"at": at, "file": str(file), "line": line, "error": error}
                         for line, error in skipped]
    try:
        home.mkdir(parents=True, exist_ok=True)
        partial = home / (NAME + ".tmp")
        partial.write_text("".join(json.dumps(r) + "\n" for r in rows[-KEEP:]))
        partial.replace(home / NAME)
    except OSError:
        pass


def read(home: Path) -> list[dict]:
    """What was refused here, oldest first."""
    try:
        lines = (home / NAME).read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            found.append(row)
    return found
