"""docs/openapi.json is exactly what the code generates, and it covers the contract."""

from __future__ import annotations

import json
from pathlib import Path

from seedline_web.app import published_files
from seedline_web.openapi import FILE
from seedline_web.fields import RFC3339

REPO = Path(__file__).resolve().parents[3]
COMMITTED = REPO / "docs" / "openapi.json"
FIX = "run `make schema` (or `seedline docs --out docs`) and commit docs/openapi.json"


def openapi_text() -> str:
    return published_files()[FILE]


def test_the_committed_openapi_document_is_what_the_code_generates():
    assert COMMITTED.exists(), FIX
    assert COMMITTED.read_text(encoding="utf-8") == openapi_text(), FIX


def test_every_request_reply_api_of_the_contract_has_a_route():
    paths = json.loads(openapi_text())["paths"]
    routes = {(method.upper(), path) for path, item in paths.items() for method in item}
    assert {
        ("POST", "/v1/instances/{instance_id}/timeline/append"),  # seedline.api.timeline.append
        ("GET", "/v1/instances/{instance_id}/timeline"),  # seedline.api.timeline.read
        ("POST", "/v1/instances/{instance_id}/conversations"),  # seedline.api.sessions.open
        ("GET", "/v1/instances/{instance_id}/conversations"),  # seedline.api.sessions.list
        ("POST", "/v1/conversations/{session_id}/relocate"),  # seedline.api.sessions.relocate
        ("POST", "/v1/conversations/{session_id}/stop"),  # seedline.api.sessions.stop
        ("GET", "/v1/conversations/{session_id}/brief"),  # seedline.api.briefs.get
        ("POST", "/v1/instances/{instance_id}/entries"),  # seedline.ingest.timeline
        ("POST", "/v1/instances/{instance_id}/entries/batch"),
        ("GET", "/v1/instances/{instance_id}/machines"),  # seedline_runners
        ("GET", "/v1/instances/{instance_id}/notifications"),  # seedline.notify.<instance>
    } <= routes


def test_every_body_and_reply_is_described_by_a_component():
    document = json.loads(openapi_text())
    schemas = document["components"]["schemas"]
    refs = set()

    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                refs.add(node["$ref"].rsplit("/", 1)[1])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document["paths"])
    assert refs <= set(schemas), sorted(refs - set(schemas))
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if path.startswith("/v1/"):
                assert "401" in operation["responses"], (method, path)
                error = operation["responses"]["401"]["content"]["application/json"]["schema"]
                assert error == {"$ref": "#/components/schemas/ErrorReply"}
            if method == "post" and "requestBody" in operation:
                assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]


# -- the document says what the server enforces, and what each route answers -----------------


def _schemas() -> dict:
    return json.loads(openapi_text())["components"]["schemas"]


def test_request_bodies_carry_the_rules_the_server_enforces():
    schemas = _schemas()
    entry = schemas["EntryBody"]["properties"]
    assert entry["entry_id"]["minLength"] == 1 and entry["entry_id"]["maxLength"] == 128
    assert set(entry["kind"]["enum"]) == {"chat_user", "chat_assistant", "terminal", "command",
                                          "brain", "outcome", "system"}
    at = entry["at"]["anyOf"][0]
    assert at["format"] == "date-time" and at["pattern"] == RFC3339
    assert entry["repo"]["minLength"] == 1 and "pattern" in entry["repo"]
    batch = schemas["BatchBody"]["properties"]["entries"]
    assert (batch["minItems"], batch["maxItems"]) == (1, 1000)
    assert "pattern" in schemas["OpenBody"]["properties"]["node_id"]


def test_every_field_of_every_request_body_is_described():
    schemas = _schemas()
    for name in ("EntryBody", "BatchBody", "OpenBody", "RelocateBody", "StopBody"):
        for field, schema in schemas[name]["properties"].items():
            assert schema.get("description"), (name, field)
    assert "no brief" in schemas["OpenBody"]["properties"]["force_fresh"]["description"]


def test_each_route_lists_the_answers_it_can_give_and_no_others():
    paths = json.loads(openapi_text())["paths"]
    for health in ("/healthz", "/readyz"):
        assert not {"400", "401", "403"} & set(paths[health]["get"]["responses"]), health
    assert "503" in paths["/readyz"]["get"]["responses"]
    opening = paths["/v1/instances/{instance_id}/conversations"]["post"]["responses"]
    assert {"200", "400", "401", "403", "408", "409", "413", "503", "504"} <= set(opening)


def _client():
    import httpx

    from seedline_platform.settings import Settings
    from seedline_web.app import create_app

    web = create_app(Settings())
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=web.asgi), base_url="http://t")


def test_a_method_an_address_does_not_take_is_405_with_allow():
    import asyncio

    async def ask():
        async with _client() as client:
            return await client.post("/healthz"), await client.delete("/readyz")

    for reply in asyncio.run(ask()):
        assert reply.status_code == 405 and reply.headers["allow"] == "GET"
        assert reply.json()["error"]["code"] == "invalid_request"


def test_docs_load_swagger_ui_from_this_process_never_a_cdn():
    import asyncio

    async def ask():
        async with _client() as client:
            page = await client.get("/docs")
            script = await client.get("/docs/assets/swagger-ui-bundle.js")
            style = await client.get("/docs/assets/swagger-ui.css")
            return page, script, style

    page, script, style = asyncio.run(ask())
    assert page.status_code == 200 and "/docs/assets/swagger-ui-bundle.js" in page.text
    assert "cdn" not in page.text.lower() and "https://" not in page.text.replace(
        "https://fastapi.tiangolo.com", "")
    assert script.status_code == 200 and len(script.content) > 100_000
    assert style.status_code == 200


def test_the_readmes_route_table_is_the_documents_routes():
    """Every operation of the OpenAPI document is a row of the README's table, and every
    row is one of its operations: the table cannot leave a route out or keep a gone one."""
    import re
    from pathlib import Path

    readme = Path(__file__).resolve().parents[3] / "README.md"
    section = readme.read_text(encoding="utf-8").split("## HTTP API", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/[^`]*)` \|", section, re.MULTILINE))
    document = json.loads(published_files()[FILE])
    operations = {(method.upper(), path) for path, item in document["paths"].items()
                  for method in item}
    assert rows == operations, (sorted(operations - rows), sorted(rows - operations))
