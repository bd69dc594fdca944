"""`seedline publish --import`: a backfilled entry is stored as history (CONTRACT.md 2.1)."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from seedline_contracts import subjects

ENTRY = ["--instance", "bd43f4de", "--repo", "apps/x", "--conversation", "c-1",
         "--kind", "chat_user"]


async def stored_origins(nats_url: str) -> dict[str, str]:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(subjects.TIMELINE_STREAM)
        bodies = [json.loads((await js.get_msg(subjects.TIMELINE_STREAM, seq)).data)
                  for seq in range(info.state.first_seq, info.state.last_seq + 1)]
        # The stored entry leaves out fields at their default (omit_defaults): an entry
        # without `origin` is live (CONTRACT.md 2.1, 1.2); "import" is always written.
        return {body["entry_id"]: body.get("origin", "live") for body in bodies}
    finally:
        await nc.close()


@pytest.mark.servers
def test_an_entry_published_with_import_is_stored_as_imported_and_others_as_live(
    seedline, cli_env
):
    history = seedline("publish", *ENTRY, "--content", "old words", "--entry-id", "h-1",
                       "--import", env=cli_env)
    live = seedline("publish", *ENTRY, "--content", "new words", "--entry-id", "l-1",
                    env=cli_env)
    mixed = seedline("publish", "--file", "entries.jsonl", "--import", env=cli_env)

    assert history.exit_code == 0 and live.exit_code == 0, history.output + live.output
    assert asyncio.run(stored_origins(cli_env["SEEDLINE_NATS_URL"])) == {
        "h-1": "import", "l-1": "live"}
    assert mixed.exit_code == 2 and "leave out --import" in mixed.output
