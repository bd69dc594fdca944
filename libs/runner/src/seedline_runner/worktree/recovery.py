"""A runner that starts again rolls back a carried tree its previous run died applying: no
checkout is ever left half-applied (CONTRACT.md 6)."""

from __future__ import annotations

from pathlib import Path

import structlog

from ..checkouts import Checkouts
from .apply import MARKER, recover
from .git import GitError

log = structlog.get_logger(__name__)

# Repos are folders under the repos folder, a few levels deep ("apps/chess-academy").
DEPTH = 4


def _marked(checkouts: Checkouts) -> set[Path]:
    found = {path for path in checkouts.mapping.values() if (path / ".git" / MARKER).exists()}
    if checkouts.repos_dir is not None:
        for depth in range(1, DEPTH + 1):
            pattern = "/".join(["*"] * depth) + f"/.git/{MARKER}"
            found |= {marker.parent.parent for marker in checkouts.repos_dir.glob(pattern)}
    return found


async def recover_checkouts(checkouts: Checkouts) -> None:
    for checkout in sorted(_marked(checkouts)):
        try:
            await recover(checkout)
            log.warning("half_applied_tree_rolled_back", checkout=str(checkout))
        except (GitError, OSError, ValueError) as error:
            log.error("half_applied_tree_not_rolled_back", checkout=str(checkout),
                      error=str(error))
