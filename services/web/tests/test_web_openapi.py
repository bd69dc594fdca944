"""docs/openapi.json is exactly what the code generates, and it covers the contract."""

from __future__ import annotations

import json
from pathlib import Path

from seedline_web.openapi import openapi_text

REPO = Path(__file__).resolve().parents[3]
COMMITTED = REPO / "docs" / "openapi.json"
FIX = "run `make schema` (or `seedline docs --out docs`) and commit docs/openapi.json"


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
