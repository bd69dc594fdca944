"""`seedline eval briefs CORPUS.jsonl`: how well briefs keep what matters, on real transcripts.

No servers: each transcript's brief is composed by the seed-composer's own code over an
in-memory timeline, with the budget given (or the default one).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape
from rich.table import Table

from seedline_cli.console import err, out, print_json
from seedline_cli.errors import FAILED, OperationFailed, UsageProblem, reports_errors


if TYPE_CHECKING:  # the composer's code is imported when the command runs, not when listed
    from rich.progress import Progress

    from seedline_core.brief import Budget

    from .eval_corpus import Measure

eval_app = typer.Typer(help="Measure what Seedline gives an engine.", no_args_is_help=True)


def parse_budget(value: str | None) -> Budget:
    from seedline_core.brief import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET, Budget

    if value is None:
        return DEFAULT_BUDGET
    rows, colon, chars = value.partition(":")
    try:
        budget = Budget(int(rows), int(chars)) if colon else None
    except ValueError:
        budget = None
    if budget is None:
        raise UsageProblem(f"--budget must be ROWS:CHARS, such as 120:40000, not {value!r}.")
    if not (MIN_BUDGET.rows <= budget.rows <= MAX_BUDGET.rows
            and MIN_BUDGET.chars <= budget.chars <= MAX_BUDGET.chars):
        raise UsageProblem(
            f"--budget takes {MIN_BUDGET.rows} to {MAX_BUDGET.rows} rows and "
            f"{MIN_BUDGET.chars} to {MAX_BUDGET.chars} characters, not {value}."
        )
    return budget


async def _measure_all(path: Path, budget: Budget, progress: Progress
                       ) -> tuple[list[Measure], list[dict]]:
    from .eval_corpus import Malformed, brief_of, lines_of, measure, transcript

    measures: list[Measure] = []
    malformed: list[dict] = []
    task = progress.add_task("briefs", total=path.stat().st_size)
    with path.open("rb") as stream:
        for number, size, line in lines_of(stream):
            progress.advance(task, size)
            if line is None:
                malformed.append({"line": number, "reason": "it is longer than 64 MiB"})
                continue
            if not line.strip():
                continue
            try:
                rows = transcript(line)
            except Malformed as exc:
                malformed.append({"line": number, "reason": str(exc)})
                continue
            measures.append(measure(number, rows, await brief_of(rows, budget), budget))
    return measures, malformed


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "[bold red]no[/]")


def _present(count: dict) -> str:
    return f"{count['present']} of {count['of']}"


def _print(measures: list[Measure], total: dict) -> None:
    # Compact enough for 80 columns: "asks" are instructions, "part" the instructions
    # part, "last" the last instruction, "tools" the budget's share spent on tool output.
    table = Table(box=None, padding=(0, 1), header_style="bold")
    for header in ("line", "rows", "asks", "kept", "chars", "part", "contig", "newest", "last",
                   "task", "tools"):
        right = header in ("line", "rows", "asks", "kept", "chars", "tools")
        table.add_column(header, justify="right" if right else "left", no_wrap=True)
    for m in measures:
        table.add_row(str(m.line), str(m.rows), str(m.instructions), str(m.rows_kept),
                      f"{m.chars_kept:,}", "yes" if m.instructions_part else "",
                      _yes(m.contiguous), _yes(m.newest), _yes(m.last_instruction),
                      _yes(m.task), f"{m.tool_share:.0%}")
    out.print(table)
    budget = total["budget"]
    out.print(f"transcripts        {total['transcripts']}, budget {budget['rows']} entries "
              f"and {budget['chars']:,} characters")
    out.print(f"kept               {total['rows_kept']:,} entries ({total['mean_rows_kept']} a "
              f"brief), {total['chars_kept']:,} characters ({total['mean_chars_kept']:,} a brief)")
    out.print(f"instructions part  in {total['instructions_part']} briefs")
    for name, key in (("contiguous", "contiguous"), ("newest entry", "newest"),
                      ("last instruction", "last_instruction"), ("task", "task"),
                      ("task where it fits", "task_where_it_fits")):
        out.print(f"{name:<19}{_present(total[key])}")
    out.print(f"tool output        {total['tool_share']:.0%} of the budget, on average")


def _report_skipped(malformed: list[dict], shown: int = 20) -> None:
    for bad in malformed[:shown]:
        err.print(f"[yellow]line {bad['line']} skipped:[/] {escape(bad['reason'])}")
    if len(malformed) > shown:
        err.print(f"[yellow]{len(malformed) - shown} more lines skipped[/] (--json lists all)")


@eval_app.command("briefs")
@reports_errors
def briefs(
    corpus: Path = typer.Argument(
        ..., help="JSON Lines: one transcript a line, a JSON list of [kind, content] rows."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    budget: Optional[str] = typer.Option(
        None, "--budget", help="ROWS:CHARS to compose with (default 60:12000)."
    ),
) -> None:
    """Compose the brief of each transcript as an open would, and say what it kept.

    Per transcript and in total: entries and characters kept, whether the record is
    contiguous, whether the newest entry, the last instruction and the first one (the
    task) are there, and the share of the budget spent on tool output (terminal and
    command). Lines that are not transcripts are reported by number and skipped.
    """
    chosen = parse_budget(budget)
    if not corpus.is_file():
        raise UsageProblem(f"{corpus} is not a file; give a corpus such as "
                           "tests/data/transcripts/corpus.jsonl.")
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("Composing briefs"), BarColumn(), DownloadColumn(),
                        TimeElapsedColumn(), console=err, transient=True,
                        disable=not err.is_terminal)
    try:
        with progress:
            measures, malformed = asyncio.run(_measure_all(corpus, chosen, progress))
    except OSError as exc:
        raise OperationFailed(f"{corpus} could not be read: {exc.strerror or exc}.") from None
    from .eval_corpus import totals

    total = totals(measures, chosen)
    if json_out:
        print_json({"total": total, "transcripts": [m.to_json() for m in measures],
                    "malformed": malformed})
    elif measures:
        _print(measures, total)
    if not json_out:
        _report_skipped(malformed)
    if not measures:
        if not json_out:
            err.print(f"[bold red]Error:[/] {escape(str(corpus))} holds no transcript to measure.")
        raise typer.Exit(FAILED)
