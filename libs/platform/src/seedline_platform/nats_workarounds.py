"""Every place Seedline reaches past nats.py's public API (nats-py 2.16), in one module.

Each says what it works around and the upstream report where there is one;
`libs/platform/tests/test_nats_workarounds.py` fails when a nats.py release no longer
needs one, so it can go. (`seedline_platform.tasks` covers a CPython 3.11 fault that
nats.py's requests meet, gh-86296.)
"""

from __future__ import annotations

from collections.abc import Callable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext


def connection_of(js: JetStreamContext) -> Client:
    """The connection a JetStream context publishes on. nats.py has no public accessor:
    an atomic batch sends its body as plain publishes on that connection, and a consumer
    flushes its own acks on it before it reads the consumer's state."""
    return js._nc  # noqa: SLF001


def on_reconnect(nc: Client, listener: Callable[[], None]) -> Callable[[], None]:
    """Call `listener` each time `nc` connects again, as well as the callback it was made
    with: nats.py keeps one callback, set when connecting. Returns what stops the calls."""
    listeners: list[Callable[[], None]] | None = getattr(nc, "_seedline_reconnected", None)
    if listeners is None:
        listeners = []
        made_with = nc._reconnected_cb  # noqa: SLF001

        async def reconnected() -> None:
            for each in list(listeners):
                each()
            if made_with is not None:
                await made_with()

        nc._reconnected_cb = reconnected  # noqa: SLF001
        nc._seedline_reconnected = listeners  # type: ignore[attr-defined]
    listeners.append(listener)

    def forget() -> None:
        if listener in listeners:
            listeners.remove(listener)

    return forget


def survive_abandoned_flushes(nc: Client) -> None:
    """nats.py answers each PONG by setting the result of the oldest flush's future, even
    when that flush was cancelled or timed out: InvalidStateError ends its read loop, and
    the connection looks up but reads nothing again (nats-io/nats.py#624, #469). A
    cancelled flush (a service stopping mid-batch, a `flush(timeout=2)` on a busy server)
    must not cost the connection, so each PONG takes its own waiter and skips one nobody
    waits for."""

    async def process_pong() -> None:
        if nc._pongs:  # noqa: SLF001
            waiter = nc._pongs.pop(0)  # noqa: SLF001
            if not waiter.done():
                waiter.set_result(True)
            nc._pongs_received += 1  # noqa: SLF001
            nc._pings_outstanding = 0  # noqa: SLF001

    nc._process_pong = process_pong  # noqa: SLF001


def fetch_queued_without_a_task(
    pull: JetStreamContext.PullSubscription,
) -> JetStreamContext.PullSubscription:
    """nats.py's `Subscription.next_msg` makes a uuid4 (a getrandom system call), a task and
    a timer for every message, even one already waiting in the subscription's queue; a pull
    `fetch` calls it once for each message it returns and once more for the server's "no
    more" that ends the request. On `pull`, a message already queued is taken at once; only
    a wait for one that has not arrived goes through nats.py's own path (its task, which a
    closing subscription cancels). Returns `pull` (anything else, a test's fake, as it is)."""
    if not isinstance(pull, JetStreamContext.PullSubscription):
        return pull
    sub = pull._sub  # noqa: SLF001
    waiting_path = sub.next_msg
    queue = sub._pending_queue  # noqa: SLF001

    async def next_msg(timeout: float | None = 1.0) -> Msg:
        if queue.empty() or sub._conn.is_closed:  # noqa: SLF001
            return await waiting_path(timeout)
        msg = queue.get_nowait()
        sub._pending_size -= len(msg.data)  # noqa: SLF001
        queue.task_done()
        return msg

    sub.next_msg = next_msg  # type: ignore[method-assign]
    return pull
