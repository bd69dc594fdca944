"""The published contract under docs/ is exactly what the contracts library generates,
and the AsyncAPI document covers every subject in subjects.py."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

from typer.testing import CliRunner

from seedline_cli.main import app
from seedline_contracts import events, subjects
from seedline_devtools.asyncapi_doc import asyncapi_document, receives, sends
from seedline_devtools.published import published_files
from seedline_platform.routing import Kind
from seedline_contracts.schema import PUBLIC_MESSAGES
from seedline_contracts.timeline import KINDS

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
FIX = "run `make schema` (or `seedline docs --out docs`) and commit docs/"


def test_the_committed_contract_is_what_the_code_generates():
    stale = []
    for relative, text in published_files().items():
        path = DOCS / relative
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(relative)
    assert not stale, f"docs/ is out of date ({', '.join(stale)}): {FIX}"


def test_docs_holds_no_schema_of_a_message_that_no_longer_exists():
    expected = {Path(p).name for p in published_files() if p.startswith("schema/")}
    extra = sorted(p.name for p in (DOCS / "schema").glob("*.json") if p.name not in expected)
    assert not extra, f"docs/schema has files for messages that no longer exist {extra}: {FIX}"


# -- the AsyncAPI document covers the whole contract --------------------------------------


def _tokens_match(pattern: list[str], address: list[str]) -> bool:
    """NATS wildcard semantics, where a {parameter} token of a channel stands for any token."""
    for i, token in enumerate(pattern):
        if token == ">":
            return len(address) > i
        if i >= len(address):
            return False
        if token != "*" and not address[i].startswith("{") and token != address[i]:
            return False
    return len(pattern) == len(address)


def _channel_for(subject: str) -> str:
    doc = asyncapi_document()
    hits = [
        cid
        for cid, ch in doc["channels"].items()
        if ch["address"] and _tokens_match(subject.split("."), ch["address"].split("."))
    ]
    assert hits, f"no AsyncAPI channel carries {subject}; add it to seedline_contracts.asyncapi"
    return hits[0]


SAMPLE_SUBJECTS = {
    "timeline_subject": [
        subjects.timeline_subject("bd43f4de", "apps/chess.academy", "csess_1", kind)
        for kind in KINDS
    ],
    "session_event_subject": [
        subjects.session_event_subject("csess_1", e.__struct_config__.tag)
        for e in events.EVENT_TYPES
    ],
    "session_event_filter": [subjects.session_event_filter("seed_composed")],
    "runner_subject": [
        subjects.runner_subject("mac mini", verb) for verb in ("launch", "turn", "stop", "events")
    ],
    "notify_subject": [subjects.notify_subject("bd43f4de")],
    "ingest_runner_subject": [subjects.ingest_runner_subject("mac mini"),
                              subjects.ingest_runner_subject("mac mini", "bd43f4de")],
    "ingest_timeline_subject": [subjects.ingest_timeline_subject("bd 43")],
    "ingest_partition_filter": [subjects.ingest_partition_filter(1)],
}


def test_every_subject_constant_has_a_channel():
    constants = {
        name: value
        for name, value in vars(subjects).items()
        if name.isupper() and isinstance(value, str) and value.startswith("seedline.")
    }
    assert len(constants) >= 10
    for name, value in constants.items():
        assert _channel_for(value), name


def test_every_subject_function_has_a_channel():
    functions = {
        name
        for name, value in vars(subjects).items()
        if inspect.isfunction(value) and name.endswith(("_subject", "_filter"))
    }
    assert functions == set(SAMPLE_SUBJECTS), "a new subject function needs a sample here"
    for samples in SAMPLE_SUBJECTS.values():
        for subject in samples:
            _channel_for(subject)


def test_presence_has_its_kv_channel():
    doc = asyncapi_document()
    address = doc["channels"]["runnerPresence"]["address"]
    key = subjects.presence_key("mac mini")
    assert _tokens_match(f"$KV.{subjects.RUNNERS_BUCKET}.{key}".split("."), address.split("."))


def test_parameters_describe_the_escaped_tokens_and_the_closed_sets():
    channels = asyncapi_document()["channels"]
    for cid, channel in channels.items():
        names = re.findall(r"\{([^}]+)\}", channel["address"] or "")
        assert sorted(channel.get("parameters", {})) == sorted(names), cid
    params = channels["timelineEntries"]["parameters"]
    assert "~" in params["repo"]["description"]
    assert params["kind"]["enum"] == list(KINDS)
    assert set(channels["sessionEvents"]["parameters"]["type"]["enum"]) == {
        e.__struct_config__.tag for e in events.EVENT_TYPES
    }


def _resolve(doc: dict, ref: str):
    assert ref.startswith("#/"), ref
    node = doc
    for part in ref[2:].split("/"):
        assert part in node, f"unresolved $ref {ref}"
        node = node[part]
    return node


def test_every_reference_resolves_and_every_message_is_used():
    doc = asyncapi_document()
    text = json.dumps(doc)
    for ref in re.findall(r'"\$ref": "([^"]+)"', text):
        _resolve(doc, ref)
    used = {
        ref.rsplit("/", 1)[1]
        for ref in re.findall(r'"\$ref": "(#/components/messages/[^"]+)"', text)
    }
    assert used == set(PUBLIC_MESSAGES), sorted(set(PUBLIC_MESSAGES) - used)
    for message in doc["components"]["messages"].values():
        assert (DOCS / message["x-json-schema"]).exists(), message["x-json-schema"]


def test_request_reply_operations_answer_with_an_error_reply_on_the_api():
    doc = asyncapi_document()
    for op_id, op in doc["operations"].items():
        address = _resolve(doc, op["channel"]["$ref"])["address"]
        if address.startswith("seedline.api."):
            # Answered by its service, asked by the web process (and the resolver stops a
            # conversation it relocates): either way it may be refused.
            replies = [m["$ref"].rsplit("/", 1)[1] for m in op["reply"]["messages"]]
            assert "ErrorReply" in replies, op_id
        if address.startswith("seedline.runner.") and not address.endswith(".events"):
            assert op["action"] == "send" and "reply" in op, op_id
    assert doc["asyncapi"].startswith("3.0")


# -- the command that regenerates it ------------------------------------------------------


def test_seedline_docs_writes_exactly_the_published_files(tmp_path):
    result = CliRunner().invoke(app, ["docs", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = {
        str(p.relative_to(tmp_path)): p.read_text(encoding="utf-8")
        for p in tmp_path.rglob("*") if p.is_file()
    }
    assert written == published_files()
    assert CliRunner().invoke(app, ["docs", "--out", str(tmp_path), "--check"]).exit_code == 0


def test_seedline_docs_check_names_what_drifted_and_how_to_fix_it(tmp_path):
    assert CliRunner().invoke(app, ["docs", "--out", str(tmp_path)]).exit_code == 0
    (tmp_path / "schema" / "StopReply.json").write_text("{}\n")
    (tmp_path / "schema" / "Gone.json").write_text(
        json.dumps({"$schema": "x", "title": "Gone"}) + "\n"
    )

    check = CliRunner().invoke(app, ["docs", "--out", str(tmp_path), "--check"])
    assert check.exit_code == 1
    assert "StopReply.json" in check.stderr and "Gone.json" in check.stderr
    assert "make schema" in check.stderr

    again = CliRunner().invoke(app, ["docs", "--out", str(tmp_path)])
    assert again.exit_code == 0 and "removed 1 schema" in again.stdout
    assert not (tmp_path / "schema" / "Gone.json").exists()


def test_seedline_docs_without_out_prints_the_asyncapi_document():
    result = CliRunner().invoke(app, ["docs"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == asyncapi_document()


def test_every_route_of_every_service_is_an_operation_and_every_api_is_served():
    found = receives()
    assert {r["service"] for r in found} == {
        "timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway",
        "seedline-web"}
    operations = asyncapi_document()["operations"]
    for receive in found:
        op = operations[receive["key"]]
        assert op["action"] == "receive" and op["x-service"] == receive["service"]
        assert op["summary"] == receive["route"].description  # written in the table
    for send in sends():
        assert operations[f"{send['service']}>{send['subject']}"]["action"] == "send"
    apis = [r["subject"] for r in found if r["subject"].startswith("seedline.api.")]
    assert sorted(apis) == sorted(
        v for k, v in vars(subjects).items() if k.startswith("API_")
    )  # every API of the contract is answered by some service's table


def test_each_service_subscribes_exactly_what_its_routing_table_says():
    """What FastStream holds for a built app is its table's routes, row for row: the
    table is not a description beside the code, it is what the app subscribes from."""
    from faststream.specification import AsyncAPI

    from seedline_devtools.tables import routing_tables
    from seedline_platform.settings import Settings
    from seedline_continuity_resolver.app import create_app as resolver
    from seedline_runner_gateway.app import create_app as gateway
    from seedline_seed_composer.app import create_app as composer
    from seedline_timeline_writer.app import create_app as writer

    tables = routing_tables()
    for create in (writer, resolver, composer, gateway):
        app = create(Settings())
        spec = AsyncAPI(app.broker, title=app.name, schema_version="3.0.0"
                        ).to_specification().to_jsonable()
        subscribed = sorted(c["address"] for c in spec["channels"].values())
        expected = sorted(r.subject for r in tables[app.name]
                          if r.kind not in (Kind.BATCH, Kind.LOOP))
        assert subscribed == expected, app.name
        assert app.routing == tables[app.name]


def test_the_sources_generated_from_the_tables_are_up_to_date():
    from seedline_devtools.generated import generated_sources

    stale = [path for path, text in generated_sources().items()
             if (REPO / path).read_text(encoding="utf-8") != text]
    assert not stale, f"{', '.join(stale)} out of date: run `make schema` and commit them"


def test_the_client_knows_who_answers_every_api_of_the_contract():
    from seedline_client import ANSWERED_BY
    from seedline_contracts.channels import APIS

    assert sorted(ANSWERED_BY) == sorted(api.address for api in APIS)
