"""One JSON object per line: what the engines' command lines write (pure)."""

from __future__ import annotations

import json
from typing import Any


def parse_object(line: str) -> dict[str, Any] | None:
    """The JSON object on ``line``; None for anything else (blank, text, an array)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
