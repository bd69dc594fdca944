"""A local stand-in for an OpenAI-compatible chat completions endpoint, and brief fixtures."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from seedline_contracts.events import ContinuityDecided, LaunchPlan
from seedline_contracts.sessions import Continuity
from seedline_core.brief import BriefRow
from seedline_seed_composer.reader import RowsReader

INSTANCE, REPO = "bd43f4de", "apps/chess-academy"
AT = "2026-08-17T10:00:00Z"


@dataclass
class ChatStandIn:
    """Answers POST /v1/chat/completions the way `mode` says; keeps what it was sent."""

    base_url: str = ""
    mode: str = "ok"  # ok, error, not_json, no_text, slow
    answer: str = "The person asked for castling; the move generator was changed."
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = (await reader.readline()).decode()
            headers: dict[str, str] = {}
            while (line := (await reader.readline()).decode().strip()) != "":
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if request_line.split(" ")[:2] != ["POST", "/v1/chat/completions"]:
                await self._send(writer, 404, b"{}")
                return
            self.requests.append(json.loads(body))
            self.headers.append(headers)
            if self.mode == "slow":
                await asyncio.sleep(3)
            if self.mode == "error":
                await self._send(writer, 500, b'{"error": {"message": "overloaded"}}')
            elif self.mode == "not_json":
                await self._send(writer, 200, b"<html>gateway</html>")
            else:
                content = self.answer if self.mode == "ok" else None
                message = {"role": "assistant", "content": content}
                reply = {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}
                await self._send(writer, 200, json.dumps(reply).encode())
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, status: int, data: bytes) -> None:
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data
        )
        await writer.drain()


@pytest.fixture
async def chat_standin() -> AsyncIterator[ChatStandIn]:
    standin = ChatStandIn()
    server = await asyncio.start_server(standin.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    standin.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield standin
    finally:
        server.close()


def row(seq: int, content: str, kind: str = "terminal") -> BriefRow:
    return BriefRow(seq=seq, session_id="csess_old", kind=kind, content=content, at=AT,
                    engine=None if kind == "chat_user" else "claude")


def agent_run(tool_rows: int, task: str = "Add castling to the move generator.") -> list[BriefRow]:
    """One instruction, then a long run of commands and their output."""
    rows = [row(1, task, "chat_user")]
    for seq in range(2, tool_rows + 2):
        kind = "command" if seq % 2 else "terminal"
        rows.append(row(seq, f"{kind} {seq} " + "x" * 300, kind))
    return rows


class RecordingReader(RowsReader):
    """Rows given up front; records every read so tests can assert what was read."""

    def __init__(self, rows: list[tuple[str, str, BriefRow]]) -> None:
        super().__init__(rows)
        self.calls: list[tuple[str, str, int, int]] = []
        self.kind_calls: list[tuple[str, str, int, int, str]] = []
        self.counts: list[tuple[str, str, int, str]] = []

    async def newest_first(self, instance_id, repo, until_seq, limit, kind=None):
        if kind is None:
            self.calls.append((instance_id, repo, until_seq, limit))
        else:
            self.kind_calls.append((instance_id, repo, until_seq, limit, kind))
        return await super().newest_first(instance_id, repo, until_seq, limit, kind)

    async def count(self, instance_id, repo, until_seq, kind):
        self.counts.append((instance_id, repo, until_seq, kind))
        return await super().count(instance_id, repo, until_seq, kind)


def reader_of(rows: list[BriefRow]) -> RecordingReader:
    return RecordingReader([(INSTANCE, REPO, r) for r in rows])


def decision(until_seq: int | None, entries_upto: int, engine: str = "claude",
             clean_slate: bool = False, seed_source: str | None = "timeline") -> ContinuityDecided:
    continuity = Continuity(mode="fresh", resume_from=None, reason_code="no_previous",
                            reason="no earlier conversation on this repo")
    plan = LaunchPlan(instance_id=INSTANCE, repo=REPO, engine=engine, node_id="mac-mini-1",
                      continuity=continuity, resume_key=None, instruction=None,
                      clean_slate=clean_slate)
    return ContinuityDecided(session_id="csess_new", at=AT, continuity=continuity,
                             seed_source=seed_source, until_seq=until_seq,
                             entries_upto=entries_upto, plan=plan)


@pytest.fixture
def kit() -> SimpleNamespace:
    """The helpers above, for test modules (they cannot import this file)."""
    return SimpleNamespace(AT=AT, row=row, agent_run=agent_run, reader_of=reader_of,
                           decision=decision)
