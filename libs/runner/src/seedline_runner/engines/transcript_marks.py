"""What ties a runner's live entries to the engine's own transcript of the same run.

Claude Code and Codex keep a transcript of every run on the machine, also of the runs
a runner makes. ``seedline import`` and ``seedline capture`` read those transcripts;
for them to add nothing the runner already published:

- an output the engine's record names (Claude Code's records carry a ``uuid`` that
  its stream-json output and its transcript share) is published live under the same
  entry id the import gives that record's block, ``transcript_entry_id``;
- the runner marks its runs so the transcript says who made it: Claude Code writes
  the ``CLAUDE_CODE_ENTRYPOINT`` it was started with as every record's
  ``entrypoint``, Codex the ``CODEX_INTERNAL_ORIGINATOR_OVERRIDE`` as its
  ``session_meta``'s ``originator`` (Codex's exec events and its rollout share no id);
- a Seedline brief in front of an instruction is recognised by its framing (or, in
  a brief on its own, by its preamble), so it is never taken for a person's words.
"""

from __future__ import annotations

import hashlib
import re

from seedline_contracts.timeline import MAX_ENTRY_ID_CHARS

from ..framing import split_background

CLAUDE_RUNNER_ENTRYPOINT = "seedline-runner"
CODEX_RUNNER_ORIGINATOR = "seedline_runner"
RUNNER_ENV = {
    "claude": {"CLAUDE_CODE_ENTRYPOINT": CLAUDE_RUNNER_ENTRYPOINT},
    "codex": {"CODEX_INTERNAL_ORIGINATOR_OVERRIDE": CODEX_RUNNER_ORIGINATOR},
}
# The first words of every brief the seed-composer writes (seedline_core.brief_layout).
BRIEF_PREAMBLE_START = "The previous conversation on this repo has ended and is not available."

_PLAIN_ID = re.compile(r"[^\s\x00-\x1f\x7f]+")


def transcript_entry_id(*parts: str | int) -> str:
    """An entry id made of ``parts``; a digest of them when they do not fit one."""
    plain = ":".join(str(part) for part in parts)
    if len(plain) <= MAX_ENTRY_ID_CHARS and _PLAIN_ID.fullmatch(plain):
        return plain
    return f"{parts[0]}-" + hashlib.sha256(plain.encode("utf-8")).hexdigest()


def is_seedline_brief(text: str) -> bool:
    """A prompt that carries a Seedline brief: framed before an instruction, or bare."""
    brief, _ = split_background(text)
    return brief is not None or text.lstrip().startswith(BRIEF_PREAMBLE_START)
