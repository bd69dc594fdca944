"""The runner as a user service: a systemd user unit on Linux, a launchd agent on macOS. Each
starts `seedline runner` (which reads the joined configuration) when the user logs in and
starts it again when it exits.

A runner whose credentials NATS refuses exits with REFUSED_EXIT (78, EX_CONFIG in sysexits):
the systemd unit does not start it again then (an operator removed the machine, or the
line was replaced); launchd has no such setting and starts it again every ThrottleInterval.

systemd: systemd.service(5), systemd.exec(5); a user unit starts with the user's manager,
at login (or at boot with `loginctl enable-linger`). launchd: launchd.plist(5).
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

UNIT_NAME = "seedline-runner.service"
AGENT_LABEL = "dev.seedline.runner"
REFUSED_EXIT = 78
RESTART_SECONDS = 5
# Room for a stop to save each conversation's checkout before the manager kills the rest.
STOP_SECONDS = 60

Run = Callable[[Sequence[str]], subprocess.CompletedProcess]


@dataclass(frozen=True)
class ServiceSpec:
    executable: str  # the `seedline` command, as an absolute path
    config_path: Path
    node_id: str
    # The PATH the engines are found on (claude, codex, git): the installing shell's.
    path_env: str


def _unit_value(text: str) -> str:
    """A value for a unit file: specifiers (%) doubled, quoted when it holds a space."""
    text = text.replace("%", "%%")
    return f'"{text}"' if any(c.isspace() for c in text) else text


def systemd_unit(spec: ServiceSpec) -> str:
    return "\n".join([
        "# Written by `seedline runner service install`; removed by `... uninstall`.",
        "[Unit]",
        f"Description=Seedline runner {spec.node_id}",
        "",
        "[Service]",
        "Type=exec",
        f"ExecStart={_unit_value(spec.executable)} runner",
        f"Environment={_unit_value('SEEDLINE_RUNNER_CONFIG=' + str(spec.config_path))}",
        f"Environment={_unit_value('PATH=' + spec.path_env)}",
        "Restart=always",
        f"RestartSec={RESTART_SECONDS}",
        f"RestartPreventExitStatus={REFUSED_EXIT}",
        # SIGTERM first: the runner stops its conversations, saving their checkouts; then
        # whatever of the unit's cgroup is left is killed.
        "KillMode=mixed",
        f"TimeoutStopSec={STOP_SECONDS}",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ])


def launchd_plist(spec: ServiceSpec, home: Path) -> bytes:
    logs = home / "Library" / "Logs" / "Seedline" / "runner.log"
    return plistlib.dumps({
        "Label": AGENT_LABEL,
        "ProgramArguments": [spec.executable, "runner"],
        "EnvironmentVariables": {"SEEDLINE_RUNNER_CONFIG": str(spec.config_path),
                                 "PATH": spec.path_env},
        "RunAtLoad": True,
        "KeepAlive": True,
        "ThrottleInterval": 10,
        "ExitTimeOut": STOP_SECONDS,
        "ProcessType": "Background",
        "StandardOutPath": str(logs),
        "StandardErrorPath": str(logs),
    })


def service_path(system: str, home: Path, env: Mapping[str, str] = os.environ) -> Path:
    if system == "darwin":
        return home / "Library" / "LaunchAgents" / f"{AGENT_LABEL}.plist"
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return base / "systemd" / "user" / UNIT_NAME


def service_text(spec: ServiceSpec, system: str, home: Path) -> bytes:
    if system == "darwin":
        return launchd_plist(spec, home)
    return systemd_unit(spec).encode()


def seedline_executable(argv0: str = sys.argv[0]) -> str:
    """The running `seedline` command's path, its symlink kept: `uv tool upgrade` replaces
    what the link points to, and the service goes on finding it."""
    found = argv0 if os.sep in argv0 else shutil.which(argv0)
    return os.path.abspath(found or argv0)


@dataclass(frozen=True)
class Done:
    path: Path
    # Each command run, with what it printed when it failed.
    commands: list[tuple[list[str], int, str]]

    @property
    def failed(self) -> list[tuple[list[str], int, str]]:
        return [c for c in self.commands if c[1] != 0]


def _run_all(commands: list[list[str]], run: Run) -> list[tuple[list[str], int, str]]:
    done = []
    for command in commands:
        try:
            result = run(command)
            done.append((command, result.returncode, (result.stderr or result.stdout or "")
                         .strip() if result.returncode else ""))
        except OSError as exc:  # the manager's command is not on this machine
            done.append((command, 127, str(exc)))
            break
    return done


def run_quietly(command: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=60)


def start_commands(system: str, path: Path) -> list[list[str]]:
    if system == "darwin":
        domain = f"gui/{os.getuid()}"
        return [["launchctl", "bootout", f"{domain}/{AGENT_LABEL}"],
                ["launchctl", "bootstrap", domain, str(path)]]
    return [["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", UNIT_NAME],
            ["systemctl", "--user", "restart", UNIT_NAME]]


def stop_commands(system: str) -> list[list[str]]:
    if system == "darwin":
        return [["launchctl", "bootout", f"gui/{os.getuid()}/{AGENT_LABEL}"]]
    return [["systemctl", "--user", "disable", "--now", UNIT_NAME]]


def install(spec: ServiceSpec, system: str, home: Path, run: Run = run_quietly,
            env: Mapping[str, str] = os.environ) -> Done:
    path = service_path(system, home, env)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(service_text(spec, system, home))
    if system == "darwin":
        (home / "Library" / "Logs" / "Seedline").mkdir(parents=True, exist_ok=True)
    commands = _run_all(start_commands(system, path), run)
    if system == "darwin":  # bootout of an agent not loaded yet fails, and that is fine
        commands = commands[1:]
    return Done(path, commands)


def uninstall(system: str, home: Path, run: Run = run_quietly,
              env: Mapping[str, str] = os.environ) -> Done | None:
    """None when no service was installed here."""
    path = service_path(system, home, env)
    if not path.exists():
        return None
    commands = _run_all(stop_commands(system), run)
    path.unlink()
    if system != "darwin":
        commands += _run_all([["systemctl", "--user", "daemon-reload"]], run)
    return Done(path, commands)
