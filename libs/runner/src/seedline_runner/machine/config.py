"""The runner's configuration on a machine that joined a platform: one TOML file in the
user's config folder (written by `seedline runner join`, read by `seedline runner`), the CA
beside it, readable by the user alone: it holds the machine's password.

Linux and the BSDs: $XDG_CONFIG_HOME/seedline (~/.config/seedline); macOS:
~/Library/Application Support/Seedline. SEEDLINE_RUNNER_CONFIG names another file.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .join_line import JoinLine

FILE_NAME = "runner.toml"
CA_NAME = "ca.pem"
DEFAULT_ENGINES = ("scripted",)


class ConfigError(ValueError):
    """The configuration cannot be used; the message says what to do."""


@dataclass(frozen=True)
class MachineConfig:
    node_id: str
    label: str
    urls: list[str]
    user: str
    password: str
    ca_file: str | None = None
    engines: list[str] = field(default_factory=lambda: list(DEFAULT_ENGINES))
    repos_dir: str | None = None

    def tls(self) -> ssl.SSLContext | None:
        return tls_context(self.ca_file)


def config_path(env: Mapping[str, str] = os.environ, system: str = sys.platform) -> Path:
    if env.get("SEEDLINE_RUNNER_CONFIG"):
        return Path(env["SEEDLINE_RUNNER_CONFIG"]).expanduser()
    home = Path(env.get("HOME") or Path.home())
    if system == "darwin":
        return home / "Library" / "Application Support" / "Seedline" / FILE_NAME
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return base / "seedline" / FILE_NAME


def state_dir(path: Path) -> Path:
    """Where a joined runner keeps what a run started again must know: beside its config."""
    return path.parent / "state"


def tls_context(ca_file: str | None) -> ssl.SSLContext | None:
    if not ca_file:
        return None
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"The CA file {ca_file} cannot be read as a CA certificate ({exc}); "
                          "join again with the line the operator gave.") from None


def load(path: Path) -> MachineConfig | None:
    """The configuration at `path`, or None when this machine never joined."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"The runner's configuration {path} cannot be read ({exc}).") from None
    try:
        body = tomllib.loads(text)
        return MachineConfig(
            node_id=str(body["node_id"]), label=str(body.get("label") or body["node_id"]),
            urls=[str(u) for u in body["urls"]], user=str(body["user"]),
            password=str(body["password"]), ca_file=body.get("ca_file") or None,
            engines=[str(e) for e in body.get("engines") or DEFAULT_ENGINES],
            repos_dir=body.get("repos_dir") or None)
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise ConfigError(f"The runner's configuration {path} is not one `seedline runner join` "
                          f"wrote ({exc}); join again to write it anew.") from None


def from_join_line(line: JoinLine, path: Path, engines: list[str] | None = None,
                   repos_dir: str | None = None) -> MachineConfig:
    """The configuration a join line makes; its CA is written beside `path`."""
    ca_file = None
    if line.ca:
        ca_path = path.parent / CA_NAME
        _write_private(ca_path, line.ca if line.ca.endswith("\n") else line.ca + "\n")
        ca_file = str(ca_path)
    return MachineConfig(node_id=line.node_id, label=line.label, urls=list(line.urls),
                         user=line.user, password=line.password, ca_file=ca_file,
                         engines=list(engines or DEFAULT_ENGINES), repos_dir=repos_dir)


def save(config: MachineConfig, path: Path) -> None:
    lines = ["# Written by `seedline runner join`; `seedline runner` reads it. It holds this",
             "# machine's NATS password: keep it to yourself."]
    for key, value in vars(config).items():
        if value is None:
            continue
        lines.append(f"{key} = {json.dumps(value)}")  # JSON strings and lists are TOML too
    _write_private(path, "\n".join(lines) + "\n")


def _write_private(path: Path, text: str) -> None:
    """Written whole (a crash leaves the old file or the new one), readable by the user alone."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(partial, path)
