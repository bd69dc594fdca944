"""The web console: server-rendered pages, no build step, no script."""
