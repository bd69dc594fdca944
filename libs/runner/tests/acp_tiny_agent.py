"""A tiny Agent Client Protocol agent, written with the SDK, for fast engine tests.

Run as ``python acp_tiny_agent.py STORE_DIR [load|resume|none]``. It keeps each
conversation in ``STORE_DIR/<id>.json`` (the prompts it was given and its replies),
so a test can wipe, cut or move that record, and it appends every prompt it receives
to ``STORE_DIR/prompts.log`` so a test can see what reached it. It replies
``echo: <prompt>`` in two chunks. A prompt holding ``TOOL`` first asks permission
and runs a pretend tool (with a plan); one holding ``SLOW`` waits until cancelled.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
    plan_entry,
)
from acp.schema import (
    AgentCapabilities,
    PermissionOption,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionResumeCapabilities,
    ToolCallUpdate,
)


class TinyAgent:
    def __init__(self, store: Path, mode: str) -> None:
        self.store = store
        self.mode = mode
        self.conn: Any = None
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    def _path(self, session_id: str) -> Path:
        return self.store / f"{session_id}.json"

    def _turns(self, session_id: str) -> list[dict[str, str]]:
        return json.loads(self._path(session_id).read_text())

    def _keep(self, session_id: str, turns: list[dict[str, str]]) -> None:
        self._path(session_id).write_text(json.dumps(turns))

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = AgentCapabilities(
            load_session=self.mode == "load",
            session_capabilities=SessionCapabilities(
                resume=SessionResumeCapabilities() if self.mode == "resume" else None
            ),
        )
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=caps)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        self._keep(session_id, [])
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        if not self._path(session_id).is_file():
            raise RequestError.resource_not_found(session_id)
        for turn in self._turns(session_id):
            await self.conn.session_update(
                session_id=session_id, update=update_user_message_text(turn["prompt"])
            )
            await self.conn.session_update(
                session_id=session_id, update=update_agent_message_text(turn["reply"])
            )
        return LoadSessionResponse()

    async def resume_session(self, cwd: str, session_id: str, **kwargs: Any) -> ResumeSessionResponse:
        if not self._path(session_id).is_file():
            raise RequestError.resource_not_found(session_id)
        return ResumeSessionResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        with (self.store / "prompts.log").open("a") as log:
            log.write(json.dumps({"session": session_id, "prompt": text}) + "\n")
        cancelled = self.cancelled.setdefault(session_id, asyncio.Event())
        cancelled.clear()
        if "TOOL" in text:
            await self.conn.session_update(
                session_id=session_id,
                update=update_plan([plan_entry("look around", status="in_progress")]),
            )
            await self.conn.session_update(
                session_id=session_id,
                update=start_tool_call("t1", "list files", kind="execute", raw_input={"cmd": "ls"}),
            )
            answer = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id="t1", title="list files"),
                options=[
                    PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
                ],
            )
            allowed = getattr(answer.outcome, "option_id", None) == "yes"
            await self.conn.session_update(
                session_id=session_id,
                update=update_tool_call(
                    "t1",
                    status="completed" if allowed else "failed",
                    content=[tool_content(text_block("a.txt b.txt" if allowed else "not allowed"))],
                ),
            )
        if "SLOW" in text:
            await self.conn.session_update(
                session_id=session_id, update=update_agent_message_text("working on it")
            )
            await cancelled.wait()
            return PromptResponse(stop_reason="cancelled")
        reply = f"echo: {text}"
        half = len(reply) // 2
        for piece in (reply[:half], reply[half:]):
            await self.conn.session_update(
                session_id=session_id, update=update_agent_message_text(piece)
            )
        turns = self._turns(session_id) if self._path(session_id).is_file() else []
        self._keep(session_id, [*turns, {"prompt": text, "reply": reply}])
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def main() -> None:
    store = Path(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "load"
    store.mkdir(parents=True, exist_ok=True)
    asyncio.run(run_agent(TinyAgent(store, mode), use_unstable_protocol=True))


if __name__ == "__main__":
    main()
