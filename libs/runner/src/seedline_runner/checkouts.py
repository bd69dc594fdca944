"""Where each repo is checked out on this machine.

A runner hosts many repos; each conversation's engine runs in its repo's checkout,
so engines that keep transcripts per project (Claude Code, Codex) keep each repo's
apart. A repo is found in the mapping file first (repos that live elsewhere), then
under the repos folder (``apps/chess-academy`` -> ``DIR/apps/chess-academy``).
Without either, every conversation runs in the runner's current directory.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MAX_MAP_BYTES = 1_000_000


class CheckoutsError(ValueError):
    """The repos folder or mapping file cannot be used; the message says why."""


@dataclass(frozen=True)
class Checkouts:
    repos_dir: Path | None = None
    mapping: Mapping[str, Path] = field(default_factory=dict)

    @property
    def configured(self) -> bool:
        return self.repos_dir is not None or bool(self.mapping)

    def locate(self, repo: str) -> Path | None:
        """The checkout of ``repo``; None when it is not on this machine."""
        if repo in self.mapping:
            path = self.mapping[repo]
        elif self.repos_dir is not None and _is_relative_folder_name(repo):
            path = self.repos_dir / repo
        else:
            return None
        return path if path.is_dir() else None

    def refusal(self, repo: str, label: str) -> str | None:
        """Why ``repo`` cannot run here, naming the repo and the machine; None if it can."""
        if not self.configured or self.locate(repo) is not None:
            return None
        places = []
        if self.repos_dir is not None:
            places.append(f"under {self.repos_dir}")
        if self.mapping:
            places.append("in its repos map")
        return (
            f"{label} has no checkout of {repo} ({' or '.join(places)}); "
            f"check it out there, or open {repo} on another machine."
        )


def _is_relative_folder_name(repo: str) -> bool:
    parts = PurePosixPath(repo).parts
    return (
        bool(parts)
        and not PurePosixPath(repo).is_absolute()
        and all(part not in ("", ".", "..") for part in parts)
        and "\\" not in repo
    )


def load_checkouts(repos_dir: str | Path | None, repos_map: str | Path | None) -> Checkouts:
    folder = None
    if repos_dir is not None:
        folder = Path(repos_dir).expanduser().resolve()
        if not folder.is_dir():
            raise CheckoutsError(f"--repos-dir {repos_dir} is not a folder.")
    mapping = read_repos_map(Path(repos_map)) if repos_map is not None else {}
    return Checkouts(repos_dir=folder, mapping=mapping)


def read_repos_map(path: Path) -> dict[str, Path]:
    """A repos map: ``repo = "path"`` lines (TOML) or one JSON object of the same.

    Relative paths are taken from the map file's own folder.
    """
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise CheckoutsError(f"Cannot read --repos-map {path}: {error.strerror}.") from None
    if len(raw) > MAX_MAP_BYTES:
        raise CheckoutsError(f"--repos-map {path} is larger than {MAX_MAP_BYTES} bytes.")
    try:
        text = raw.decode("utf-8")
        parsed = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (UnicodeDecodeError, ValueError) as error:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise CheckoutsError(f"--repos-map {path} is not valid {kind}: {error}.") from None
    if not isinstance(parsed, dict):
        raise CheckoutsError(f"--repos-map {path} must map each repo to a path.")
    mapping: dict[str, Path] = {}
    for repo, target in parsed.items():
        if not isinstance(target, str) or not target:
            raise CheckoutsError(
                f'--repos-map {path}: {repo} must name a folder, e.g. "{repo}" = "/src/{repo}".'
            )
        target_path = Path(target).expanduser()
        if not target_path.is_absolute():
            target_path = path.parent / target_path
        mapping[repo] = target_path.resolve()
    return mapping
