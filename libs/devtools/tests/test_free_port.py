"""free_port: a port for a server about to start, one no client connection takes first."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from seedline_devtools import embedded


def test_the_port_is_below_the_ephemeral_range_and_nothing_holds_it():
    lowest_ephemeral = int(embedded.EPHEMERAL_PORTS.read_text().split()[0])
    for _ in range(50):
        port = embedded.free_port()
        assert embedded.LOWEST_PICKED_PORT <= port < lowest_ephemeral
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_ports_taken_before_any_server_binds_them_are_all_different():
    assert len({embedded.free_port() for _ in range(300)}) == 300


def test_a_port_something_listens_on_is_not_picked(monkeypatch: pytest.MonkeyPatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        picks = [taken, taken]  # drawn twice, then random draws as usual
        randrange = embedded._draws.randrange
        monkeypatch.setattr(embedded._draws, "randrange",
                            lambda low, high: picks.pop() if picks else randrange(low, high))
        assert embedded.free_port() != taken
        assert not picks


def test_with_no_room_below_the_ephemeral_range_the_kernel_picks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    narrow = tmp_path / "ip_local_port_range"
    narrow.write_text("1024\t65535\n")
    monkeypatch.setattr(embedded, "EPHEMERAL_PORTS", narrow)
    port = embedded.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    assert port >= 1024
