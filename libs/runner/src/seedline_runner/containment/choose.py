"""Which containment this machine gets: the strongest it allows."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from .base import Containment
from .cgroup import CgroupContainment
from .process_group import ProcessGroupContainment
from .subreaper import SubreaperContainment, become_subreaper

CONTAINMENT_NAMES = ("cgroup", "subreaper", "process-group")


def runner_key(identity: str) -> str:
    """A short name for one runner's processes and cgroups, stable across its restarts."""
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]


def choose_containment(key: str, wanted: str | None = None) -> Containment:
    """A cgroup v2 per engine where Linux allows it, else a subreaper, else process groups.

    ``wanted`` names one of ``CONTAINMENT_NAMES``; a ValueError says when this machine
    cannot give it.
    """
    if wanted is not None and wanted not in CONTAINMENT_NAMES:
        raise ValueError(
            f"Unknown containment {wanted!r}; choose from: {', '.join(CONTAINMENT_NAMES)}."
        )
    linux = sys.platform == "linux"
    if wanted in (None, "cgroup") and linux:
        cgroup = CgroupContainment.create(key)
        if cgroup is not None:
            return cgroup
        if wanted == "cgroup":
            raise ValueError("This machine does not let the runner create cgroups (cgroup v2).")
    if wanted in (None, "subreaper") and linux:
        if become_subreaper():
            return SubreaperContainment(key)
        if wanted == "subreaper":
            raise ValueError("This machine does not let the runner become a child subreaper.")
    if wanted == "subreaper" or (wanted == "cgroup" and not linux):
        raise ValueError(f"Containment {wanted!r} needs Linux.")
    return ProcessGroupContainment(key)


def default_identity(node_id: str, state_dir: Path | None) -> str:
    # Without a state folder nothing survives a restart, so the key need not either:
    # the pid keeps two runners of one node on one machine apart.
    if state_dir is None:
        return f"{node_id}:{os.getpid()}"
    return str(state_dir.resolve())
