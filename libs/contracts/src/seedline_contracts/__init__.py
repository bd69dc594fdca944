"""Seedline wire contract: message types, subjects, token escaping, stream configs."""

# The version of CONTRACT.md this code speaks: every service's discovery entry, the
# OpenAPI and AsyncAPI documents and the MCP server say it (a test reads it from
# docs/CONTRACT.md's title).
CONTRACT_VERSION = "1.3"
