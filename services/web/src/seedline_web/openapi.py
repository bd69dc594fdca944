"""The OpenAPI document of the HTTP API, generated from the routes and the msgspec
types; docs/openapi.json is this text, and a test keeps the two the same."""

from __future__ import annotations

import json

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from . import wire

FILE = "openapi.json"


def openapi_document(app: FastAPI) -> dict:
    """FastAPI's document with the msgspec types as its components."""
    if app.openapi_schema is None:
        document = get_openapi(title=app.title, version=app.version,
                               description=app.description, routes=app.routes)
        # Invalid parameters are answered 400 in the contract's error shape, never with
        # FastAPI's 422 body, so that response and its schemas are not part of the API.
        for item in document["paths"].values():
            for operation in item.values():
                operation.get("responses", {}).pop("422", None)
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        schemas.update(wire.components())
        document["components"]["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
        app.openapi_schema = document
    return app.openapi_schema


def render(document: dict) -> str:
    """The document as committed: stable key order, two-space indent, a final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
