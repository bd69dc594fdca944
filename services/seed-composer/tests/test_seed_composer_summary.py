"""The optional summary of what a brief leaves out, against a local chat completions stand-in."""

from __future__ import annotations

import hashlib

import pytest
import structlog

from seedline_contracts.codec import decode, encode
from seedline_contracts.events import SeedComposed
from seedline_platform.settings import Settings, SettingsError
from seedline_seed_composer.brief_of_decision import brief_stats, compose_for, recompose, summary_record
from seedline_seed_composer.summary import ChatSummarizer, summarizer_from

LABEL = "written by the model stand-in-coder; it may be wrong or miss what mattered =="


def summarizer(standin, timeout: float = 5.0) -> ChatSummarizer:
    return ChatSummarizer(standin.base_url, "stand-in-coder", "STAND_IN_KEY", timeout)


async def test_a_summary_is_shown_labelled_and_recorded_with_its_model_and_digest(
    kit, chat_standin, monkeypatch
) -> None:
    monkeypatch.setenv("STAND_IN_KEY", "sk-test")
    rows = kit.agent_run(400)
    decided = kit.decision(401, 401)
    plain = await compose_for(decided, kit.reader_of(rows))
    brief = await compose_for(decided, kit.reader_of(rows), summarizer=summarizer(chat_standin))
    assert plain is not None and brief is not None
    assert LABEL in brief.text and chat_standin.answer in brief.text
    assert brief.entries == plain.entries and brief.rows == plain.rows
    record = summary_record(brief)
    assert record is not None and record.model == "stand-in-coder"
    assert record.text == chat_standin.answer
    assert record.sha256 == hashlib.sha256(chat_standin.answer.encode()).hexdigest()
    # The model was sent what the brief leaves out: the newest 200 entries older than it.
    (sent,) = chat_standin.requests
    assert sent["model"] == "stand-in-coder"
    assert chat_standin.headers[0]["authorization"] == "Bearer sk-test"
    assert (record.entries, record.last_seq) == (200, plain.oldest_in_record - 1)
    user = sent["messages"][-1]["content"]
    assert f"[{record.last_seq} " in user and f"[{plain.oldest_in_record} " not in user
    assert "Add castling" not in user  # the instructions part holds it already


async def test_a_replay_reuses_the_recorded_summary_and_asks_no_model(kit, chat_standin) -> None:
    rows = kit.agent_run(400)
    decided = kit.decision(401, 401)
    first = await compose_for(decided, kit.reader_of(rows), summarizer=summarizer(chat_standin))
    event = SeedComposed(session_id="csess_new", at=kit.AT, brief=brief_stats(first),
                         plan=decided.plan, text=first.text, summary=summary_record(first))
    recorded = decode(encode(event), SeedComposed)
    chat_standin.answer = "A different summary, if the model were asked again."
    replayed = await recompose(decided, recorded, kit.reader_of(rows))
    assert replayed is not None and replayed.sha256 == first.sha256
    assert len(chat_standin.requests) == 1


@pytest.mark.parametrize("mode", ["error", "not_json", "no_text", "slow", "unreachable"])
async def test_a_failing_endpoint_gives_the_brief_without_a_summary(
    kit, chat_standin, mode
) -> None:
    chat_standin.mode = mode
    if mode == "unreachable":
        chat_standin.base_url = "http://127.0.0.1:9/v1"
    rows = kit.agent_run(400)
    decided = kit.decision(401, 401)
    plain = await compose_for(decided, kit.reader_of(rows))
    with structlog.testing.capture_logs() as logs:
        brief = await compose_for(
            decided, kit.reader_of(rows), summarizer=summarizer(chat_standin, timeout=1.0)
        )
    assert brief is not None and brief.text == plain.text and brief.summary is None
    assert [log["event"] for log in logs] == ["brief_summary_failed"]


async def test_no_summary_is_asked_for_when_nothing_is_left_out(kit, chat_standin) -> None:
    rows = kit.agent_run(10)
    brief = await compose_for(kit.decision(11, 11), kit.reader_of(rows),
                              summarizer=summarizer(chat_standin))
    assert brief is not None and brief.summary is None and chat_standin.requests == []


def test_the_summary_is_off_unless_its_url_is_set() -> None:
    assert summarizer_from(Settings.from_env({})) is None
    on = summarizer_from(Settings.from_env({
        "SEEDLINE_BRIEF_SUMMARY_URL": "http://127.0.0.1:8000/v1",
        "SEEDLINE_BRIEF_SUMMARY_MODEL": "qwen",
    }))
    assert on is not None and on.model == "qwen"


@pytest.mark.parametrize("env, named", [
    ({"SEEDLINE_BRIEF_SUMMARY_URL": "127.0.0.1:8000"}, "SEEDLINE_BRIEF_SUMMARY_URL"),
    ({"SEEDLINE_BRIEF_SUMMARY_URL": "http://x/v1"}, "SEEDLINE_BRIEF_SUMMARY_MODEL"),
    ({"SEEDLINE_BRIEF_SUMMARY_TIMEOUT_SECONDS": "soon"}, "SEEDLINE_BRIEF_SUMMARY_TIMEOUT"),
])
def test_summary_settings_that_cannot_work_are_refused_by_name(env, named) -> None:
    with pytest.raises(SettingsError, match=named):
        Settings.from_env(env)
