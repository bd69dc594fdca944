"""`seedline` imports a command's module only when that command runs (start-up time; the
import time itself is measured by the benchmark suite, bench/cli_startup.py)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys

from typer.main import get_command

from seedline_cli.lazy_commands import PLUGIN_GROUP
from seedline_cli.main import COMMANDS, app

# Each is another package's command (its `seedline.commands` entry point).
PLUGINS = {"up": "seedline_supervisor", "docs": "seedline_devtools", "eval": "seedline_seed_composer",
           "mcp": "seedline_web", "tokens": "seedline_web", "machines": "seedline_devtools"}

PROBE = """
import json, sys
from seedline_cli.main import app
try:
    app(args=sys.argv[1:], prog_name="seedline")
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("seedline_cli.", "fastapi",
      "faststream", "psycopg", "structlog", "nats", "seedline_web", "seedline_seed_composer",
      "seedline_supervisor", "seedline_devtools", "pydantic", "msgspec", "rich.progress",
      "seedline_contracts.asyncapi", "seedline_core.brief")))))
"""


def _loaded(*args: str, env: dict[str, str] | None = None) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          timeout=120, env=env)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_help_lists_every_command_without_importing_this_packages_or_any_heavy_module():
    loaded = _loaded("--help")
    # Another package's command module is imported for its summary; each keeps its heavy
    # imports inside the command.
    assert not {m for m in loaded if m.startswith("seedline_cli.") and m.endswith("_cmd")}, loaded
    assert not loaded & {"fastapi", "faststream", "psycopg", "structlog", "nats", "pydantic",
                         "msgspec", "rich.progress", "seedline_contracts.asyncapi",
                         "seedline_core.brief"}, loaded


def test_status_imports_what_status_needs_and_not_the_other_commands():
    loaded = _loaded("status", "--help")
    assert "seedline_cli.status_cmd" in loaded
    assert not loaded & {"seedline_supervisor.up_cmd", "seedline_devtools.docs_cmd",
                         "seedline_seed_composer.eval_cmd", "seedline_cli.import_cmd", "fastapi",
                         "faststream", "structlog"}, loaded


def test_status_runs_without_pydantic_msgspec_or_psycopg():
    """Typer's validators (pydantic), the wire types (msgspec) and the database driver are
    most of what start-up once cost; a status that cannot reach NATS has imported all that
    it imports before it connects."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")}
    loaded = _loaded("--nats-url", "nats://127.0.0.1:1", "status",
                     env={**env, "SEEDLINE_NATS_URL": "nats://127.0.0.1:1"})
    assert "seedline_cli.status_checks" in loaded and "nats" in loaded
    assert not loaded & {"pydantic", "msgspec", "psycopg", "seedline_core.brief"}, loaded


def test_another_packages_command_is_imported_when_it_runs():
    loaded = _loaded("tokens", "--help")
    assert "seedline_web.tokens_cmd" in loaded
    assert not loaded & {"seedline_supervisor.up_cmd", "seedline_seed_composer.eval_cmd"}, loaded


def test_each_listed_summary_is_the_commands_own():
    group = get_command(app)
    commands = group.all_commands()
    assert list(commands) == [c.name for c in COMMANDS] + sorted(PLUGINS)
    listed = group.list_commands(None)
    assert listed[0] == "up" and listed[1:] == [n for n in commands if n != "up"]
    for spec in COMMANDS:
        own = (commands[spec.name].help or "").split("\n\n")[0].strip()
        assert spec.summary == own, spec.name
        assert commands[spec.name].hidden == spec.hidden


def test_the_other_packages_commands_come_from_their_entry_points():
    points = importlib.metadata.entry_points(group=PLUGIN_GROUP)
    assert {p.name: p.module.split(".")[0] for p in points} == PLUGINS
    commands = get_command(app).all_commands()
    for name in PLUGINS:
        summary = commands[name].short_help
        assert summary and summary == commands[name].help.split("\n\n")[0].strip(), name


def test_the_cli_package_depends_on_no_service_supervisor_or_developer_tools():
    required = {re.split(r"[ <>=;\[]", r)[0] for r in importlib.metadata.requires("seedline-cli")}
    services = {"timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway",
                "seedline-web", "seedline-supervisor", "seedline-devtools"}
    assert required, "the metadata lists its requirements"
    assert not required & services, required


def test_a_missing_packages_command_says_which_package_to_install(monkeypatch):
    from typer.testing import CliRunner

    from seedline_cli.app_group import ELSEWHERE

    assert set(ELSEWHERE) == set(PLUGINS)
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [])
    result = CliRunner().invoke(app, ["up"])
    assert result.exit_code == 2
    assert "comes with the seedline-supervisor package" in result.output
