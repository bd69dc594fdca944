"""Can this machine work as the runner its configuration names? Connect as it will, with
its own user and the CA it was given, and try what a runner does: listen for its launches,
answer on its own inbox, read the machines' bucket. What goes wrong is said in one sentence
a person can act on: the credentials, the CA, the address, the clock, or the line itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

import nats
from nats.aio.client import Client

from seedline_contracts.subjects import RUNNERS_BUCKET, runner_inbox_prefix, runner_subject

from .config import MachineConfig

CONNECT_SECONDS = 5.0
ASK_SECONDS = 3.0
# Beyond this the machine's times (in what its engines record, in TLS) cannot be trusted.
MAX_SKEW_SECONDS = 60.0
REMOVED_HINT = ("the operator may have removed this machine (`seedline machines remove`) or "
                "the line is mistyped; ask for a new line (`seedline machines add`) and join "
                "again")


class JoinProblem(Exception):
    """Why this machine cannot work as its runner, in one sentence; `kind` names the cause:
    credentials, ca, clock, unreachable, tls, permissions or platform."""

    def __init__(self, kind: str, sentence: str) -> None:
        super().__init__(sentence)
        self.kind = kind
        self.sentence = sentence


@dataclass(frozen=True)
class Checked:
    # How far this machine's clock is ahead of the server's (negative: behind), when known.
    skew_seconds: float | None


def servers_text(config: MachineConfig) -> str:
    return ", ".join(config.urls)


def problem_of(config: MachineConfig, errors: list[BaseException]) -> JoinProblem:
    """The one sentence for what stopped the connection, from everything the client saw."""
    where = servers_text(config)
    for error in errors:
        if "authorization violation" in str(error).lower():
            return JoinProblem("credentials", (
                f"NATS at {where} refused this machine's credentials (user {config.user}): "
                f"{REMOVED_HINT}."))
    for error in errors:
        if isinstance(error, ssl.SSLCertVerificationError):
            said = (error.verify_message or str(error)).lower()
            if "expired" in said or "not yet valid" in said:
                now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
                return JoinProblem("clock", (
                    f"The certificate of NATS at {where} is not valid at this machine's time "
                    f"({now}): this machine's clock is probably wrong; set it right (turn on "
                    "network time) and try again."))
            if "mismatch" in said:
                return JoinProblem("tls", (
                    f"The certificate of NATS at {where} is not made out for that address; "
                    "ask the operator for a line with the address the certificate names."))
            return JoinProblem("ca", (
                f"NATS at {where} answered with a certificate that the CA of this machine's "
                f"configuration ({config.ca_file or 'none: the system CAs'}) did not sign; ask "
                "the operator for a line made with the server's CA (SEEDLINE_NATS_CA_FILE)."))
        if isinstance(error, ssl.SSLError):
            return JoinProblem("tls", (
                f"The TLS handshake with NATS at {where} failed ({error.reason or error}); "
                "check that the URL's scheme (tls:// or nats://) is the one the server "
                "speaks."))
    for error in errors:
        if "secure connection" in str(error).lower() or "tls" in type(error).__name__.lower():
            return JoinProblem("tls", (
                f"NATS at {where} and this machine disagree about TLS: the server wants it "
                "and the URL does not say tls://, or the other way round; ask the operator "
                "for a new line."))
    return JoinProblem("unreachable", (
        f"Cannot reach NATS at {where} from this machine: check the address, that the "
        "server runs, and that its port is open to this machine (a firewall, a VPN)."))


async def connect(config: MachineConfig, *, name: str, errors: list[BaseException],
                  **options) -> Client:
    """A connection as the runner makes it: its user, its CA, its own inbox prefix."""

    async def record(error: BaseException) -> None:
        errors.append(error)

    options.setdefault("error_cb", record)
    return await nats.connect(
        servers=list(config.urls), user=config.user, password=config.password,
        tls=config.tls(), name=name,
        inbox_prefix=runner_inbox_prefix(config.node_id).encode(), **options)


async def check(config: MachineConfig,
                clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> Checked:
    """Raises JoinProblem with the sentence to print."""
    # asyncio warns of a TLS peer that closes as it refuses ("returning true from
    # eof_received() has no effect"): noise beside the sentence that says why.
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    errors: list[BaseException] = []
    try:
        nc = await asyncio.wait_for(connect(
            config, name=f"seedline-runner-check:{config.node_id}", errors=errors,
            allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2),
            CONNECT_SECONDS)
    except Exception as exc:  # the client raises what it last saw, or a bare timeout
        raise problem_of(config, [*errors, exc]) from None
    try:
        return Checked(await _try_as_runner(nc, config, errors, clock))
    finally:
        await nc.close()


async def _try_as_runner(nc: Client, config: MachineConfig, errors: list[BaseException],
                         clock: Callable[[], datetime]) -> float | None:
    await nc.subscribe(runner_subject(config.node_id, "launch"))
    stream = f"KV_{RUNNERS_BUCKET}"
    try:
        reply = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=ASK_SECONDS)
        await nc.flush(ASK_SECONDS)
    except Exception:
        reply = None
    refused = [e for e in errors if "permissions violation" in str(e).lower()]
    if refused:
        raise JoinProblem("permissions", (
            f"NATS accepted the user {config.user}, but it may not act as the machine "
            f"{config.node_id} ({str(refused[0]).strip()}); the line was made for another "
            "machine: use the one `seedline machines add` printed for this one."))
    if reply is None:
        raise JoinProblem("platform", (
            f"NATS at {servers_text(config)} accepted this machine, but JetStream did not "
            "answer; check that the platform's nats-server runs with JetStream, then try "
            "again."))
    body = json.loads(reply.data)
    if "error" in body:
        raise JoinProblem("platform", (
            f"NATS accepted this machine, but the machines' bucket {RUNNERS_BUCKET} does not "
            "exist yet: start the platform's services (they create it), then try again."))
    if not body.get("ts"):
        return None
    skew = (clock() - _parse_time(body["ts"])).total_seconds()
    if abs(skew) > MAX_SKEW_SECONDS:
        way = "ahead of" if skew > 0 else "behind"
        raise JoinProblem("clock", (
            f"This machine's clock is {abs(skew):.0f} s {way} the platform's: set it right "
            "(turn on network time) and try again; the times its engines record would be "
            "wrong."))
    return skew


def _parse_time(text: str) -> datetime:
    """The server's RFC 3339 time, its nanoseconds cut to what Python holds."""
    head, _, rest = text.rstrip("Z").partition(".")
    fraction = rest[:6]
    parsed = datetime.fromisoformat(head + (f".{fraction}" if fraction else ""))
    return parsed.replace(tzinfo=timezone.utc)
