"""Fuzzing the running services with Hypothesis (real nats-server and Postgres).

One system per test function; every example talks to it over NATS:
- generated ingest payloads (wrong types, huge strings, control characters,
  invalid UTF-8, subject-token tricks, empty strings, deep nesting, extra fields),
  published to seedline.ingest.timeline or sent to seedline.api.timeline.append;
- generated open requests to seedline.api.sessions.open.

What must hold after every example: no service stopped (their run tasks are alive
and a valid entry sent afterwards is stored), no subject outside the contract
exists in any stream, every ingest payload became exactly one normalised entry
or exactly one SEEDLINE_REJECTED record with the expected reason, and every open
got a JSON reply with ok true or an error code the contract lists for opens.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import nats
import pytest
from hypothesis import HealthCheck, event, example, given, settings as hsettings, strategies as st

from seedline_contracts import subjects
from seedline_contracts.timeline import KINDS
from seedline_platform.sealing import sealer_for
from seedline_continuity_resolver.app import create_app as create_resolver
from seedline_devtools.testing import running
from seedline_devtools.testing_load import ingest_taken
from seedline_runner.engines.scripted import ScriptedEngine
from seedline_runner.runner import Runner
from seedline_runner_gateway.app import create_app as create_gateway
from seedline_seed_composer.app import create_app as create_composer
from seedline_timeline_writer.app import create_app as create_writer

pytestmark = [pytest.mark.servers, pytest.mark.timeout(600)]

FUZZ = dict(
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
        HealthCheck.data_too_large, HealthCheck.large_base_example,
    ],
)
REASONS = {"not_json", "invalid_entry", "bad_token", "poison"}
# CONTRACT.md section 3; `not_json` is in the Conventions' code list, not in section 3's.
OPEN_ERRORS = {"runner_offline", "runner_unreachable", "launch_refused", "invalid_request",
               "timeout", "not_found"}
SESSION_EVENTS = ("open_requested", "continuity_decided", "seed_composed", "opened",
                  "open_failed", "engine_bound", "relocated", "stopped", "reaped")
RUNNER_NODE = "mac-mini-1"

# An escaped token, as CONTRACT.md Conventions define it (checked again by unescaping).
_TOKEN = r"(?:[A-Za-z0-9_-]|~[0-9A-F]{2}){1,255}"
ALLOWED_SUBJECTS = {
    # Ingest keeps messages by age, so what was published stays to be checked: the
    # timeline and runner subjects, each optionally naming its instance (2.2).
    subjects.INGEST_STREAM: re.compile(
        rf"seedline\.ingest\.(?:timeline|runner\.{_TOKEN})(?:\.{_TOKEN})?"),
    subjects.TIMELINE_STREAM: re.compile(
        rf"seedline\.timeline\.{_TOKEN}\.{_TOKEN}\.{_TOKEN}\.(?:{'|'.join(KINDS)})"),
    subjects.SESSIONS_STREAM: re.compile(
        rf"seedline\.session\.{_TOKEN}\.(?:{'|'.join(SESSION_EVENTS)})"),
    subjects.REJECTED_STREAM: re.compile(r"seedline\.rejected\.(?:timeline|sessions)"),
}
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


# -- an oracle written from CONTRACT.md, independent of the code under test ------------

def escaped(value: str) -> str:
    return "".join(chr(b) if b in _SAFE else f"~{b:02X}" for b in value.encode("utf-8"))


def is_control(ch: str) -> bool:
    return ord(ch) < 32 or 127 <= ord(ch) < 160


def token_ok(value: str) -> bool:
    return value != "" and len(escaped(value)) <= 255 and not any(map(is_control, value))


def unescape(token: str) -> str:
    return re.sub(rb"~([0-9A-F]{2})", lambda m: bytes([int(m.group(1), 16)]),
                  token.encode()).decode("utf-8")


# -- strategies ----------------------------------------------------------------------

_counter = itertools.count(1)
TRICKS = [".", "*", ">", " ", "a.b", "a b", "*.>", ">.*", "~", "~2F", "%2F", "/", "..", "-",
          "apps/chess.academy", "héllo wörld", "日本語", "\u200b", "\ufeff", "🙂",
          "a\u2028b"]
no_surrogates = st.characters(blacklist_categories=("Cs",))
printable = st.characters(blacklist_categories=("Cs", "Cc"))
any_text = st.text(no_surrogates, max_size=40)


@st.composite
def huge_text(draw, low: int = 100_001, high: int = 300_000) -> str:
    """Up to ~300k characters, built from a short drawn piece (cheap for Hypothesis)."""
    piece = draw(st.text(no_surrogates, min_size=1, max_size=8))
    n = draw(st.integers(low, high))
    return (piece * (n // len(piece) + 1))[:n]


token_text = st.one_of(st.sampled_from(TRICKS), st.text(printable, min_size=1, max_size=30))
content_text = st.one_of(st.text(no_surrogates, max_size=200), huge_text(1, 300_000))
engine_text = st.text(printable, min_size=1, max_size=64)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                      st.floats(allow_nan=False, allow_infinity=False), any_text)
json_value = st.recursive(
    json_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(any_text, c, max_size=4),
    max_leaves=12)
wrong_type = st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                       st.booleans(), st.lists(json_leaf, max_size=3),
                       st.dictionaries(any_text, json_leaf, max_size=3))


@st.composite
def rfc3339(draw) -> str:
    # Valid times lie between 2000 and one day after arrival (CONTRACT.md 4.1), whatever
    # the offset (up to 14 hours either way).
    soon = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(hours=8)
    moment = draw(st.datetimes(min_value=datetime(2000, 1, 2), max_value=soon))
    offset = timezone(timedelta(minutes=draw(st.integers(-14 * 60, 14 * 60))))
    text = moment.replace(tzinfo=offset).isoformat()
    return text.replace("+00:00", "Z") if draw(st.booleans()) else text


BAD_AT = ["yesterday", "2026-13-01T00:00:00Z", "2026-08-17", "2026-08-17T10:00:00",
          "2026-08-17T10:00:00+25:00", "0001-01-01T00:00:00+01:00",
          "9999-12-31T23:59:59-01:00", "", "1999-12-31T23:59:59Z", "2200-01-01T00:00:00Z"]
REQUIRED = ("entry_id", "instance_id", "repo", "session_id", "kind", "content")


@dataclass
class IngestCase:
    """One generated payload; ``expect`` is "entry" or the set of acceptable reason codes."""

    body: dict
    entry_id: Callable[[int], Any]
    raw: Callable[[bytes], bytes]
    expect: str | frozenset
    channel: str
    label: str
    ensure_ascii: bool = False
    payload: bytes = b""
    id: Any = None

    def __repr__(self) -> str:
        sizes = {k: len(v) for k, v in self.body.items() if isinstance(v, str) and len(v) > 60}
        small = {k: v for k, v in self.body.items() if k not in sizes}
        longs = f", long strings={sizes}" if sizes else ""
        more = f"... ({len(self.payload)} bytes)" if len(self.payload) > 120 else ""
        return (f"IngestCase({self.label!r}, {self.channel}, expect={self.expect!r}, "
                f"body={small!r}{longs}, sent={self.payload[:120]!r}{more})")

    def build(self) -> bytes:
        self.id = self.entry_id(next(_counter))
        body = dict(self.body)
        if self.id is not _MISSING:
            body["entry_id"] = self.id
        try:
            text = json.dumps(body, ensure_ascii=self.ensure_ascii)
        except RecursionError:
            raise AssertionError("generator bug: body nests too deep for json.dumps") from None
        self.payload = self.raw(text.encode("utf-8", "surrogatepass"))
        return self.payload


_MISSING = object()


def _unique(suffix: str) -> Callable[[int], str]:
    return lambda n: f"fz{n}-{suffix}"[:128]


@st.composite
def ingest_case(draw) -> IngestCase:
    body: dict[str, Any] = {
        "instance_id": draw(token_text), "repo": draw(token_text), "session_id": draw(token_text),
        "kind": draw(st.sampled_from(KINDS)), "content": draw(content_text),
    }
    if draw(st.booleans()):
        body["at"] = draw(st.none() | rfc3339())
    if draw(st.booleans()):
        body["engine"] = draw(st.none() | engine_text)
    extra_names = st.text(no_surrogates, max_size=12).filter(
        lambda k: k not in body and k != "entry_id")
    body.update(draw(st.dictionaries(extra_names, json_value, max_size=3)))
    # No whitespace or control characters (str.isspace() is what the writer checks).
    id_chars = st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"))
    entry_id = _unique(draw(st.text(id_chars, max_size=20).filter(
        lambda t: not any(c.isspace() for c in t))))
    bad_tokens = [f for f in ("instance_id", "repo", "session_id") if not token_ok(body[f])]
    expect: str | frozenset = frozenset({"bad_token"}) if bad_tokens else "entry"
    raw: Callable[[bytes], bytes] = lambda b: b  # noqa: E731
    label = "valid" if expect == "entry" else "bad_token"

    mutation = draw(st.just("none") | st.sampled_from([
        "missing", "wrong_type", "null_required", "empty_token",
        "control_token", "long_token", "bad_kind", "bad_engine", "bad_at", "entry_id",
        "deep_extra", "huge_extra", "not_json", "truncated", "invalid_utf8", "top_level",
        "lone_surrogate", "whitespace",
    ]))
    invalid = frozenset({"invalid_entry"})
    bad_token = frozenset({"bad_token"})
    not_json = frozenset({"not_json"})
    if mutation != "none":
        label = mutation
    if mutation == "missing":
        name = draw(st.sampled_from(REQUIRED))
        if name == "entry_id":
            entry_id = lambda n: _MISSING  # noqa: E731
        else:
            del body[name]
        expect = invalid
    elif mutation == "wrong_type":
        name = draw(st.sampled_from(REQUIRED + ("at", "engine")))
        value = draw(wrong_type)
        if name == "entry_id":
            entry_id = lambda n, v=value: v  # noqa: E731
        else:
            body[name] = value
        expect = invalid
    elif mutation == "null_required":
        name = draw(st.sampled_from(REQUIRED))
        if name == "entry_id":
            entry_id = lambda n: None  # noqa: E731
        else:
            body[name] = None
        expect = invalid
    elif mutation in ("empty_token", "control_token", "long_token"):
        name = draw(st.sampled_from(("instance_id", "repo", "session_id")))
        if mutation == "empty_token":
            body[name] = ""
        elif mutation == "control_token":
            ch = chr(draw(st.sampled_from([0, 1, 9, 10, 13, 27, 127, 0x85, 0x9F])))
            body[name] = draw(token_text) + ch
        else:
            body[name] = draw(st.one_of(st.text(printable, min_size=256, max_size=400),
                                        huge_text(256, 300_000)))
        expect = bad_token
    elif mutation == "bad_kind":
        body["kind"] = draw(st.one_of(any_text, huge_text()).filter(lambda k: k not in KINDS))
        expect = bad_token if bad_tokens else invalid
    elif mutation == "bad_engine":
        body["engine"] = draw(st.sampled_from(["", "x" * 65, "claude\x00", "co\ndex"]))
        expect = bad_token if bad_tokens else invalid
    elif mutation == "bad_at":
        body["at"] = draw(st.sampled_from(BAD_AT))
        expect = bad_token if bad_tokens else invalid
    elif mutation == "entry_id":
        kind = draw(st.sampled_from(["empty", "space", "control", "long", "huge"]))
        entry_id = {
            "empty": lambda n: "",
            "space": lambda n: f"fz{n} x",
            "control": lambda n: f"fz{n}\x07",
            "long": lambda n: f"fz{n}-" + "x" * 130,
            "huge": lambda n: f"fz{n}-" + "y" * 300_000,
        }[kind]
        expect = invalid
        label = f"entry_id:{kind}"
    elif mutation == "deep_extra":
        depth = draw(st.integers(1, 300) | st.integers(900, 5000))
        deep = b"[" * depth + b"]" * depth
        raw = lambda b, d=deep: b[:-1] + b', "deep": ' + d + b"}"  # noqa: E731
        # The contract ignores extra fields; a reader may refuse nesting beyond its depth,
        # but as invalid input, never as a failure (poison) or a crash.
        if depth > 200:
            expect = (expect if expect != "entry" else frozenset({"entry"})) | invalid
        label = f"deep_extra:{depth}"
    elif mutation == "huge_extra":
        body["huge_extra_" + draw(any_text)] = draw(huge_text())
    elif mutation == "not_json":
        blob = draw(st.binary(max_size=300))
        raw = lambda b, x=blob: x  # noqa: E731
        entry_id = lambda n: _MISSING  # noqa: E731
        expect = frozenset({"not_json", "invalid_entry"})
    elif mutation == "truncated":
        cut = draw(st.floats(0, 0.999))
        raw = lambda b, c=cut: b[: int(len(b) * c)]  # noqa: E731
        expect = not_json
    elif mutation == "invalid_utf8":
        bad = draw(st.sampled_from(
            [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf"]))
        body["content"] = "@@BAD@@" + body["content"][:50]
        raw = lambda b, x=bad: b.replace(b"@@BAD@@", x, 1)  # noqa: E731
        expect = not_json
    elif mutation == "top_level":
        shape = draw(st.sampled_from(["list", "string", "number", "null", "true"]))
        raw = {
            "list": lambda b: b"[" + b + b"]",
            "string": lambda b: json.dumps(b.decode("utf-8", "replace")).encode(),
            "number": lambda b: b"42",
            "null": lambda b: b"null",
            "true": lambda b: b"true",
        }[shape]
        expect = invalid
        label = f"top_level:{shape}"
    elif mutation == "lone_surrogate":
        body["content"] = draw(st.sampled_from(["\ud800", "x\udfffy", "\udc00\ud800"]))
        expect = frozenset({"not_json", "invalid_entry"})
    elif mutation == "whitespace":
        raw = lambda b: b" \n\t" + b + b"\r\n "  # noqa: E731
    channel = draw(st.sampled_from(["ingest", "ingest", "append"]))
    case = IngestCase(body, entry_id, raw, expect, channel, label)
    if mutation == "lone_surrogate":
        case.ensure_ascii = True
    return case


# -- the running system --------------------------------------------------------------

@dataclass
class Fuzzed:
    nc: Any
    js: Any
    services: dict[str, Any] = field(default_factory=dict)
    sealer: Any = None  # opens stored content, sealed at rest (1.2)
    tally: Counter = field(default_factory=Counter)

    def assert_running(self) -> None:
        for name, service in self.services.items():
            task = service._task
            why = "cancelled" if task.done() and task.cancelled() else None
            assert not task.done(), f"{name} stopped: {why or task.exception()!r}"


FACTORIES = {"timeline-writer": create_writer, "continuity-resolver": create_resolver,
             "seed-composer": create_composer, "runner-gateway": create_gateway}


async def start(stack: AsyncExitStack, settings, names: list[str], runner: bool = False) -> Fuzzed:
    fuzzed = Fuzzed(None, None)
    for name in names:
        service = fuzzed.services[name] = running(FACTORIES[name](settings))
        await stack.enter_async_context(service)
    fuzzed.nc = await nats.connect(settings.nats_url, max_reconnect_attempts=-1)
    stack.push_async_callback(fuzzed.nc.close)
    fuzzed.js = fuzzed.nc.jetstream()
    fuzzed.sealer = sealer_for(fuzzed.js, settings)
    if runner:
        rnc = await nats.connect(settings.nats_url)
        stack.push_async_callback(rnc.close)
        node = Runner(rnc, RUNNER_NODE, "Mac mini", {"scripted": ScriptedEngine()},
                      presence_interval=1.0)
        await node.start()
        stack.push_async_callback(node.stop)
    return fuzzed


@pytest.fixture
async def writer_and_resolver(settings):
    async with AsyncExitStack() as stack:
        fuzzed = await start(stack, settings, ["timeline-writer", "continuity-resolver"])
        yield fuzzed
    print(f"\ningest outcomes: {dict(sorted(fuzzed.tally.items()))}")


@pytest.fixture
async def whole_system(settings):
    async with AsyncExitStack() as stack:
        fuzzed = await start(stack, settings, list(FACTORIES), runner=True)
        yield fuzzed
    print(f"\nopen replies: {dict(sorted(fuzzed.tally.items()))}")


async def wait_until(probe, timeout: float, what: str):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f} s")
        await asyncio.sleep(0.02)


async def drained(js, stream: str, durable: str) -> bool:
    """Nothing pending or unacknowledged, twice in a row: the server counts a new
    message towards a consumer's pending a moment after it acknowledged the publish."""
    for attempt in range(2):
        info = await js.consumer_info(stream, durable)
        if info.num_pending or info.num_ack_pending:
            return False
        if attempt == 0:
            await asyncio.sleep(0.05)
    return True


async def timeline_projected(js, durable: str) -> bool:
    info = await js.consumer_info(subjects.TIMELINE_STREAM, durable)
    end = await last(js, subjects.TIMELINE_STREAM)
    return info.num_ack_pending == 0 and info.ack_floor.stream_seq >= end


async def last(js, stream: str) -> int:
    return (await js.stream_info(stream)).state.last_seq


async def messages_after(js, stream: str, after: int) -> list:
    end = await last(js, stream)
    return [await js.get_msg(stream, seq) for seq in range(after + 1, end + 1)]


async def assert_subjects_in_contract(js) -> None:
    for stream, pattern in ALLOWED_SUBJECTS.items():
        info = await js.stream_info(stream, subjects_filter=">")
        for subject in (info.state.subjects or {}):
            assert pattern.fullmatch(subject), f"{stream} holds {subject!r}, outside the contract"
            if stream == subjects.TIMELINE_STREAM:
                for token in subject.split(".")[2:5]:
                    assert escaped(unescape(token)) == token, f"{subject!r}: {token!r}"


def canary() -> dict:
    n = next(_counter)
    return {"entry_id": f"canary-{n}", "instance_id": "bd43f4de", "repo": "apps/chess-academy",
            "session_id": "csess_canary", "kind": "system", "content": f"still alive {n}"}


def expected_entry(case: IngestCase) -> dict:
    content = case.body["content"].replace("\x00", "\ufffd")
    return {
        "entry_id": case.id, "instance_id": case.body["instance_id"], "repo": case.body["repo"],
        "session_id": case.body["session_id"], "kind": case.body["kind"],
        "content": content[:100_000], "engine": case.body.get("engine"),
        "truncated_from": len(content) if len(content) > 100_000 else None,
    }


async def check_stored(case: IngestCase, msg, sealer) -> None:
    body = json.loads(msg.data)
    # Content is stored sealed with its instance's key (1.2): compared once opened.
    body["content"] = await sealer.open(body.get("instance_id"), body["content"])
    want = expected_entry(case)
    got = {k: body.get(k) for k in want}
    assert got == want, f"{case.label}: stored entry differs from its normalised form"
    tokens = [escaped(want[k]) for k in ("instance_id", "repo", "session_id")]
    assert msg.subject == ".".join(["seedline.timeline", *tokens, want["kind"]])
    assert body["at"].endswith("Z")
    if case.body.get("at"):
        sent = datetime.fromisoformat(case.body["at"].replace("Z", "+00:00"))
        assert datetime.fromisoformat(body["at"].replace("Z", "+00:00")) == sent


def check_raw(record: dict, payload: bytes) -> None:
    if record["raw_encoding"] == "utf-8":
        assert record["raw"].encode("utf-8") == payload
    else:
        assert record["raw_encoding"] == "base64" and base64.b64decode(record["raw"]) == payload


# -- the tests -------------------------------------------------------------------------

# Regressions the fuzzing found, pinned so every run sends them (see RELIABILITY.md).
def _deep(b: bytes) -> bytes:
    return b[:-1] + b', "deep": ' + b"[" * 3000 + b"]" * 3000 + b"}"


def pinned_ingest(channel: str) -> IngestCase:
    body = {"instance_id": "bd43f4de", "repo": "apps/chess-academy", "session_id": "csess_pin",
            "kind": "system", "content": "nested too deeply?"}
    return IngestCase(body, _unique("pin"), _deep, frozenset({"entry", "invalid_entry"}), channel,
                      "deep_extra:3000")


@hsettings(max_examples=60, **FUZZ)
@given(cases=st.lists(ingest_case(), min_size=1, max_size=4))
@example(cases=[pinned_ingest("ingest"), pinned_ingest("append")])
async def test_fuzzed_ingest_becomes_one_entry_or_one_rejection_each(writer_and_resolver, cases):
    system = writer_and_resolver
    js, nc = system.js, system.nc
    timeline_from = await last(js, subjects.TIMELINE_STREAM)
    rejected_from = await last(js, subjects.REJECTED_STREAM)

    ingest_seqs: dict[int, IngestCase] = {}
    replies: list[tuple[IngestCase, dict]] = []
    for case in cases:
        event(case.label.split(":")[0])
        payload = case.build()
        if case.channel == "ingest":
            ack = await js.publish(subjects.INGEST_TIMELINE, payload, timeout=10)
            ingest_seqs[ack.seq] = case
        else:
            reply = await nc.request(subjects.API_TIMELINE_APPEND, payload, timeout=15)
            replies.append((case, json.loads(reply.data)))
    alive = canary()
    sent = await js.publish(subjects.INGEST_TIMELINE, json.dumps(alive).encode(), timeout=10)

    await wait_until(lambda: ingest_taken(js, upto=sent.seq), 60,
                     "the writer taking every ingest message")
    await wait_until(lambda: timeline_projected(js, "continuity-resolver-timeline"), 30,
                     "the resolver projecting every entry")
    system.assert_running()

    stored = await messages_after(js, subjects.TIMELINE_STREAM, timeline_from)
    records = await messages_after(js, subjects.REJECTED_STREAM, rejected_from)
    by_id: dict[Any, list] = {}
    for msg in stored:
        by_id.setdefault(json.loads(msg.data)["entry_id"], []).append(msg)
    by_seq: dict[int, list[dict]] = {}
    for msg in records:
        assert msg.subject == subjects.REJECTED_TIMELINE, f"{msg.subject}: {msg.data[:300]!r}"
        record = json.loads(msg.data)
        by_seq.setdefault(record["ingest_seq"], []).append(record)

    assert len(by_id.get(alive["entry_id"], [])) == 1, "a valid entry sent afterwards is missing"
    for seq, case in ingest_seqs.items():
        mine = by_seq.pop(seq, [])
        entries = by_id.pop(case.id, []) if isinstance(case.id, str) else []
        assert len(mine) + len(entries) == 1, (
            f"{case.label}: {len(entries)} entries and {len(mine)} rejections for ingest seq {seq}")
        system.tally[f"{case.channel}:" + ("entry" if entries else mine[0]["reason_code"])] += 1
        if entries:
            assert case.expect == "entry" or "entry" in case.expect, (
                f"{case.label}: stored, but expected a rejection {sorted(case.expect)}")
            await check_stored(case, entries[0], system.sealer)
        else:
            record = mine[0]
            assert record["reason_code"] in REASONS
            assert case.expect != "entry" and record["reason_code"] in case.expect, (
                f"{case.label}: rejected as {record['reason_code']} ({record['message'][:200]}), "
                f"expected {case.expect}")
            assert record["message"]
            check_raw(record, case.payload)
    assert not by_seq, f"rejections for messages nobody sent: {sorted(by_seq)}"
    for case, reply in replies:
        system.tally["append:" + ("entry" if reply["ok"] else reply["error"]["code"])] += 1
        if reply["ok"]:
            assert case.expect == "entry" or "entry" in case.expect, (
                f"{case.label}: appended, but expected {sorted(case.expect)}")
            assert reply["duplicate"] is False
            entries = by_id.pop(case.id, [])
            assert len(entries) == 1 and entries[0].seq == reply["seq"]
            await check_stored(case, entries[0], system.sealer)
        else:
            code = reply["error"]["code"]
            assert case.expect != "entry" and code in case.expect, (
                f"{case.label}: append answered {code} ({reply['error']['message'][:200]}), "
                f"expected {case.expect}")
            assert reply["error"]["message"]
            if isinstance(case.id, str):
                assert case.id not in by_id
    by_id.pop(alive["entry_id"])
    assert not by_id, f"entries nobody sent: {sorted(map(str, by_id))[:5]}"
    await assert_subjects_in_contract(js)


# -- opens -----------------------------------------------------------------------------

@dataclass
class OpenCase:
    body: Any
    request_id: Callable[[int], Any]
    valid: bool
    label: str
    raw: Callable[[bytes], bytes] = lambda b: b

    def __repr__(self) -> str:
        shown = {k: (v if not isinstance(v, str) or len(v) <= 60 else f"<{len(v)} chars>")
                 for k, v in self.body.items()}
        return f"OpenCase({self.label!r}, valid={self.valid}, body={shown!r})"

    def build(self) -> bytes:
        body = self.body
        if isinstance(body, dict):
            body = dict(body)
            rid = self.request_id(next(_counter))
            if rid is not _MISSING:
                body["request_id"] = rid
        return self.raw(json.dumps(body).encode("utf-8", "surrogatepass"))


@st.composite
def open_case(draw) -> OpenCase:
    body: dict[str, Any] = {
        "instance_id": draw(st.sampled_from(["bd43f4de", "fuzz"]) | token_text),
        "repo": draw(st.sampled_from(["apps/chess-academy"]) | token_text),
        "engine": draw(st.sampled_from(["scripted", "scripted", "claude", "raw"]) | engine_text),
        "node_id": draw(st.sampled_from([RUNNER_NODE, RUNNER_NODE, "build-box-7"]) | token_text),
    }
    for flag in ("force_fresh", "clean_slate"):
        if draw(st.booleans()):
            body[flag] = draw(st.booleans())
    if draw(st.booleans()):
        body["instruction"] = draw(
            st.none() | st.text(no_surrogates, max_size=200) | huge_text(1, 100_000))
    extra_names = st.text(no_surrogates, max_size=12).filter(
        lambda k: k not in body and k != "request_id")
    body.update(draw(st.dictionaries(extra_names, json_value, max_size=2)))
    suffix = draw(st.text(printable, max_size=16))
    request_id: Callable[[int], Any] = draw(st.sampled_from([
        lambda n: _MISSING, lambda n: None, lambda n, s=suffix: f"rq{n}-{s}"[:128]]))
    valid = all(token_ok(body[k]) for k in ("instance_id", "repo", "node_id"))
    label = "valid" if valid else "bad_token"
    raw: Callable[[bytes], bytes] = lambda b: b  # noqa: E731

    mutation = draw(st.just("none") | st.sampled_from([
        "missing", "wrong_type", "empty", "control", "long",
        "engine", "request_id", "huge_instruction", "deep", "not_json", "invalid_utf8",
        "top_level", "wake_seq",
    ]))
    if mutation != "none":
        label, valid = mutation, False
    if mutation == "missing":
        del body[draw(st.sampled_from(("instance_id", "repo", "engine", "node_id")))]
    elif mutation == "wrong_type":
        name = draw(st.sampled_from(("instance_id", "repo", "engine", "node_id", "force_fresh",
                                     "clean_slate", "instruction", "request_id")))
        flag = name in ("force_fresh", "clean_slate")
        value = draw(wrong_type.filter(lambda v: not (flag and isinstance(v, bool))))
        if name == "request_id":
            request_id = lambda n, v=value: v  # noqa: E731
        else:
            body[name] = value
    elif mutation in ("empty", "control", "long"):
        name = draw(st.sampled_from(("instance_id", "repo", "node_id")))
        body[name] = {"empty": "", "control": body[name] + "\x00", "long": "é" * 200}[mutation]
    elif mutation == "engine":
        body["engine"] = draw(st.sampled_from(["", "e" * 65]))
    elif mutation == "request_id":
        request_id = draw(st.sampled_from([lambda n: "", lambda n: "r" * 129]))
    elif mutation == "huge_instruction":
        body["instruction"] = draw(huge_text(100_001, 300_000))
    elif mutation == "deep":
        depth = draw(st.integers(200, 300) | st.integers(900, 5000))
        raw = lambda b, d=depth: b[:-1] + b', "deep": ' + b"[" * d + b"]" * d + b"}"  # noqa: E731
        label, valid = f"deep:{depth}", None  # the contract ignores extras; either answer is fine
    elif mutation == "not_json":
        blob = draw(st.binary(max_size=200))
        raw = lambda b, x=blob: x  # noqa: E731
    elif mutation == "invalid_utf8":
        body["engine"] = "@@BAD@@"
        raw = lambda b: b.replace(b"@@BAD@@", b"\xff\xfe", 1)  # noqa: E731
    elif mutation == "top_level":
        raw = draw(st.sampled_from(
            [lambda b: b"[" + b + b"]", lambda b: b"null", lambda b: b'"open"']))
    elif mutation == "wake_seq":
        # Internal (set by the gateway on a wake); a seq past the timeline is not refused
        # but waits 5 s for the projection, so only malformed values are drawn here.
        body["wake_seq"] = draw(st.sampled_from([0, -1, "7", 1.5, None, [1]]))
        if body["wake_seq"] is None:
            label = "wake_seq:null"
            valid = all(token_ok(body[k]) for k in ("instance_id", "repo", "node_id"))
    return OpenCase(body, request_id, valid, label, raw)


def pinned_open(label: str, valid: bool | None, raw=lambda b: b, **over) -> OpenCase:
    body = {"instance_id": "bd43f4de", "repo": "apps/chess-academy", "engine": "scripted",
            "node_id": RUNNER_NODE, **over}
    return OpenCase(body, lambda n: _MISSING, valid, label, raw)


@hsettings(max_examples=50, **FUZZ)
@given(cases=st.lists(open_case(), min_size=1, max_size=3))
@example(cases=[
    pinned_open("deep:3000", None, _deep),
    pinned_open("control", False, instance_id="bd43f4de\x00"),
    pinned_open("control", False, node_id="mac-mini-1\x00"),
])
async def test_fuzzed_opens_always_get_a_contract_reply(whole_system, cases):
    system = whole_system
    js, nc = system.js, system.nc
    for case in cases:
        event(case.label.split(":")[0])
        msg = await nc.request(subjects.API_SESSIONS_OPEN, case.build(), timeout=30)
        reply = json.loads(msg.data)
        assert isinstance(reply, dict) and isinstance(reply.get("ok"), bool), reply
        if reply["ok"]:
            system.tally["opened"] += 1
            assert case.valid is not False, f"{case.label}: opened, but the request is invalid"
            assert reply["session_id"] and reply["node_id"] == case.body["node_id"]
            assert reply["outcome"] in {"resumed", "briefed", "resume_unconfirmed_briefed",
                                        "resume_unconfirmed_fresh", "unbriefed", "fresh"}
        else:
            code = reply["error"]["code"]
            system.tally[code] += 1
            not_json = case.label in ("not_json", "invalid_utf8")
            allowed = OPEN_ERRORS | ({"not_json"} if not_json else set())
            message = reply["error"]["message"]
            assert code in allowed, f"{case.label}: answered {code}: {message[:200]}"
            assert isinstance(reply["error"]["message"], str) and reply["error"]["message"]
            if case.valid is False:
                assert code in ("invalid_request", "not_json"), f"{case.label}: answered {code}"

    relocated = json.loads((await nc.request(subjects.API_SESSIONS_RELOCATE, json.dumps(
        {"session_id": "csess_\x00", "node_id": RUNNER_NODE}).encode(), timeout=15)).data)
    assert relocated["error"]["code"] == "invalid_request", relocated

    for stream, durable in ((subjects.SESSIONS_STREAM, "continuity-resolver-sessions"),
                            (subjects.SESSIONS_STREAM, "seed-composer"),
                            (subjects.SESSIONS_STREAM, "runner-gateway-launch"),
                            (subjects.TIMELINE_STREAM, "continuity-resolver-timeline")):
        await wait_until(lambda: drained(js, stream, durable), 30, f"{durable} catching up")
    await wait_until(lambda: ingest_taken(js), 30, "the writer taking every ingest message")
    system.assert_running()
    rejected = await js.stream_info(subjects.REJECTED_STREAM, subjects_filter=">")
    parked = (rejected.state.subjects or {}).get(subjects.REJECTED_SESSIONS, 0)
    assert not parked, f"a service parked {parked} session events it wrote itself: {cases}"
    await assert_subjects_in_contract(js)
    alive = canary()
    reply = json.loads((await nc.request(subjects.API_TIMELINE_APPEND, json.dumps(alive).encode(),
                                         timeout=15)).data)
    assert reply["ok"], reply
