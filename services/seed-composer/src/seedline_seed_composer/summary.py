"""An optional summary of what a brief leaves out, from any OpenAI-compatible chat endpoint.

Off unless SEEDLINE_BRIEF_SUMMARY_URL is set. The endpoint is asked once per brief;
whatever goes wrong (unreachable, an error status, no text, too slow), the brief is
offered without a summary and the failure is logged: a summary never fails an open.
"""

from __future__ import annotations

import os
import re
from typing import Any, Protocol

import httpx

from seedline_core.brief import SUMMARY_MAX_CHARS, BriefRow
from seedline_platform.logging import get_logger
from seedline_platform.settings import Settings

log = get_logger(__name__)

# Each left-out entry sent is cut to its head (its tail for terminal output), and the
# request holds at most this much entry text.
INPUT_ENTRY_CHARS = 1_000
INPUT_CHARS = 40_000
_SURROGATE = re.compile("[\ud800-\udfff]")

INSTRUCTIONS = (
    "You summarise entries of a coding agent's timeline that a brief for a new engine "
    "leaves out. Say in at most 250 words what the person asked for, what was done, what "
    "was decided and what was left open, in plain sentences, oldest first. Say only what "
    "the entries show; do not guess or add advice."
)


class Summarizer(Protocol):
    model: str

    async def summarize(self, newest_first: list[BriefRow]) -> str | None:
        """A summary of these entries, or None when none could be had."""


def _entry_text(row: BriefRow) -> str:
    content = row.content
    if len(content) > INPUT_ENTRY_CHARS:
        tail = row.kind == "terminal"
        content = content[-INPUT_ENTRY_CHARS:] if tail else content[:INPUT_ENTRY_CHARS]
    return f"[{row.seq} {row.kind} {row.at}]\n{content}\n"


def request_body(model: str, newest_first: list[BriefRow]) -> dict[str, Any]:
    """The chat completions request: the newest entries that fit, shown oldest first."""
    shown: list[str] = []
    room = INPUT_CHARS
    for row in newest_first:
        text = _entry_text(row)
        if len(text) > room:
            break
        shown.append(text)
        room -= len(text)
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": "".join(reversed(shown))},
        ],
    }


def _reply_text(body: Any) -> str | None:
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    if not isinstance(content, str) or not content.strip():
        return None
    return _SURROGATE.sub("\ufffd", content.strip())[:SUMMARY_MAX_CHARS]


class ChatSummarizer:
    def __init__(self, url: str, model: str, key_env: str | None, timeout: float) -> None:
        self.model = model
        self._url = url.rstrip("/") + "/chat/completions"
        self._key_env = key_env
        self._timeout = timeout

    async def summarize(self, newest_first: list[BriefRow]) -> str | None:
        key = os.environ.get(self._key_env) if self._key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.post(
                    self._url, json=request_body(self.model, newest_first), headers=headers
                )
            if response.status_code >= 400:
                log.warning("brief_summary_failed", url=self._url, status=response.status_code)
                return None
            text = _reply_text(response.json())
        except Exception as exc:  # whatever the endpoint does, the brief goes out without it
            log.warning("brief_summary_failed", url=self._url, error=type(exc).__name__)
            return None
        if text is None:
            log.warning("brief_summary_failed", url=self._url, error="no text in the answer")
        return text


def summarizer_from(settings: Settings) -> ChatSummarizer | None:
    if not settings.brief_summary_url:
        return None
    return ChatSummarizer(
        settings.brief_summary_url,
        settings.brief_summary_model,
        settings.brief_summary_key_env,
        settings.brief_summary_timeout_seconds,
    )
