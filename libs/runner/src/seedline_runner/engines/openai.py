"""Any OpenAI-compatible chat completions endpoint, as a stateless engine.

The endpoint keeps nothing between requests: every turn sends the whole
conversation from the runner's store, which is what gives this engine
multi-turn memory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
from seedline_contracts.runner import ResumeExpect

from ..store import Conversation, SeedMessage
from .base import Emit, EngineError, EngineOutput, StartResult, TurnResult

_ERROR_DETAIL_CHARS = 300


def chat_message(message: SeedMessage) -> dict[str, Any]:
    body: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_call_id is not None:
        body["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        body["tool_calls"] = message.tool_calls
    return body


def request_body(
    model: str, system_prompt: str | None, conversation: Conversation, prompt: str
) -> dict[str, Any]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages += [chat_message(m) for m in conversation.messages]
    messages.append({"role": "user", "content": prompt})
    return {"model": model, "messages": messages}


def reply_text(body: Any) -> str:
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise EngineError("The chat endpoint answered without a message.") from None
    if content is None:
        return ""
    if not isinstance(content, str):
        raise EngineError("The chat endpoint answered with a message that is not text.")
    return content


class OpenAIChatEngine:
    stateless = True

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        system_prompt: str | None = None,
        timeout: float = 300.0,
        client: httpx.AsyncClient | None = None,
        name: str = "openai",
    ) -> None:
        self.name = name
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._api_key_env = api_key_env
        self._system_prompt = system_prompt
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout)

    async def start(
        self,
        conversation_id: str,
        resume_key: str | None,
        workdir: Path | None = None,
        expect: ResumeExpect | None = None,
    ) -> StartResult:
        # It keeps nothing of its own: whether the runner's store holds the
        # conversation is the runner's to prove.
        return StartResult(resumed=False, engine_session_id=None)

    async def run_turn(self, conversation: Conversation, prompt: str, emit: Emit) -> TurnResult:
        body = request_body(self._model, self._system_prompt, conversation, prompt)
        try:
            response = await self._client.post(self._url, json=body, headers=self._headers())
        except httpx.HTTPError as error:
            raise EngineError(
                f"The chat endpoint at {self._url} could not be reached: {error}."
            ) from error
        if response.status_code >= 400:
            detail = response.text[:_ERROR_DETAIL_CHARS].strip()
            raise EngineError(f"The chat endpoint answered {response.status_code}: {detail}")
        try:
            answer = response.json()
        except ValueError:
            raise EngineError(
                "The chat endpoint answered with something other than JSON."
            ) from None
        text = reply_text(answer)
        if text:
            # The completed response is the whole turn: its text ends it.
            await emit(EngineOutput("chat_assistant", text, ends_turn=True))
        return TurnResult()

    async def end(self, conversation_id: str) -> None:
        return None

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self._api_key_env) if self._api_key_env else None
        return {"Authorization": f"Bearer {key}"} if key else {}
