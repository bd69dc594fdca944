"""`seedline schema`: the JSON Schema of every public message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from seedline_contracts.schema import json_schemas

from .console import out, print_json
from .errors import OperationFailed, reports_errors


@reports_errors
def schema(
    out_dir: Optional[Path] = typer.Option(
        None, "--out", help="Write one NAME.json per message into this folder instead of stdout."
    ),
) -> None:
    """Print or write the JSON Schemas of the wire messages.

    Without --out, one JSON object keyed by message name goes to stdout.
    """
    schemas = json_schemas()
    if out_dir is None:
        print_json(schemas)
        return
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, document in schemas.items():
            (out_dir / f"{name}.json").write_text(
                json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
    except OSError as exc:
        raise OperationFailed(f"Cannot write the schemas to {out_dir}: {exc.strerror}.") from None
    out.print(f"Wrote {len(schemas)} schemas to {out_dir}/.")
