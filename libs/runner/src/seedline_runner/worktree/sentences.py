"""What a machine says about a tree it was carried: one sentence, added after the brief
and before the instruction, and recorded in `worktree_applied` (CONTRACT.md 5, 6). Said
to an engine and shown to people: the wording rules of CONTRACT.md 3.3 hold."""

from __future__ import annotations

from seedline_contracts.worktrees import SavedTree

from .apply import Outcome


def _where(tree: SavedTree) -> str:
    at = tree.base_commit[:12]
    return f"{at} on branch {tree.branch}" if tree.branch else f"{at} (no branch)"


def applied_sentence(outcome: Outcome, tree: SavedTree, from_label: str, repo: str) -> str:
    saved = f"The uncommitted changes saved on {from_label}"
    if outcome.applied and outcome.files == 0:
        return (f"This checkout was put at {_where(tree)}, as it was on {from_label}; there "
                "were no uncommitted changes to carry.")
    if outcome.applied:
        files = f"{outcome.files} file{'' if outcome.files == 1 else 's'}"
        return (f"{saved} ({files}) were applied to this checkout, at {_where(tree)}; read "
                "them here as they are now.")
    why = {
        "own_changes": "this checkout has uncommitted changes of its own, which were left as "
                       "they are",
        "base_missing": f"this checkout does not have their base commit {tree.base_commit[:12]} "
                        "and could not fetch it from its remotes",
        "conflict": f"they conflict with what this checkout holds ({outcome.detail[:200]}), "
                    "so nothing was changed",
        "over_limit": "they were over the size limits of a saved tree, so they were not saved",
        "no_checkout": f"this machine has no checkout of {repo}",
        "unreadable": "they could not be read here, so nothing was changed",
    }.get(outcome.reason or "", "of an error")
    return f"{saved} were not applied: {why}. Read files again before relying on them."
