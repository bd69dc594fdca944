"""Every process's routing table, by the name it connects to NATS with: the one source the
permissions, the client's directory, the AsyncAPI document and the flow map come from."""

from __future__ import annotations

from seedline_platform.routing import Route
from seedline_platform.settings import Settings


def routing_tables(settings: Settings | None = None) -> dict[str, tuple[Route, ...]]:
    """Each table under `settings` (default: the defaults): read, nothing started."""
    from seedline_continuity_resolver.routes import routes as resolver
    from seedline_runner_gateway.routes import routes as gateway
    from seedline_seed_composer.routes import routes as composer
    from seedline_timeline_writer.routes import routes as writer
    from seedline_web.routes import routes as web

    settings = settings or Settings()
    return {"timeline-writer": writer(settings), "continuity-resolver": resolver(settings),
            "seed-composer": composer(settings), "runner-gateway": gateway(settings),
            "seedline-web": web(settings)}


def answered_by() -> dict[str, str]:
    """Which process answers each request/reply API."""
    return {route.subject: service for service, table in routing_tables().items()
            for route in table if route.api is not None}
