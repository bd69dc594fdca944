"""Every file `seedline docs` writes, path under docs/ -> exact text: the contract's JSON
Schemas, the AsyncAPI document drawn from the routing tables, flows.md, and the web
process's OpenAPI document."""

from __future__ import annotations

from seedline_contracts import asyncapi as contract
from seedline_web.app import published_files as web_published_files

from .asyncapi_doc import asyncapi_document
from .flows import flows_markdown


def published_files() -> dict[str, str]:
    files = contract.published_files()
    files["asyncapi.json"] = contract.render(asyncapi_document())
    files["flows.md"] = flows_markdown()
    return {**files, **web_published_files()}
