"""Containment: every process an engine starts is owned whole by its runner.

One interface (``Containment``), three ways to keep it, the strongest the machine
allows: a cgroup v2 per conversation (Linux, where the runner may create cgroups),
the runner as a child subreaper plus a sweep of descendants (other Linux), and a
process group per engine plus a sweep of descendants and tagged processes (macOS).
"""

from .base import (
    PEN_ENV,
    ChildSetup,
    Containment,
    Keeper,
    Pen,
    bind_pen,
    bound_pen,
    note_step,
    unbind_pen,
)
from .cgroup import CgroupContainment
from .choose import CONTAINMENT_NAMES, choose_containment, default_identity, runner_key
from .process_group import ProcessGroupContainment
from .subreaper import SubreaperContainment

__all__ = [
    "CONTAINMENT_NAMES",
    "PEN_ENV",
    "CgroupContainment",
    "ChildSetup",
    "Containment",
    "Keeper",
    "Pen",
    "ProcessGroupContainment",
    "SubreaperContainment",
    "bind_pen",
    "bound_pen",
    "choose_containment",
    "default_identity",
    "note_step",
    "runner_key",
    "unbind_pen",
]
