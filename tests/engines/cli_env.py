"""The environment an engine CLI runs in here: its own home, nothing of the person's own
setup, and a proxy that leads nowhere for everything but 127.0.0.1, so a CLI that tried to
reach the internet would fail, not quietly succeed. Used by the engine tests (conftest.py)
and by bench.real_wake."""

from __future__ import annotations

import os
from pathlib import Path

NOWHERE = "http://127.0.0.1:9"


def base_env(home: Path) -> dict[str, str]:
    """What a CLI needs from the environment, and nothing of the person's own setup."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "HTTPS_PROXY": NOWHERE,
        "HTTP_PROXY": NOWHERE,
        "ALL_PROXY": NOWHERE,
        "NO_PROXY": "127.0.0.1,localhost",
    }


def claude_env(home: Path, config_dir: Path, base_url: str) -> dict[str, str]:
    """Claude Code against the Messages API stand-in at `base_url`."""
    return base_env(home) | {
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-stand-in",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
