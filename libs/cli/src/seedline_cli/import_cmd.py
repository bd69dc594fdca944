"""`seedline import claude|codex PATH`: people's existing conversations into the timeline.

Each transcript file is one conversation: its entries are published in order to
seedline.ingest.timeline (the trusted producers' subject) under the conversation's
own id, with entry ids derived from the transcript's ids and ``at`` from its times.
An entry already in the timeline is counted as a duplicate and not published again,
however long ago the first import was. Every entry is published with
``origin: "import"``: history never wakes a conversation or becomes a turn, however
recent its ``at`` (CONTRACT.md 2.1).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Optional

import msgspec
import typer
from nats.errors import NoRespondersError
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

from seedline_client import SeedlineClient
from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.normalise import Accepted, normalise
from seedline_contracts.timeline import MAX_CONTENT_CHARS, MAX_READ_LIMIT, TimelineReadRequest
from seedline_contracts.times import format_utc, now_text
from seedline_platform.natsio import publish_window
from seedline_platform.settings import Settings

from .config import check_name, load_settings
from .console import err, out, print_json
from .disk_guard import refuse_new_work
from .errors import START_HINT, OperationFailed, Unreachable, UsageProblem, reports_errors
from .nats_client import answered, connected
from .publish_file import DEFAULT_WINDOW, capped_lines
from .transcripts import RUNNER_PUBLISHED, Transcript, claude, codex

MAX_LINE_BYTES = 16 << 20
PARSERS = {"claude": claude.parse, "codex": codex.parse}
# What a folder is searched for: Codex names every rollout file this way, and keeps
# other JSONL files (its prompt history) beside them.
FILE_PATTERNS = {"claude": "*.jsonl", "codex": "rollout-*.jsonl"}

importer = typer.Typer(
    help="Import existing Claude Code or Codex conversations into the timeline.",
    no_args_is_help=True,
)


@dataclass
class Conversation:
    file: Path
    transcript: Transcript
    instance: str
    repo: str
    entries: list[dict]
    imported: int = 0
    duplicates: int = 0
    # The kinds of the entries this import added (not of those already stored).
    new_kinds: Counter[str] = field(default_factory=Counter)


@dataclass
class Summary:
    conversations: list[Conversation] = field(default_factory=list)
    skipped_files: list[tuple[Path, str]] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    # Malformed lines of files skipped whole are still named.
    malformed_elsewhere: list[tuple[Path, int, str]] = field(default_factory=list)

    def skipped(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for conversation in self.conversations:
            total.update(conversation.transcript.skipped)
        return total + self.refused

    def malformed(self) -> list[tuple[Path, int, str]]:
        return self.malformed_elsewhere + [
            (c.file, line, why) for c in self.conversations for line, why in c.transcript.malformed
        ]


def _command(engine: str, where: str):
    @reports_errors
    def command(
        ctx: typer.Context,
        path: Path = typer.Argument(..., help=f"A transcript file, or a folder such as {where}."),
        instance: str = typer.Option(..., "--instance", help="Instance to import into."),
        repo: Optional[str] = typer.Option(
            None, "--repo", help="Repo of every conversation (default: from its working folder)."
        ),
        repos_dir: Optional[Path] = typer.Option(
            None,
            "--repos-dir",
            help="Name repos by their path under this folder, as a runner does.",
        ),
        dry_run: bool = typer.Option(False, "--dry-run", help="Read and count; publish nothing."),
        json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    ) -> None:
        check_name("--instance", instance, "bd43f4de")
        if repo is not None:
            check_name("--repo", repo, "apps/chess-academy")
        files = transcript_files(path, FILE_PATTERNS[engine])
        settings = None if dry_run else load_settings(ctx)
        if not dry_run:
            refuse_new_work()
        summary = asyncio.run(
            import_files(engine, files, instance, repo, repos_dir, settings)
        )
        report(summary, dry_run, json_out)
        if summary.malformed():
            raise typer.Exit(1)

    command.__doc__ = (
        f"Import {'Claude Code' if engine == 'claude' else 'Codex'} transcripts from PATH.\n\n"
        "Each file becomes one conversation of the instance; importing again publishes "
        "nothing twice. Malformed lines are skipped and named (exit code 1)."
    )
    return command


importer.command("claude")(_command("claude", "~/.claude/projects"))
importer.command("codex")(_command("codex", "~/.codex"))


def transcript_files(path: Path, pattern: str) -> list[Path]:
    path = path.expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob(pattern) if p.is_file())
        if not files:
            raise UsageProblem(f"{path} holds no transcript files ({pattern}).")
        return files
    raise UsageProblem(f"{path} is neither a file nor a folder.")


def repo_of(cwd: str | None, repos_dir: Path | None) -> str | None:
    """The repo a working folder names: its path under ``repos_dir``, else its own name."""
    if not cwd:
        return None
    folder = PurePosixPath(cwd)
    if repos_dir is not None:
        try:
            return folder.relative_to(PurePosixPath(repos_dir.expanduser().resolve())).as_posix()
        except ValueError:
            pass
    return folder.name or None


def read_transcript(engine: str, path: Path, progress: Progress, task) -> Transcript:
    with path.open("rb") as handle:
        def lines():
            for number, raw, length in capped_lines(handle, MAX_LINE_BYTES):
                progress.advance(task, length)
                yield number, None if raw is None else raw.decode("utf-8", errors="replace")

        return PARSERS[engine](lines())


def entries_of(
    transcript: Transcript, instance: str, repo: str, mtime: float, summary: Summary
) -> list[dict]:
    fallback_at = format_utc(datetime.fromtimestamp(mtime, timezone.utc))
    entries = []
    received = now_text()
    for item in transcript.items:
        body = {
            "entry_id": item.entry_id,
            "instance_id": instance,
            "repo": repo,
            "session_id": transcript.session_id,
            "kind": item.kind,
            "content": item.content,
            "at": item.at or fallback_at,
            "engine": transcript.engine,
            # History only: it never wakes a conversation or becomes a turn (CONTRACT 2.1).
            "origin": "import",
        }
        result = normalise(encode(body), received)
        if isinstance(result, Accepted):
            entries.append(body)
        else:
            summary.refused[f"entries the timeline would refuse ({result.message})"] += 1
    return entries


async def import_files(
    engine: str,
    files: list[Path],
    instance: str,
    repo: str | None,
    repos_dir: Path | None,
    settings: Settings | None,
) -> Summary:
    summary = Summary()
    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    sizes = {path: path.stat().st_size for path in files}
    with progress:
        task = progress.add_task("Importing", total=sum(sizes.values()) or None)
        for path in files:
            progress.update(task, description=f"Importing {path.name}")
            transcript = read_transcript(engine, path, progress, task)
            conversation_repo = repo or repo_of(transcript.cwd, repos_dir)
            why = _file_skipped(transcript, conversation_repo)
            if why is not None:
                summary.skipped_files.append((path, why))
                summary.refused.update(transcript.skipped)
                summary.malformed_elsewhere += [(path, n, w) for n, w in transcript.malformed]
                continue
            entries = entries_of(
                transcript, instance, conversation_repo, path.stat().st_mtime, summary
            )
            summary.conversations.append(
                Conversation(path, transcript, instance, conversation_repo, entries)
            )
    if settings is not None:
        await publish(settings, summary)
    return summary


def _file_skipped(transcript: Transcript, repo: str | None) -> str | None:
    """Why a whole file adds nothing, or None."""
    if transcript.session_id is None:
        return "no conversation id recorded"
    if not transcript.items and transcript.skipped[RUNNER_PUBLISHED]:
        return ("a Seedline runner ran this conversation and published it live; "
                "its briefs are never a person's messages")
    if repo is None:
        return "no working folder recorded; give --repo"
    return None


async def publish(settings: Settings, summary: Summary) -> None:
    async with connected(settings) as nc:
        js = nc.jetstream()
        # One read of each repo's ids per import, however many files name the repo.
        by_repo: dict[tuple[str, str], set[str]] = {}
        for conversation in summary.conversations:
            where = (conversation.instance, conversation.repo)
            if where not in by_repo and conversation.entries:
                by_repo[where] = await stored_ids(nc, conversation)
            stored = by_repo.get(where, set())
            fresh = [e for e in conversation.entries if e["entry_id"] not in stored]
            conversation.duplicates = len(conversation.entries) - len(fresh)
            for start in range(0, len(fresh), DEFAULT_WINDOW):
                batch = fresh[start : start + DEFAULT_WINDOW]
                window = [ingest_message(nc, entry) for entry in batch]
                acks = await _publish_window(js, window, summary)
                for entry, ack in zip(batch, acks):
                    if ack.duplicate:
                        conversation.duplicates += 1
                    else:
                        conversation.imported += 1
                        conversation.new_kinds[entry["kind"]] += 1


async def stored_ids(nc, conversation: Conversation) -> set[str]:
    """The entry ids the timeline already holds on the conversation's repo.

    The whole repo's, not only the conversation's: a runner publishes what an engine
    does under the platform's conversation id, with the ids the engine's transcript
    gives it here.
    """
    if not conversation.entries:
        return set()
    client = SeedlineClient(nc)
    request = TimelineReadRequest(conversation.instance, conversation.repo, limit=MAX_READ_LIMIT)
    ids: set[str] = set()
    while True:
        reply = await answered(client.read(request))
        ids.update(entry.entry_id for entry in reply.entries)
        if not reply.has_more or not reply.entries:
            return ids
        request = msgspec.structs.replace(request, before_seq=reply.entries[0].seq)


def ingest_message(nc, entry: dict) -> tuple[str, bytes, dict]:
    payload = encode(entry)
    if len(payload) > nc.max_payload:
        # The writer would keep only this much of it anyway.
        payload = encode({**entry, "content": entry["content"][:MAX_CONTENT_CHARS]})
    subject = subjects.ingest_timeline_subject(entry["instance_id"])
    return subject, payload, {"Nats-Msg-Id": entry["entry_id"]}


async def _publish_window(js, window: list, summary: Summary) -> list:
    try:
        return await publish_window(js, window)
    except NoRespondersError:
        raise Unreachable(
            f"No stream takes {subjects.INGEST_TIMELINE} yet: the timeline-writer creates it "
            f"when it starts. {START_HINT}."
        ) from None
    except Exception as exc:
        done = sum(c.imported for c in summary.conversations)
        raise OperationFailed(
            f"Importing stopped after {done} entries ({type(exc).__name__}: {exc}). "
            "Importing again is safe: entries already stored are not published twice."
        ) from None


def report(summary: Summary, dry_run: bool, json_out: bool) -> None:
    conversations = summary.conversations
    imported = sum(c.imported for c in conversations)
    duplicates = sum(c.duplicates for c in conversations)
    # What was added, or for a dry run what would be read: never the kinds of entries
    # that were in the timeline already.
    kinds: Counter[str] = Counter()
    for c in conversations:
        kinds.update(Counter(e["kind"] for e in c.entries) if dry_run else c.new_kinds)
    if json_out:
        print_json({
            "ok": not summary.malformed(),
            "dry_run": dry_run,
            "entries": sum(len(c.entries) for c in conversations),
            "imported": imported,
            "duplicates": duplicates,
            "kinds": dict(kinds),
            "conversations": [
                {"file": str(c.file), "session_id": c.transcript.session_id, "repo": c.repo,
                 "entries": len(c.entries), "imported": c.imported, "duplicates": c.duplicates}
                for c in conversations
            ],
            "skipped": dict(summary.skipped()),
            "skipped_files": [{"file": str(p), "reason": why} for p, why in summary.skipped_files],
            "malformed": [{"file": str(p), "line": n, "error": why}
                          for p, n, why in summary.malformed()],
        })
        return
    by_kind = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
    repos = sorted({c.repo for c in conversations})
    where = f"{len(conversations)} conversation(s) of {', '.join(repos) or 'no repo'}"
    if dry_run:
        out.print(f"Would import {sum(kinds.values())} entries from {escape(where)} "
                  f"({by_kind or 'none'}); nothing was published. Entries already in the "
                  "timeline would not be published again.")
    else:
        out.print(f"Imported {imported} new entries from {escape(where)}"
                  + (f" ({by_kind})." if by_kind else "."))
        if duplicates:
            out.print(f"{duplicates} were in the timeline already; "
                      "they were not published again.")
    skipped = summary.skipped()
    if skipped:
        reasons = "; ".join(f"{count} {escape(why)}" for why, count in skipped.most_common())
        out.print(f"{'Would leave out' if dry_run else 'Left out'}: {reasons}.")
    for path, why in summary.skipped_files:
        out.print(f"[yellow]{'Would skip' if dry_run else 'Skipped'} {escape(str(path))}:[/] "
                  f"{escape(why)}.")
    malformed = summary.malformed()
    if malformed:
        places = ", ".join(f"{escape(p.name)} line {n} ({escape(why)})" for p, n, why in malformed)
        out.print(f"[yellow]Malformed lines skipped:[/] {places}. Everything else was read.")
    if not dry_run and conversations:
        first = conversations[0]
        out.print(
            f"Read them with `seedline timeline --instance {escape(first.instance)} --repo "
            f"{escape(first.repo)}`; opening the repo continues from a brief of them."
        )
