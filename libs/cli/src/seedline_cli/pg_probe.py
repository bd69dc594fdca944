"""Whether the embedded Postgres of SEEDLINE_HOME answers, without the database driver.

`seedline status` asks only whether it answers, and importing psycopg for that cost a
third of the command's start-up. Postgres answers a startup message on its Unix socket with
an authentication request ('R') when it takes connections, or an error ('E') that says why
it does not (starting up, shutting down, in recovery) (the frontend/backend protocol 3.0,
https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-START-UP).
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

PROTOCOL_3 = 196608
TERMINATE = b"X\x00\x00\x00\x04"


def answers(folder: Path, user: str = "postgres", database: str = "seedline",
            timeout: float = 3.0) -> tuple[bool, str | None]:
    """(True, None) when the Postgres whose socket is in ``folder`` takes connections, else
    (False, why)."""
    sockets = sorted(p for p in folder.glob(".s.PGSQL.*") if p.suffix != ".lock")
    if not sockets:
        return False, f"no Postgres socket in {folder}: it is not running"
    body = struct.pack("!i", PROTOCOL_3) + b"".join(
        f"{key}\0{value}\0".encode() for key, value in (("user", user), ("database", database))
    ) + b"\0"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(str(sockets[0]))
            conn.sendall(struct.pack("!i", len(body) + 4) + body)
            kind = conn.recv(1)
            if kind == b"R":
                try:
                    conn.sendall(TERMINATE)  # good manners; the answer is already in
                except OSError:
                    pass
                return True, None
            if kind == b"E":
                return False, _error_text(_read_message(conn))
            return False, f"an answer Postgres does not give ({kind!r})"
    except OSError as exc:
        return False, str(exc.strerror or exc)


def _read_message(conn: socket.socket) -> bytes:
    length = struct.unpack("!i", _exactly(conn, 4))[0]
    return _exactly(conn, length - 4)


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _error_text(fields: bytes) -> str:
    """The message ('M') of an ErrorResponse, with its SQLSTATE ('C')."""
    found = {part[:1]: part[1:].decode("utf-8", "replace") for part in fields.split(b"\0") if part}
    return f"{found.get(b'M', 'an error')} ({found.get(b'C', '?')})"
