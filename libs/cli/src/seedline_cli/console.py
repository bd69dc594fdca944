"""Where output goes: results on stdout, progress and errors on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

# soft_wrap: a printed command or path stays on one line, so it can be copied whole.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(value: Any) -> None:
    """Machine-readable output: plain JSON on stdout, never wrapped or coloured."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()
