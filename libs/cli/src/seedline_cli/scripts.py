"""The console scripts installed next to this `seedline`: the services `seedline up` starts and
`seedline rebuild` runs."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path


def bin_dir() -> Path:
    return Path(sys.executable).parent


def service_installed(name: str) -> bool:
    """Its console script is next to this Python and the module it runs is importable."""
    if not (bin_dir() / name).exists():
        return False
    for entry in importlib.metadata.entry_points(group="console_scripts", name=name):
        try:
            return importlib.util.find_spec(entry.module) is not None
        except (ImportError, ValueError):
            return False
    return True
