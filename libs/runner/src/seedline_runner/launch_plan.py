"""Deciding what happens to a launch's seed, without any I/O.

The seed is spent only when the engine did not really resume, and "resumed" needs
proof from the engine's own record (CONTRACT.md 3.2): the engine's start reads
its transcript or store, and a stateless engine's record is the runner's own store.
A stateful engine reads the brief in front of its first instruction; a stateless one
gets it as seeded history in the conversation store. When a command-line engine's
record proves the resume, the brief is held back unread until the engine accepts the
resume; if it refuses, the brief goes in front of the message it refused.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from seedline_contracts.runner import LaunchRequest, LaunchResume
from seedline_contracts.tokens import TokenError, escape_token

from .engines.base import StartResult
from .engines.resume_proof import Proof, RecordMessage, holds_turn
from .store import Conversation


@dataclass(frozen=True)
class SeedPlan:
    resumed: bool
    # Framed in front of the first prompt (stateful engines).
    brief_for_first_prompt: str | None = None
    # Seeded into the empty conversation as background (stateless engines).
    brief_for_history: str | None = None
    # Kept unread until the first turn confirms the resume.
    held_brief: str | None = None

    @property
    def seeded(self) -> bool:
        return self.brief_for_first_prompt is not None or self.brief_for_history is not None


def plan_seed(seed_text: str | None, started: StartResult, *, stateless: bool) -> SeedPlan:
    resumed = started.resumed
    brief = seed_text or None
    if brief is None:
        return SeedPlan(resumed=resumed)
    if resumed:
        # Dropped unread, or held until the engine itself accepts the resume.
        return SeedPlan(resumed=True, held_brief=brief if started.acceptance_pending else None)
    if stateless:
        return SeedPlan(resumed=False, brief_for_history=brief)
    return SeedPlan(resumed=False, brief_for_first_prompt=brief)


def store_proof(conversation: Conversation | None, resume: LaunchResume | None) -> Proof:
    """Whether the runner's store continues a stateless engine's conversation.

    Only a launch that asks for a resume, to a store that holds the conversation and
    its expected turn, is one; an empty store never is.
    """
    if resume is None:
        return Proof(False, "no resume was asked for")
    if conversation is None:
        return Proof(False, "the store does not hold the conversation")
    said = [
        RecordMessage(m.role, m.content)
        for m in conversation.messages
        if m.role == "user" or m.role == "assistant"
    ]
    return holds_turn(said, resume.expect)


def launch_refusal(
    request: LaunchRequest,
    engine_names: Collection[str],
    *,
    label: str,
    instances: Sequence[str] = (),
) -> str | None:
    """Why this machine cannot take the launch, in words a person can act on; None if it can.

    ``instances``: the only instances this machine serves (empty: every instance).
    """
    for field_name in ("session_id", "instance_id", "repo"):
        try:
            escape_token(getattr(request, field_name))
        except TokenError as error:
            return f"The launch's {field_name} cannot be used: it {error}."
    if instances and request.instance_id not in instances:
        return (
            f"{label} serves only instance{'s' if len(instances) > 1 else ''} "
            f"{', '.join(instances)}, not {request.instance_id}; "
            "open the conversation on a machine of that instance."
        )
    if request.engine not in engine_names:
        offered = ", ".join(sorted(engine_names)) or "none"
        return f"{label} has no engine called {request.engine!r}; it offers: {offered}."
    return None
