"""The web process's pure parts: choosing a machine, placing opens in the timeline,
the body limit, and which rejected records an instance may see."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from seedline_contracts.sessions import BriefStats, Continuity, NoticeBody, OpenReply
from seedline_contracts.timeline import RejectedInput, TimelineRow
from seedline_web.choosing import Previous, choose
from seedline_web.console import overview, render
from seedline_web.errors import WebError
from seedline_web.limits import BodyLimit
from seedline_web.notifications import sse_event
from seedline_web.opens import OpenRecord
from seedline_web.tenant import Machine, names_instance

MAC = Machine("mac-mini-1", "Mac mini", ["claude", "codex"], [], True)
BOX = Machine("linux-1", "Linux box", ["scripted"], [], True)


# -- choosing where an MCP open runs -------------------------------------------------------


def test_the_repos_last_machine_and_engine_are_the_default():
    previous = Previous("csess_1", "mac-mini-1", "codex", live=False)
    assert choose(None, None, previous, [MAC, BOX]) == ("mac-mini-1", "codex")
    assert choose("linux-1", None, previous, [MAC, BOX]) == ("linux-1", "scripted")
    assert choose(None, "claude", previous, [MAC, BOX]) == ("mac-mini-1", "claude")


def test_without_history_the_only_machine_online_and_its_only_engine_are_used():
    assert choose(None, None, None, [BOX]) == ("linux-1", "scripted")


@pytest.mark.parametrize("machine, engine, online, code, words", [
    (None, None, [], "runner_offline", "No machine is online"),
    (None, None, [MAC, BOX], "invalid_request", "Several machines are online"),
    ("mac-mini-1", None, [MAC], "invalid_request", "offers several engines (claude, codex)"),
    ("gone-1", None, [MAC], "runner_offline", "gone-1 is not online"),
])
def test_an_open_it_cannot_place_says_what_to_name(machine, engine, online, code, words):
    with pytest.raises(WebError) as caught:
        choose(machine, engine, None, online)
    assert caught.value.code == code and words in caught.value.message


# -- the console places each open where it was decided -------------------------------------


def row(seq: int, session: str) -> TimelineRow:
    return TimelineRow(seq, f"e{seq}", session, "chat_user", f"entry {seq}", "2026-12-01T10:00:00Z",
                       None, None)


NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def opened(seq: int, session: str, until_seq: int | None, reason: str) -> render.OpenView:
    reply = OpenReply(session, "mac-mini-1", False, True, "briefed",
                      Continuity("fresh", None, "past_window", reason),
                      BriefStats(3, 81, 0, until_seq or 0, "ab" * 32),
                      NoticeBody("chat", f"console notice {reason}", "mcp", "warning"))
    record = OpenRecord(seq, session, "apps/x", "mac-mini-1", "scripted", "2026-12-01T10:00:00Z",
                        None, until_seq, reply, None, None, None)
    return render.OpenView(record, "the brief <text> & all")


def test_each_open_sits_after_the_newest_entry_its_decision_saw():
    rows = [row(1, "old"), row(2, "old"), row(3, "a"), row(4, "a"), row(5, "b")]
    html = render.timeline(rows, [opened(10, "a", 2, "first"), opened(20, "b", 4, "second")],
                           {"mac-mini-1": "Mac mini"}, NOW)
    order = [html.index(mark) for mark in (
        'data-conversation="old"', "entry 2", "console notice first", "entry 3", "entry 4",
        "console notice second", "entry 5")]
    assert order == sorted(order)
    # One boundary per conversation: the open's card begins it, its entries follow.
    assert html.count('class="boundary"') == 3
    assert "the brief &lt;text&gt; &amp; all" in html
    assert "Opened on Mac mini" in html


def test_an_open_after_the_last_entry_comes_last_and_a_failed_open_says_why():
    failed = OpenRecord(30, "c", "apps/x", "gone-1", "scripted", "2026-12-01T10:00:00Z", None, 5,
                        None, "runner_offline", "Your Linux box is offline.", None)
    html = render.timeline([row(5, "b")], [render.OpenView(failed, None)], {}, NOW)
    assert html.index("entry 5") < html.index("The open failed: Your Linux box is offline.")


def test_data_is_escaped_everywhere():
    html = render.timeline([row(1, "<script>")], [], {}, NOW)
    assert "<script>" not in html and "&lt;script&gt;" in html


# -- the body limit ---------------------------------------------------------------------------


async def _echo(request):
    return PlainTextResponse(str(len(await request.body())))


def _call(app, body: bytes, with_length: bool) -> tuple[int, bytes]:
    sent: list[dict] = []
    chunks = [body[i:i + 1000] for i in range(0, len(body), 1000)] or [b""]

    async def receive():
        chunk = chunks.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message):
        sent.append(message)

    headers = [(b"content-length", str(len(body)).encode())] if with_length else []
    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers,
             "query_string": b"", "http_version": "1.1", "scheme": "http", "server": ("x", 80),
             "root_path": ""}
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@pytest.mark.parametrize("with_length", [True, False])
def test_a_body_over_the_limit_is_413_naming_it_and_one_under_it_passes(with_length):
    app = BodyLimit(Starlette(routes=[Route("/", _echo, methods=["POST"])]), limit=5000)
    assert _call(app, b"x" * 5000, with_length) == (200, b"5000")
    status, body = _call(app, b"x" * 5001, with_length)
    assert status == 413
    error = json.loads(body)["error"]
    assert error["code"] == "payload_too_large" and "5,000 bytes" in error["message"]


# -- rejected records and notices -------------------------------------------------------------


def rejected(raw: str, encoding: str = "utf-8") -> RejectedInput:
    return RejectedInput("invalid_entry", "why", raw, encoding, "2026-12-01T10:00:00Z", 1)


def test_a_rejected_record_belongs_to_the_instance_its_raw_json_names():
    assert names_instance(rejected(json.dumps({"instance_id": "a", "kind": "x"})), "a")
    assert not names_instance(rejected(json.dumps({"instance_id": "b"})), "a")
    assert not names_instance(rejected("not json at all"), "a")
    assert not names_instance(rejected("eyJpbnN0YW5jZV9pZCI6ICJhIn0=", "base64"), "a")
    assert not names_instance(rejected("[" * 100_000), "a")


def test_an_event_keeps_its_framing_whatever_the_notice_holds():
    text = sse_event("stopped_idle\ndata: forged", {"text": "two\nlines"})
    assert text.splitlines() == ["event: stopped_idledataforged",
                                 'data: {"text": "two\\nlines"}', ""]


def test_a_receipt_of_a_brief_not_given_says_so_on_the_console_and_in_mcp():
    import dataclasses

    from msgspec.structs import replace

    from seedline_contracts.sessions import BriefGetReply
    from seedline_core import notices
    from seedline_web import mcp_text

    given = opened(10, "a", 2, "first")
    reply = replace(given.record.reply, resumed=True, seeded=False, outcome="resumed",
                    brief=replace(given.record.reply.brief, spent=False))
    resumed = render.OpenView(OpenRecord(*[*given.record.__dict__.values()][:8], reply,
                                         None, None, None), "the brief")
    page = render.timeline([row(1, "a")], [resumed], {}, NOW)
    assert notices.BRIEF_NOT_GIVEN in page
    assert notices.BRIEF_NOT_GIVEN not in render.timeline([row(1, "a")], [given], {}, NOW)
    text = mcp_text.open_text(reply, "apps/x", [])
    assert f"Brief receipt ({notices.BRIEF_NOT_GIVEN})" in text
    # Opened with no message: the brief waits for the first one, and if the conversation
    # stops first it was never given.
    held = replace(given.record.reply, brief=replace(given.record.reply.brief, spent=False))
    for ended, words in ((False, notices.BRIEF_NOT_YET_GIVEN),
                         (True, notices.BRIEF_NEVER_GIVEN)):
        view = render.OpenView(dataclasses.replace(given.record, reply=held, ended=ended),
                               "the brief")
        assert words in render.timeline([row(1, "a")], [view], {}, NOW)
    brief = BriefGetReply("the brief", 3, 81, 0, 2, "ab" * 32)
    for told in (notices.BRIEF_GIVEN, notices.BRIEF_NOT_GIVEN, None):
        shown = mcp_text.brief_text("csess_a", brief, told)
        assert "exactly as the engine read it" not in shown and "read it" not in shown
        assert (notices.BRIEF_NOT_GIVEN in shown) is (told == notices.BRIEF_NOT_GIVEN)


def test_the_live_list_shows_each_open_s_outcome_as_the_machine_finally_had_it():
    from seedline_contracts.sessions import LiveConversation
    from seedline_web import mcp_text

    live = [LiveConversation("csess_a", "inst", "apps/x", "mac", "claude", "t0", "t1",
                             outcome="resume_unconfirmed_briefed")]
    assert "outcome resume_unconfirmed_briefed" in mcp_text.conversations_text(live, [])
    assert ">resume_unconfirmed_briefed<" in overview.live_section(live, {}, NOW)


# -- instance names a token may be created for ------------------------------------------------


@pytest.mark.parametrize("name", [">", "*", "demo.>", "demo.*", "demo ", " demo", "a b", "a\tb",
                                  "a\x01b", ""])
def test_a_token_is_never_created_for_a_name_outside_the_token_rules(name):
    from seedline_platform.settings import Settings
    from seedline_web.token_admin import TokenAdminError, create_token, instance_name_problem

    assert instance_name_problem(name) is not None
    # Refused before any database is opened: the settings point nowhere that answers.
    settings = Settings(database_url="postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(TokenAdminError) as caught:
        asyncio.run(create_token(settings, name, ""))
    assert caught.value.args[0].startswith("--instance ")


@pytest.mark.parametrize("name", ["bd43f4de", "demo", "team-a_2", "apps.example"])
def test_ordinary_instance_names_are_accepted(name):
    from seedline_web.token_admin import instance_name_problem

    assert instance_name_problem(name) is None


# -- a conversation's history on the console -------------------------------------------------


def test_the_history_merges_events_entries_and_notices_in_time_order():
    from datetime import datetime, timezone

    from seedline_platform.notices import StoredNotice
    from seedline_web.console import history

    from seedline_contracts.events import OpenRequested, Stopped

    from seedline_platform.lifecycle_events import conversation_record

    events = [(1, OpenRequested(session_id="c", at="2026-12-01T10:00:00Z", instance_id="i",
                                repo="r", engine="scripted", node_id="mac", request_id=None,
                                force_fresh=False, clean_slate=False, has_instruction=False)),
              (4, Stopped(session_id="c", at="2026-12-01T10:05:00Z", reason="requested"))]
    entries = [row(2, "c"), TimelineRow(3, "e3", "c", "terminal", "y" * 5000,
                                        "2026-12-01T10:01:00Z", None, None)]
    notices = [StoredNotice(9, {"kind": "stopped_idle", "session_id": "c", "text": "Idle <b>",
                                "at": "2026-12-01T10:06:00Z"})]
    now = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    items = history.history(conversation_record(events), entries, notices, {"mac": "Mac mini"},
                            now)
    assert [(i.source, i.seq) for i in items] == [
        ("event", 1), ("entry", 2), ("entry", 3), ("event", 4), ("notice", 9)]
    html = "".join(i.html for i in items)
    assert "Open asked for on Mac mini" in html and "Idle &lt;b&gt;" in html
    assert 'title="2026-12-01 10:00:00 UTC">2 hours ago</time>' in html
    # Each item carries its id and a key that sorts as the page does (live.py inserts by it).
    assert [i.id for i in items] == ["ev-1", "en-2", "en-3", "ev-4", "no-9"]
    assert [i.key for i in items] == sorted(i.key for i in items)
    assert "show all 5,000 characters" in html  # long content is folded


# -- the overview: found, paged, in the order of the newest work ---------------------------


def _repos(n: int):
    from seedline_contracts.sessions import LiveConversation
    from seedline_web.opens import RepoOpen

    counts = {f"apps/r{i:03d}": i for i in range(n)}
    opened_ = {f"apps/r{i:03d}": RepoOpen(f"c{i}", "mac" if i % 2 else "linux", "scripted",
                                          f"2026-12-01T{i % 24:02d}:00:00Z")
               for i in range(0, n, 3)}
    live = [LiveConversation("c9", "inst", "apps/r009", "mac", "scripted", "t0",
                             "2026-12-01T11:30:00Z")]
    return overview.repo_rows(counts, opened_, live)


def test_the_overview_pages_finds_by_name_machine_and_state_and_says_when_nothing_matches():
    rows = _repos(120)
    labels = {"mac": "Mac mini", "linux": "Linux box"}
    assert rows[0].repo == "apps/r009"  # live first, then the newest work
    first = overview.repos_section(rows, overview.Filters(), labels, NOW, len(rows))
    assert "Repos 1–50 of 120 (1 live)" in first and 'rel="next"' in first
    assert "Page 1 of 3" in first and first.count("<tr>") == 51
    last = overview.repos_section(rows, overview.Filters(page=3), labels, NOW, len(rows))
    assert "Repos 101–120 of 120" in last and 'rel="next"' not in last
    mac = overview.matching(rows, overview.Filters(machine="mac"))
    assert mac and all(r.node_id == "mac" for r in mac)
    assert [r.repo for r in overview.matching(rows, overview.Filters(state="live"))] == [
        "apps/r009"]
    assert sorted(r.repo for r in overview.matching(rows, overview.Filters(q="R11"))) == [
        f"apps/r11{i}" for i in range(10)]
    none = overview.repos_section(rows, overview.Filters(q="nothing-like-it", state="live"),
                                  labels, NOW, len(rows))
    assert "No repo matches a name holding “nothing-like-it”, live (of 120 on this instance)" in (
        none)
    assert 'href="/console">Clear the filters' in none
    page_two = overview.Filters(q="r", machine="mac", state="idle", page=2).query()
    assert page_two == "q=r&machine=mac&state=idle&page=2"
    assert 'title="2026-12-01 09:00:00 UTC">3 hours ago</time>' in "".join(
        overview.repos_section(rows, overview.Filters(q="r033"), labels, NOW, len(rows)))
