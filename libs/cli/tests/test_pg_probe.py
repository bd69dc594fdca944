"""`seedline status` asks the embedded Postgres whether it answers on its socket: over a
stand-in that speaks the first message of the protocol, no Postgres needed."""

from __future__ import annotations

import socket
import struct
import tempfile
import threading
from pathlib import Path

from seedline_cli.pg_probe import answers


def stand_in(folder: Path, reply: bytes) -> threading.Thread:
    """A socket where Postgres keeps its own, answering one startup message with ``reply``."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(folder / ".s.PGSQL.5432"))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn, server:
            length = struct.unpack("!i", conn.recv(4))[0]
            startup = conn.recv(length - 4)
            assert b"user\0postgres\0database\0seedline\0" in startup
            conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def short_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp"))  # a socket path has 108 bytes


def test_a_postgres_that_asks_to_authenticate_answers():
    folder = short_folder()
    thread = stand_in(folder, b"R" + struct.pack("!ii", 8, 0))
    assert answers(folder) == (True, None)
    thread.join(5)


def test_a_postgres_that_refuses_says_why_with_its_sqlstate():
    folder = short_folder()
    fields = b"SFATAL\0C57P03\0Mthe database system is starting up\0\0"
    thread = stand_in(folder, b"E" + struct.pack("!i", len(fields) + 4) + fields)
    assert answers(folder) == (False, "the database system is starting up (57P03)")
    thread.join(5)


def test_no_socket_is_a_postgres_that_is_not_running(tmp_path):
    up, why = answers(tmp_path)
    assert not up and "not running" in why
