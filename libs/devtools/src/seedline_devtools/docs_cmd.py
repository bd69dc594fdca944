"""`seedline docs`: the published contract (AsyncAPI document and JSON Schemas) and the
HTTP API's OpenAPI document."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from seedline_cli.console import err, out
from seedline_cli.errors import OperationFailed, UsageProblem, reports_errors


def stale_schemas(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Schema files an earlier run wrote for messages that no longer exist."""
    from seedline_contracts.asyncapi import SCHEMA_DIR  # as below

    stale = []
    for path in sorted((out_dir / SCHEMA_DIR).glob("*.json")):
        if f"{SCHEMA_DIR}/{path.name}" in files:
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if (
            isinstance(document, dict)
            and document.get("title") == path.stem
            and "$schema" in document
        ):
            stale.append(path)
    return stale


def differences(out_dir: Path, files: dict[str, str]) -> list[str]:
    """Relative paths under out_dir that are missing, different or stale."""
    changed = []
    for relative, text in files.items():
        path = out_dir / relative
        try:
            if path.read_text(encoding="utf-8") == text:
                continue
        except OSError:
            pass
        changed.append(relative)
    changed += [str(p.relative_to(out_dir)) for p in stale_schemas(out_dir, files)]
    return changed


@reports_errors
def docs(
    out_dir: Optional[Path] = typer.Option(
        None,
        "--out",
        help="Write asyncapi.json, schema/NAME.json, openapi.json and flows.md into this folder (the "
        "repo keeps them in docs).",
    ),
    check: bool = typer.Option(
        False, "--check", help="Write nothing; exit 1 when the files in --out are out of date."
    ),
) -> None:
    """Print or write the published contract: an AsyncAPI 3.0 document and JSON Schemas,
    the HTTP API's OpenAPI document, and flows.md, each flow drawn from the routing tables.

    All are generated from the code. Without --out the AsyncAPI document goes to stdout.
    """
    # Imported here: they import every service, which listing the commands need not do.
    from seedline_contracts.asyncapi import SCHEMA_DIR

    from .published import published_files

    files = published_files()
    if out_dir is None:
        if check:
            raise UsageProblem("--check needs --out, the folder to compare, e.g. --out docs.")
        sys.stdout.write(files["asyncapi.json"])
        return
    if check:
        changed = differences(out_dir, files)
        if changed:
            for relative in changed:
                err.print(f"out of date: {out_dir / relative}")
            raise OperationFailed(
                f"{len(changed)} published file(s) in {out_dir} differ from what the code generates; "
                f"run `seedline docs --out {out_dir}` (or `make schema`) and commit the result."
            )
        out.print(f"{len(files)} published files in {out_dir} are up to date.")
        return
    try:
        for relative, text in files.items():
            path = out_dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        removed = stale_schemas(out_dir, files)
        for path in removed:
            path.unlink()
    except OSError as exc:
        raise OperationFailed(f"Cannot write the published contract to {out_dir}: {exc}.") from None
    note = f"; removed {len(removed)} schema(s) of messages that no longer exist" if removed else ""
    out.print(
        f"Wrote {out_dir / 'asyncapi.json'}, {out_dir / 'openapi.json'}, "
        f"{out_dir / 'flows.md'} and {len(files) - 3} schemas to {out_dir / SCHEMA_DIR}/{note}."
    )
