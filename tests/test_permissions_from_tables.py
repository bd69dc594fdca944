"""The NATS permissions of every process are its routing table's: proven against a real
nats-server running the generated users (the generator that writes deploy/nats-secure.conf).

For every row of every table: each subject it answers or listens to may be subscribed, and
each subject it may send (its parking place included) may be published, by that process's
own user; a subject that no row of that process names, taken from what other processes
send and answer, is refused. A handler that sends anything its row does not declare is
an error before it reaches the server (seedline_platform.routing.check_send).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import nats
import pytest

from seedline_contracts import subjects
from seedline_devtools import nats_auth
from seedline_devtools.embedded import start_nats
from seedline_devtools.tables import routing_tables
from seedline_platform.routing import Kind
from seedline_platform.subject_match import subject_matches

pytestmark = pytest.mark.servers

TABLES = routing_tables()
PASSWORD = "secret-of-{}"


@dataclass
class Violations:
    seen: list[str] = field(default_factory=list)

    async def record(self, error: Exception) -> None:
        self.seen.append(str(error).lower())


def concrete(pattern: str) -> str:
    """A subject the filter takes: each `*` a token, a final `>` one token."""
    return ".".join("tok" if t in ("*", ">") else t for t in pattern.split("."))


def listens(service: str) -> set[str]:
    return {f for route in TABLES[service]
            if route.kind in (Kind.REQUEST, Kind.MESSAGE, Kind.BROADCAST) for f in route.filters}


def sends(service: str) -> set[str]:
    return {f for route in TABLES[service] for f in route.send_filters}


@pytest.fixture
def server(tmp_path: Path):
    block = nats_auth.authorization_block(
        {service: PASSWORD.format(service) for service in TABLES}, {})
    process = start_nats(tmp_path / "nats", extra=block)
    try:
        yield process
    finally:
        process.stop()


async def connected(server, service: str, violations: Violations):
    user = nats_auth.service_user_name(service)
    return await nats.connect(
        f"nats://{user}:{PASSWORD.format(service)}@127.0.0.1:{server.port}",
        inbox_prefix=subjects.service_inbox_prefix(service), error_cb=violations.record,
        allow_reconnect=False)


async def settled(nc) -> None:
    """Every violation the server reports for what was sent so far has arrived."""
    await nc.flush()
    await asyncio.sleep(0.3)


@pytest.mark.parametrize("service", sorted(TABLES))
async def test_every_row_of_a_process_is_allowed_and_nothing_else(server, service):
    violations = Violations()
    nc = await connected(server, service, violations)
    try:
        for subject in sorted(listens(service)):
            await nc.subscribe(subject)
        for subject in sorted(sends(service)):
            await nc.publish(concrete(subject), b"{}")
        await settled(nc)
        assert violations.seen == [], f"{service}'s own rows were refused: {violations.seen}"

        # What other processes send and answer, where no row of this one names it.
        own_sends, own_listens = sends(service), listens(service)
        foreign_sends = sorted({s for other in TABLES if other != service for s in sends(other)
                                if not any(subject_matches(concrete(s), mine)
                                           for mine in own_sends)})
        foreign_listens = sorted({s for other in TABLES if other != service
                                  for s in listens(other) if s not in own_listens})
        assert foreign_sends or foreign_listens
        for subject in foreign_sends:
            await nc.publish(concrete(subject), b"{}")
        for subject in foreign_listens:
            await nc.subscribe(subject)
        await settled(nc)
        refused = " ".join(violations.seen)
        for subject in foreign_sends:
            assert f'publish to "{concrete(subject).lower()}"' in refused, subject
        for subject in foreign_listens:
            assert f'subscription to "{subject.lower()}"' in refused, subject
    finally:
        await nc.close()


async def test_the_gateway_may_record_a_resume_lost_and_tell_the_person(server):
    # The event a machine's resume_lost becomes, and the notice behind it (CONTRACT.md 7).
    violations = Violations()
    nc = await connected(server, "runner-gateway", violations)
    try:
        await nc.publish(subjects.session_event_subject("csess_1", "resume_lost"), b"{}")
        await nc.publish(subjects.notify_subject("inst-a"), b"{}")
        await settled(nc)
        assert violations.seen == []
    finally:
        await nc.close()
