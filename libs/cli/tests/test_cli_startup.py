"""`seedline` imports a command's module only when that command runs (start-up time; the
import time itself is measured by the benchmark suite, bench/cli_startup.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.main import get_command

from seedline_cli.main import COMMANDS, app

PROBE = """
import json, sys
from seedline_cli.main import app
try:
    app(args=sys.argv[1:], prog_name="seedline")
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("seedline_cli.", "fastapi",
      "faststream", "psycopg", "structlog", "nats", "seedline_web", "seedline_seed_composer")))))
"""


def _loaded(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          timeout=120)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_help_lists_every_command_without_importing_any():
    loaded = _loaded("--help")
    assert not {m for m in loaded if m.endswith("_cmd")}, loaded
    assert not loaded & {"fastapi", "faststream", "psycopg", "structlog", "nats"}, loaded


def test_status_imports_what_status_needs_and_not_the_other_commands():
    loaded = _loaded("status", "--help")
    assert "seedline_cli.status_cmd" in loaded
    assert not loaded & {"seedline_cli.up", "seedline_cli.docs_cmd", "seedline_cli.eval_cmd",
                         "seedline_cli.import_cmd", "fastapi", "faststream", "structlog"}, loaded


def test_each_listed_summary_is_the_commands_own():
    group = get_command(app)
    commands = group.all_commands()
    assert list(commands) == [c.name for c in COMMANDS]
    for spec in COMMANDS:
        own = (commands[spec.name].help or "").split("\n\n")[0].strip()
        assert spec.summary == own, spec.name
        assert commands[spec.name].hidden == spec.hidden
