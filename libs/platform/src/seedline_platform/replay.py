"""Read a stream range in order, for catch-up and rebuilds.

An ephemeral consumer with no acks, in memory, removed when idle: the read
leaves nothing behind on the server and costs no fsync.
"""

from __future__ import annotations

from typing import AsyncIterator, Sequence

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js import api as js_api


async def last_seq(js: JetStreamContext, stream: str) -> int:
    info = await js.stream_info(stream)
    return int(info.state.last_seq)


async def replay(
    js: JetStreamContext,
    stream: str,
    subject: str,
    start_seq: int,
    end_seq: int,
    batch: int = 1000,
) -> AsyncIterator[Sequence[Msg]]:
    """Yield batches of messages with start_seq <= seq <= end_seq, in order."""
    if end_seq < start_seq:
        return
    config = js_api.ConsumerConfig(
        deliver_policy=js_api.DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=max(1, start_seq),
        ack_policy=js_api.AckPolicy.NONE,
        inactive_threshold=30.0,
        mem_storage=True,
        max_ack_pending=-1,
    )
    sub = await js.pull_subscribe(subject, stream=stream, config=config)
    try:
        while True:
            try:
                msgs = await sub.fetch(batch, timeout=2.0)
            except NatsTimeout:
                # Nothing more is coming: the range ended in a gap (deleted messages).
                return
            wanted = [m for m in msgs if m.metadata.sequence.stream <= end_seq]
            if wanted:
                yield wanted
            if msgs[-1].metadata.sequence.stream >= end_seq:
                return
    finally:
        try:
            await sub.unsubscribe()
        except Exception:
            pass
