"""seedline_web: the HTTP API, the console and the MCP server."""
