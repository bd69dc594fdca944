"""Presence against reality (CONTRACT.md 4.1), as pure rules.

A machine is offline only when its presence key is deleted or expires (seen on a
watch), or when it is absent in two reads 10 s apart: an empty or failed listing is
never proof. A conversation held live on an online machine that does not list it in
two successive presence puts made after its launch was accepted is not hosted there
any more (the machine restarted); a protocol-1 presence lists nothing and is never
reconciled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ABSENT_CONFIRM_SECONDS", "Absence", "PresencePut", "reconcile"]

# Two reads this far apart that both find no key mean the machine is gone.
ABSENT_CONFIRM_SECONDS = 10.0
MISSES_TO_STOP = 2


@dataclass(frozen=True)
class PresencePut:
    revision: int
    # None: a protocol-1 machine that does not say what it hosts.
    live: frozenset[str] | None


def reconcile(
    put: PresencePut,
    hosted: Mapping[str, int],
    misses: Mapping[str, int],
) -> tuple[dict[str, int], list[str]]:
    """Count the puts that leave out each conversation the platform holds live there.

    `hosted` maps each conversation held live on the machine to the presence revision
    that was newest when its launch was accepted; only puts after that count. Returns
    the new counts and the conversations to stop (left out of two successive puts).
    """
    if put.live is None:
        return {}, []
    counts: dict[str, int] = {}
    gone: list[str] = []
    for session_id, accepted_revision in hosted.items():
        if put.revision <= accepted_revision or session_id in put.live:
            continue
        count = misses.get(session_id, 0) + 1
        if count >= MISSES_TO_STOP:
            gone.append(session_id)
        else:
            counts[session_id] = count
    return counts, gone


@dataclass(frozen=True)
class Absence:
    """A machine whose key a direct read did not find, and when."""

    first_missed_at: float

    def confirmed(self, now: float) -> bool:
        return now - self.first_missed_at >= ABSENT_CONFIRM_SECONDS
