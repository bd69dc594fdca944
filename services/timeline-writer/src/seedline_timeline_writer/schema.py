"""The timeline-writer's tables: it alone creates and writes them (DESIGN.md rule 8).

- ``timeline_entries``: the projection of SEEDLINE_TIMELINE, one row per stored entry,
  keyed by its stream seq; others read it only through seedline_timeline_view.
  ``repo_ordinal`` is the entry's position within its repo (1, 2, ...), so "how many
  repo entries up to seq N" is one index lookup instead of a count over a large repo.
- ``runner_launches``: which conversations the platform launched on which machine,
  from SEEDLINE_SESSIONS, so runner-scoped ingest can be checked (CONTRACT.md 6).
- ``timeline_offsets``: the applied stream sequence of each of those projections.
"""

from __future__ import annotations

from seedline_platform.pg import Offsets
from seedline_timeline_view.postgres import OFFSETS_TABLE, PROJECTION, TABLE

OFFSETS = Offsets(OFFSETS_TABLE)
TIMELINE_PROJECTION = PROJECTION
LAUNCHES_PROJECTION = "launches"


def timeline_projection(partition: int) -> str:
    """Each writer partition projects its own entries and keeps its own offset."""
    return TIMELINE_PROJECTION if partition == 0 else f"{TIMELINE_PROJECTION}.p{partition}"

DDL = OFFSETS.ddl + f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    seq bigint PRIMARY KEY,
    entry_id text NOT NULL UNIQUE,
    instance_id text NOT NULL,
    repo text NOT NULL,
    session_id text NOT NULL,
    kind text NOT NULL,
    content text NOT NULL,
    at text NOT NULL,
    engine text,
    truncated_from integer,
    repo_ordinal bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS timeline_entries_repo ON timeline_entries (instance_id, repo, seq);
CREATE INDEX IF NOT EXISTS timeline_entries_session
    ON timeline_entries (instance_id, repo, session_id, seq);
CREATE INDEX IF NOT EXISTS timeline_entries_kind
    ON timeline_entries (instance_id, repo, kind, seq);
CREATE TABLE IF NOT EXISTS runner_launches (
    node_id text NOT NULL,
    instance_id text NOT NULL,
    repo text NOT NULL,
    session_id text NOT NULL,
    PRIMARY KEY (node_id, instance_id, repo, session_id)
);
"""

COLUMNS = (
    "seq", "entry_id", "instance_id", "repo", "session_id", "kind", "content", "at",
    "engine", "truncated_from", "repo_ordinal",
)
