"""What a person cannot use while one of Seedline's processes is down: the words `seedline
status` gives with each process it finds down, so a script or a person reading it knows
what is affected, not only which process."""

from __future__ import annotations

WEB = "seedline-web"

# Each phrase is plural: "... are unavailable".
_UNAVAILABLE = {
    WEB: "the HTTP API, the console and MCP over HTTP",
    "timeline-writer": "publishing entries and reading timelines",
    "continuity-resolver": "opening and moving conversations",
    "seed-composer": "opening and moving conversations (each waits for its brief)",
    "runner-gateway": "opening, moving and stopping conversations, and messages reaching "
                      "machines",
    "nats-server": "every command, the HTTP API, the console and MCP",
    "postgres": "reading timelines, opening conversations and the web's sign-in tokens",
    "demo-runner": "conversations on the demo runner",
}


def unavailable(name: str) -> str:
    """What is unavailable while the process ``name`` is down."""
    if name.startswith("timeline-writer-p"):  # a writer of one ingest partition
        return "publishing entries of the instances of its ingest partition"
    return _UNAVAILABLE.get(name, f"what {name} serves")


def down_text(name: str, how: str = "is not running") -> str:
    """`seedline-web is not running: the HTTP API, ... are unavailable`."""
    return f"{name} {how}: {unavailable(name)} are unavailable"
