"""A machine's stateless engines, read from its presence at most once a while."""

from __future__ import annotations

from seedline_contracts.runner import RunnerPresence
from seedline_continuity_resolver.machines import ENGINES_KEPT_SECONDS, StatelessEngines


class CountingDirectory:
    def __init__(self) -> None:
        self.online: dict[str, list[str]] = {}
        self.reads: list[str] = []

    async def presence(self, node_id: str) -> RunnerPresence | None:
        self.reads.append(node_id)
        if node_id not in self.online:
            return None
        return RunnerPresence(node_id=node_id, label=node_id, engines=["claude", "raw"],
                              stateless_engines=self.online[node_id])


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_burst_of_decisions_on_one_machine_reads_its_presence_once():
    machines, clock = CountingDirectory(), Clock()
    machines.online = {"mac": ["raw"], "linux": []}
    engines = StatelessEngines(machines, clock)
    for _ in range(50):
        assert await engines.of("mac") == {"raw"}
        assert await engines.of("linux") == frozenset()
    assert machines.reads == ["mac", "linux"]


async def test_what_was_read_is_read_again_once_the_while_has_passed():
    machines, clock = CountingDirectory(), Clock()
    machines.online = {"mac": ["raw"]}
    engines = StatelessEngines(machines, clock)
    assert await engines.of("mac") == {"raw"}
    machines.online["mac"] = []  # its runner started again, with another configuration
    clock.now += ENGINES_KEPT_SECONDS - 0.1
    assert await engines.of("mac") == {"raw"}
    clock.now += 0.2
    assert await engines.of("mac") == frozenset()
    assert machines.reads == ["mac", "mac"]


async def test_a_machine_found_offline_is_read_again_at_the_next_decision():
    machines, clock = CountingDirectory(), Clock()
    engines = StatelessEngines(machines, clock)
    assert await engines.of("mac") == frozenset()
    machines.online = {"mac": ["raw"]}  # it came online a moment later
    assert await engines.of("mac") == {"raw"}
    assert machines.reads == ["mac", "mac"]
