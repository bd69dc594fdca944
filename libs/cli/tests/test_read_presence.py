"""Reading the machines online on a NATS where no Seedline service has started."""

from __future__ import annotations

import nats
import pytest

from seedline_cli.errors import Unreachable
from seedline_cli.runners_cmd import read_presence

pytestmark = pytest.mark.servers


async def test_a_nats_without_the_runners_bucket_says_to_start_seedline(nats_server):
    nc = await nats.connect(nats_server.url)
    try:
        with pytest.raises(Unreachable, match="bucket does not exist yet: no Seedline service"):
            await read_presence(nc)
    finally:
        await nc.close()
