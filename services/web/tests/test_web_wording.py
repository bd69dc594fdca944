"""Every sentence the web process writes itself follows CONTRACT.md 3.3: tool
descriptions, parameter descriptions, error messages, receipts and page text."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from seedline_contracts import CONTRACT_VERSION
from seedline_core.notices import wording_violations
from seedline_web import errors, limits, mcp_text, publishing
from seedline_web.auth import Gate
from seedline_web.console import overview, render
from seedline_web.mcp_tools import INSTRUCTIONS, build_server
from seedline_web.tenant import Machine


def _strings(schema) -> list[str]:
    found = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("description", "title") and isinstance(value, str):
                found.append(value)
            else:
                found += _strings(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _strings(value)
    return found


def test_every_tool_description_and_parameter_follows_the_wording_rules():
    async def no_tenant():
        raise AssertionError("not called")

    tools = asyncio.run(build_server(no_tenant).list_tools())
    assert len(tools) == 9
    texts = [INSTRUCTIONS]
    for tool in tools:
        assert "session" not in tool.name
        texts += [tool.description] + _strings(tool.input_schema) + list(
            tool.input_schema.get("properties", {}))
    for text in texts:
        assert not wording_violations(text), text


MACHINES = [Machine("mac-mini-1", "Mac mini", ["claude", "codex"], [], True),
            Machine("linux-1", "Linux box", ["scripted"], [], False)]


def error_texts() -> list[str]:
    texts = [
        errors.not_found().message, errors.unavailable().message,
        errors.unauthorized().message, errors.other_instance("bd43f4de").message,
        limits.body_too_large(4_194_304).message,
        mcp_text.NO_MACHINE_ONLINE, mcp_text.NEVER_WORKED_ON.format(repo="apps/x"),
        mcp_text.MESSAGE_TOO_LONG.format(chars=200_000), mcp_text.EMPTY_MESSAGE,
        mcp_text.choose_machine(MACHINES), mcp_text.choose_engine("mac-mini-1", ["a", "b"]),
        mcp_text.no_engine("mac-mini-1"), mcp_text.engines_unknown("mac-mini-1"),
        render.login("That token is not known or was revoked."),
    ]
    body = publishing.EntryBody("e", "apps/x", "c", "chat_user", "hi")
    for bad in (dict(entry_id="has space"), dict(repo=""), dict(session_id="a\x00b"),
                dict(kind="speech"), dict(engine=""), dict(instance_id="someone-else")):
        with pytest.raises(errors.WebError) as caught:
            publishing.to_entry(_with(body, **bad), "bd43f4de")
        texts.append(caught.value.message)
    with pytest.raises(errors.WebError) as caught:
        publishing.check_payload([publishing.to_entry(_with(body, content="x" * 2000), "i")], 1000)
    texts.append(caught.value.message)
    return texts


def _with(body, **changes):
    import msgspec

    return msgspec.structs.replace(body, **changes)


def test_every_error_and_refusal_follows_the_wording_rules():
    for text in error_texts():
        assert text and not wording_violations(text), text


def test_receipts_and_the_console_follow_the_wording_rules():
    entry = publishing.to_entry(publishing.EntryBody("e", "apps/x", "c", "terminal",
                                                     "y" * 150_000), "i")
    (receipt,) = publishing.receipts([entry], [(7, False)])
    assert receipt.cut_to == 100_000 and not wording_violations(receipt.message)
    (duplicate,) = publishing.receipts([entry], [(7, True)])
    assert not wording_violations(duplicate.message)
    for text in (mcp_text.machines_text([]), mcp_text.conversations_text([], []),
                 mcp_text.stop_text("csess_1", True), mcp_text.stop_text("csess_1", False),
                 mcp_text.timeline_text("apps/x", [], False, {}),
                 render.machines_section([]), overview.live_section([], {}, NOW),
                 overview.repos_section([], overview.Filters(), {}, NOW, 0),
                 overview.rejected_section([], NOW), render.timeline([], [], {}, NOW)):
        assert not wording_violations(text), text


NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


class _NoTokens:
    async def instance_of(self, token: str) -> None:
        return None


def test_the_gate_refuses_in_words_that_follow_the_rules():
    gate = Gate(_NoTokens(), backend=None)
    for token in (None, "", "slt_unknown"):
        with pytest.raises(errors.WebError) as caught:
            asyncio.run(gate.instance_for(token))
        assert caught.value.code == "unauthorized" and caught.value.status == 401
        assert not wording_violations(caught.value.message)


def test_the_mcp_server_names_its_version_and_each_tool_its_effects_and_output():
    async def no_tenant():
        raise AssertionError("not called")

    server = build_server(no_tenant)
    tools = {t.name: t for t in asyncio.run(server.list_tools())}
    assert server.version == CONTRACT_VERSION
    for tool in tools.values():
        hints = tool.annotations
        assert hints is not None and None not in (
            hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint), tool.name
        assert set(tool.output_schema["properties"]) == {"text", "data"}, tool.name
    assert tools["read_timeline"].annotations.read_only_hint is True
    assert tools["open_conversation"].annotations.read_only_hint is False
    assert tools["stop_conversation"].annotations.destructive_hint is True
    fresh = tools["open_conversation"].input_schema["properties"]["fresh"]["description"]
    assert "no brief" in fresh


def test_a_tool_answers_with_structured_content_beside_its_text():
    class OneMachine:
        async def machines(self):
            return MACHINES[:1]

    async def tenant_of():
        return OneMachine()

    result = asyncio.run(build_server(tenant_of).call_tool("list_machines", {}))
    assert result.structured_content["data"]["machines"][0]["node_id"] == "mac-mini-1"
    assert result.structured_content["text"] == result.content[0].text
    assert "Mac mini" in result.content[0].text
