"""`seedline bench`: run the benchmark suite of a Seedline checkout (bench/suite.py).

bench/ is not an installed package: it lives in the repository. The command finds
the repository root from SEEDLINE_REPO_ROOT (or --repo-root), else from the current
folder or one of its parents, and imports ``bench.suite`` from there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from .console import err
from .errors import OperationFailed, UsageProblem, reports_errors

ROOT_ENV = "SEEDLINE_REPO_ROOT"
PARTS = ("ingest", "lag", "open", "fill", "langgraph", "startup", "acp")


def _is_root(folder: Path) -> bool:
    return (folder / "bench" / "suite.py").is_file() and (
        folder / "bench" / "__init__.py"
    ).is_file()


def find_repo_root(given: Path | None, cwd: Path) -> Path:
    """The checkout whose bench/suite.py to run; UsageProblem when there is none."""
    if given is not None:
        root = given.expanduser().resolve()
        if not _is_root(root):
            raise UsageProblem(
                f"{root} has no bench/suite.py; point {ROOT_ENV} or --repo-root at a Seedline checkout."
            )
        return root
    for folder in (cwd.resolve(), *cwd.resolve().parents):
        if _is_root(folder):
            return folder
    raise UsageProblem(
        f"No Seedline checkout (a folder with bench/suite.py) at {cwd} or above it. Run the command"
        f" from the repository, or set {ROOT_ENV} to its path."
    )


@reports_errors
def bench(
    only: str | None = typer.Option(
        None, "--only", help=f"Comma-separated parts to run, of {', '.join(PARTS)} (default: all)."
    ),
    entries: int | None = typer.Option(
        None, "--entries", help="Entries for the memory and rebuild fill (default 100,000; the issue names 200,000)."
    ),
    ingest_count: int | None = typer.Option(
        None, "--ingest-count", help="Entries per ingest run (default 10,000)."
    ),
    open_opens: int | None = typer.Option(
        None, "--open-opens", help="Opens per series (default 200)."
    ),
    no_profile: bool = typer.Option(False, "--no-profile", help="Do not profile a missed target."),
    repo_root: Path | None = typer.Option(
        None,
        "--repo-root",
        envvar=ROOT_ENV,
        help="The Seedline checkout holding bench/ (default: found from here).",
    ),
) -> None:
    """Run the benchmark suite on real servers and print its table (about 10 minutes).

    Results go to bench/results/summary.md and summary.json in the checkout.
    """
    parts = tuple(p.strip() for p in only.split(",") if p.strip()) if only else PARTS
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise UsageProblem(f"Unknown part {', '.join(unknown)}; choose from {', '.join(PARTS)}.")
    root = find_repo_root(repo_root, Path(os.getcwd()))
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        from bench.suite import run_suite
    except ImportError as exc:
        raise OperationFailed(f"Cannot import bench.suite from {root}: {exc}.") from None
    err.print(f"Running the benchmark suite of {root} (about 10 minutes).")
    try:
        summary = run_suite(
            parts, not no_profile, entries=entries, ingest_count=ingest_count, open_opens=open_opens
        )
    except RuntimeError as exc:
        raise OperationFailed(f"The benchmark suite stopped: {exc}") from None
    sys.stdout.write(summary["markdown"])
    sys.stdout.flush()
    err.print(f"Wrote {root / 'bench' / 'results' / 'summary.md'} and summary.json.")
    if summary["errors"]:
        raise OperationFailed(f"Some benchmarks failed: {', '.join(summary['errors'])}.")
