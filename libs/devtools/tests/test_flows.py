"""docs/flows.md follows the routing tables: a hop is drawn because a route takes it."""

from __future__ import annotations

import dataclasses

from seedline_contracts.events import Reaped
from seedline_devtools.flows import FLOWS, MACHINE, flows_markdown, hops
from seedline_devtools.tables import routing_tables
from seedline_runner_gateway.launching import Launcher


def _flow(name: str):
    return next(flow for flow in FLOWS if flow.name == name)


def test_the_open_goes_resolver_composer_gateway_machine_and_settles_the_request():
    path = [(h.sender, h.receiver, h.handler) for h in hops(_flow("Open"))]
    assert path[0] == ("person", "continuity-resolver", "OpeningApi.open")
    assert ("continuity-resolver", "seed-composer", "Composer.handle_decision") in path
    assert ("seed-composer", "runner-gateway", "Launcher.handle") in path
    assert ("runner-gateway", MACHINE, "") in path
    assert path[-1] == ("runner-gateway", "continuity-resolver", "PendingOpens.settle")


def test_a_route_taken_out_of_a_table_takes_its_hops_out_of_the_drawing():
    tables = routing_tables()
    tables["runner-gateway"] = tuple(
        r for r in tables["runner-gateway"] if r.handler is not Launcher.handle)
    receivers = {h.receiver for h in hops(_flow("Open"), tables)}
    assert MACHINE not in receivers  # nobody launches any more


def test_what_a_route_may_send_beside_the_flow_is_listed_not_drawn():
    tables = routing_tables()
    composer = tables["seed-composer"]
    tables["seed-composer"] = tuple(dataclasses.replace(r, sends=(*r.sends, Reaped))
                                    for r in composer)
    drawn = [h.message for h in hops(_flow("Open"), tables)]
    assert "reaped" not in " ".join(drawn)
    assert "reaped (SEEDLINE_SESSIONS) (Composer.handle_decision)" in flows_markdown(tables)


def test_every_flow_draws_at_least_two_hops_and_each_is_in_the_document():
    text = flows_markdown()
    for flow in FLOWS:
        assert len(hops(flow)) >= 2, flow.name
        assert f"## {flow.name}" in text
