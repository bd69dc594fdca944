"""`seedline capture claude|codex [PATH]`: the conversations people run by hand, as they happen.

Follows the engine's own transcript folder and publishes each line's entries soon
after the engine writes it, read exactly as `seedline import` reads them (the same
parsers, the same entry ids, `origin: "import"`): a later import of the same file, or
what a runner published live of its own runs, is never added twice, and nothing
captured wakes a conversation or reaches an engine as a turn (CONTRACT.md 2.1).

The folder is looked at every ``--interval`` seconds; only whole lines are read. Where
each file was left is kept in a small state file after every publish, so a capture
that restarts goes on from there, also with the lines written while it was down.
Files already in the folder the first time a capture starts are followed from their
end (their history is `seedline import`'s), unless ``--from-start``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer
from nats.errors import Error as NatsError
from rich.markup import escape

from seedline_platform.natsio import publish_window
from seedline_platform.settings import Settings

from .capture_state import CaptureState, FileState, default_state_path, load, save
from .config import check_name, load_settings
from .console import err, out
from .disk_guard import disk_full_here
from .errors import Unreachable, UsageProblem, reports_errors
from .import_cmd import FILE_PATTERNS, PARSERS, Summary, entries_of, ingest_message, repo_of
from .nats_client import connected
from .publish_file import DEFAULT_WINDOW

DEFAULT_INTERVAL = 0.5
RECONNECT_SECONDS = 2.0
NAMES = {"claude": "Claude Code", "codex": "Codex"}
FOLDERS = {"claude": "~/.claude/projects, or $CLAUDE_CONFIG_DIR/projects",
           "codex": "the folder of rollouts in ~/.codex, or in $CODEX_HOME"}

capture = typer.Typer(
    help="Follow Claude Code's or Codex's transcript folder and publish new lines as they "
    "are written.",
    no_args_is_help=True,
)


def default_folder(engine: str) -> Path:
    if engine == "claude":
        home = os.environ.get("CLAUDE_CONFIG_DIR")
        return (Path(home) if home else Path.home() / ".claude") / "projects"
    home = os.environ.get("CODEX_HOME")
    return (Path(home) if home else Path.home() / ".codex") / "sessions"


@dataclass(frozen=True)
class Target:
    engine: str
    folder: Path
    instance: str
    repo: str | None
    repos_dir: Path | None
    state_path: Path
    interval: float
    from_start: bool
    once: bool


def _command(engine: str):
    @reports_errors
    def command(
        ctx: typer.Context,
        path: Optional[Path] = typer.Argument(
            None, help=f"The folder to follow (default: {FOLDERS[engine]})."),
        instance: str = typer.Option(..., "--instance", help="Instance to publish into."),
        repo: Optional[str] = typer.Option(
            None, "--repo", help="Repo of every conversation (default: from its working folder)."
        ),
        repos_dir: Optional[Path] = typer.Option(
            None, "--repos-dir",
            help="Name repos by their path under this folder, as a runner does.",
        ),
        state: Optional[Path] = typer.Option(
            None, "--state",
            help="Where to keep how far each file was read "
            "(default: ~/.local/state/seedline/capture-ENGINE-INSTANCE.json).",
        ),
        interval: float = typer.Option(
            DEFAULT_INTERVAL, "--interval", min=0.05, help="Seconds between looks at the folder."
        ),
        from_start: bool = typer.Option(
            False, "--from-start",
            help="On the first start, read the files already there from their beginning.",
        ),
        once: bool = typer.Option(False, "--once", help="Publish what is new, then exit."),
    ) -> None:
        check_name("--instance", instance, "bd43f4de")
        if repo is not None:
            check_name("--repo", repo, "apps/chess-academy")
        folder = (path or default_folder(engine)).expanduser()
        if not folder.is_dir():
            raise UsageProblem(f"{folder} is not a folder; give the folder {NAMES[engine]} "
                               "keeps its transcripts in.")
        target = Target(engine, folder, instance, repo, repos_dir,
                        (state or default_state_path(engine, instance)).expanduser(),
                        interval, from_start, once)
        settings = load_settings(ctx)
        try:
            asyncio.run(follow(settings, target))
        except KeyboardInterrupt:
            out.print("Stopped; the next start goes on from where this one stopped.")

    command.__doc__ = (
        f"Follow {NAMES[engine]}'s transcript folder and publish new lines as they are "
        "written.\n\nEntries are those `seedline import` gives the same lines (a later import "
        "adds nothing twice), published as imported history: they never wake a conversation. "
        "Restarting goes on from where it stopped."
    )
    return command


capture.command("claude")(_command("claude"))
capture.command("codex")(_command("codex"))


async def follow(settings: Settings, target: Target) -> None:
    state = load(target.state_path)
    warned: set[str] = set()
    said_paused = False
    while True:
        try:
            async with connected(settings, name="seedline-capture") as nc:
                if not target.once:
                    out.print(f"Following {escape(str(target.folder))} for instance "
                              f"{escape(target.instance)}; state in "
                              f"{escape(str(target.state_path))}.")
                said_paused = False
                await _passes(nc, target, state, warned)
                return
        except (Unreachable, NatsError, OSError, asyncio.TimeoutError) as exc:
            if target.once:
                raise
            if not said_paused:  # once per outage, not every few seconds
                full = disk_full_here()
                why = full.message() if full else f"{type(exc).__name__}: {exc}"
                err.print(f"Publishing paused ({escape(why)}); trying again every "
                          f"{RECONNECT_SECONDS:.0f} s. Nothing read is lost.")
                said_paused = True
            await asyncio.sleep(RECONNECT_SECONDS)


async def _passes(nc, target: Target, state: CaptureState, warned: set[str]) -> None:
    js = nc.jetstream()
    while True:
        first_pass = not state.started
        present = set()
        for path in sorted(target.folder.rglob(FILE_PATTERNS[target.engine])):
            if path.is_file():
                present.add(str(path.resolve()))
                await capture_file(js, nc, target, state, path, first_pass, warned)
        gone = [key for key in state.files
                if key not in present and Path(key).is_relative_to(target.folder.resolve())]
        for key in gone:
            del state.files[key]  # deleted by the tool or the person: nothing to go on from
        if first_pass or gone:
            state.started = True
            save(target.state_path, state)
        if target.once:
            return
        await asyncio.sleep(target.interval)


async def capture_file(js, nc, target: Target, state: CaptureState, path: Path,
                       first_pass: bool, warned: set[str]) -> None:
    key = str(path.resolve())
    entry = state.files.get(key)
    size = path.stat().st_size
    if entry is not None and size < entry.offset:
        entry = None  # the file was replaced or cut: read it again (ids make that safe)
    if entry is None:
        entry = FileState()
        state.files[key] = entry
        if first_pass and not target.from_start:
            # History already there is `seedline import`'s; read it only to go on from it.
            transcript, offset, lines = _read_new(target.engine, path, entry)
            if transcript is not None:
                entry.advance(transcript, offset, lines)
            save(target.state_path, state)
            return
    if size == entry.offset:
        return
    transcript, offset, lines = _read_new(target.engine, path, entry)
    if transcript is None:
        return
    repo = target.repo or repo_of(transcript.cwd, target.repos_dir)
    if transcript.items and (transcript.session_id is None or repo is None):
        if key not in warned:
            warned.add(key)
            why = ("no conversation id" if transcript.session_id is None
                   else "no working folder; give --repo")
            err.print(f"[yellow]Not capturing {escape(str(path))}:[/] {why}.")
    elif transcript.items:
        refused = Summary()
        entries = entries_of(transcript, target.instance, repo, path.stat().st_mtime, refused)
        for start in range(0, len(entries), DEFAULT_WINDOW):
            batch = entries[start : start + DEFAULT_WINDOW]
            await publish_window(js, [ingest_message(nc, body) for body in batch])
        if entries:
            out.print(f"Captured {len(entries)} entries of {escape(path.name)} "
                      f"({escape(repo)}).")
        for why, count in refused.refused.items():
            err.print(f"[yellow]Left out {count} {escape(why)} in {escape(path.name)}.[/]")
    entry.advance(transcript, offset, lines)
    save(target.state_path, state)


def _read_new(engine: str, path: Path, entry: FileState):
    """(transcript of the whole lines ``path`` gained since ``entry``, read on from the
    lines before them; the offset and line count after them), or (None, ...) while no
    whole line was added. ``entry`` moves on only once their entries are published."""
    with path.open("rb") as handle:
        handle.seek(entry.offset)
        chunk = handle.read()
    end = chunk.rfind(b"\n") + 1
    if end == 0:
        return None, entry.offset, entry.lines
    raw_lines = chunk[:end].split(b"\n")[:-1]
    numbered = [(entry.lines + n, raw.decode("utf-8", errors="replace"))
                for n, raw in enumerate(raw_lines, start=1)]
    transcript = PARSERS[engine](numbered, entry.transcript(engine))
    return transcript, entry.offset + end, entry.lines + len(raw_lines)
