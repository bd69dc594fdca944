"""The seed-composer's object graph, built the same way in the service and in tests: real
adapters there, fakes here, given as `Ports`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from seedline_contracts.events import SeedComposed
from seedline_contracts.instances import Erasure
from seedline_contracts.times import now_text
from seedline_platform.erasure import ErasureFollower, Forgotten
from seedline_platform.observability import ServiceMetrics
from seedline_platform.publishing import Publisher
from seedline_platform.sealing import Sealer, unsealed
from seedline_platform.settings import Settings

from .briefs import BriefStore
from .handlers import Composer
from .reader import TimelineReader
from .summary import summarizer_from

NAME = "seed-composer"


async def _nothing_to_drop(_: Erasure) -> None:
    return None


@dataclass
class Ports:
    """What the seed-composer talks to."""

    publisher: Publisher
    reader: TimelineReader
    store: BriefStore
    # The newest seed_composed recorded for a conversation (SEEDLINE_SESSIONS).
    recorded: Callable[[str], Awaitable[SeedComposed | None]]
    sealer: Sealer = field(default_factory=unsealed)
    metrics: ServiceMetrics = field(default_factory=lambda: ServiceMetrics(NAME))
    clock: Callable[[], str] = now_text
    # Erasures followed (a JetStream context; none in tests) and what each drops here.
    js: object | None = None
    drop_forgotten: Callable[[Erasure], Awaitable[None]] = _nothing_to_drop


@dataclass
class Parts:
    composer: Composer
    forgetting: ErasureFollower


def bootstrap(settings: Settings, ports: Ports) -> Parts:
    forgotten = Forgotten()
    return Parts(
        composer=Composer(ports, budget_for=settings.brief_budget,
                          summarizer=summarizer_from(settings), forgotten=forgotten),
        forgetting=ErasureFollower(ports.js, ports.drop_forgotten, settings.stream_replicas,
                                   forgotten),
    )
