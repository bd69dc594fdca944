"""How many long-lived streams (notices over Server-Sent Events, the console's live pages)
the web process holds open: in all, per token and per client address.

Each stream holds a NATS consumer and a task for as long as it is open. Without a cap per
token, one token could take every stream the process allows (from two addresses) and
leave every other instance and console with none; so one token, and one address, get a
share (SEEDLINE_WEB_MAX_STREAMS_PER_TOKEN, ..._PER_CLIENT), refused with 429 naming the
cap, and only the process as a whole answers 503 when it is full. A console login counts
against its token.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from seedline_platform.logging import get_logger

from .errors import WebError

log = get_logger(__name__)

MAX_STREAMS = 200


@dataclass(frozen=True)
class Slot:
    token: str  # a digest of the token, never the token
    client: str


class StreamSlots:
    def __init__(self, per_token: int, per_client: int, total: int = MAX_STREAMS) -> None:
        self.per_token = per_token
        self.per_client = per_client
        self.total = total
        self._tokens: Counter[str] = Counter()
        self._clients: Counter[str] = Counter()
        self.open = 0

    def take(self, token: str, client: str) -> Slot:
        """A slot for one more stream, or the refusal that names the cap reached."""
        if self._tokens[token] >= self.per_token:
            log.info("stream_refused", reason="token_cap", limit=self.per_token)
            raise WebError("too_many_streams", (
                f"This token already holds {self.per_token} open streams "
                "(SEEDLINE_WEB_MAX_STREAMS_PER_TOKEN); close one (another tab or client "
                "using the same token) and try again."))
        if self._clients[client] >= self.per_client:
            log.info("stream_refused", reason="client_cap", client=client, limit=self.per_client)
            raise WebError("too_many_streams", (
                f"This address already holds {self.per_client} open streams "
                "(SEEDLINE_WEB_MAX_STREAMS_PER_CLIENT); close one and try again."))
        if self.open >= self.total:
            log.info("stream_refused", reason="process_cap", limit=self.total)
            raise WebError("unavailable", f"This web process already serves {self.total} "
                           "streams; try again later.")
        self._tokens[token] += 1
        self._clients[client] += 1
        self.open += 1
        return Slot(token, client)

    def give_back(self, slot: Slot) -> None:
        for counter, key in ((self._tokens, slot.token), (self._clients, slot.client)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]
        self.open -= 1
