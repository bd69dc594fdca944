"""The embedded Postgres started again after a kill -9, as `seedline up`'s supervisor does it."""

from __future__ import annotations

import os
from pathlib import Path
import signal
import time

import psycopg
import pytest

from seedline_devtools import embedded


@pytest.fixture
def pg_dir():
    """A data folder with a short path: Postgres's socket lives in it, and a socket path
    may hold at most 107 bytes (pytest's own folders grow past that)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="pg-"))
    yield folder / "pg"
    shutil.rmtree(folder, ignore_errors=True)

pytestmark = [pytest.mark.servers, pytest.mark.slow]


def test_a_killed_postgres_starts_again_and_a_second_start_finds_it_running(pg_dir):
    postgres = embedded.start_postgres(pg_dir)
    try:
        postgres.admin_sql("CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)")
        killed = postgres.postmaster_pid()
        assert killed and postgres.running()
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while embedded.pid_alive(killed) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not postgres.running()

        postgres.restart()
        started = postgres.postmaster_pid()
        assert started != killed and postgres.running()
        # An attempt that comes after an earlier one already started it (the supervisor retries
        # when a start took long) finds the same server instead of failing on its lock file.
        postgres.restart()
        assert postgres.postmaster_pid() == started
        with psycopg.connect(postgres.url(), autocommit=True) as conn:
            assert conn.execute("SELECT n FROM kept").fetchone() == (7,)
    finally:
        postgres.stop()


UNDER_A_SUBREAPER = """
import ctypes, os, signal, sys, time
from pathlib import Path
import psycopg
from seedline_devtools import embedded

# As a runner does: orphans below this process become its children, and it never reaps
# the killed postmaster, which so stays a zombie.
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
postgres = embedded.start_postgres(Path(sys.argv[1]))
killed = postgres.postmaster_pid()
os.kill(killed, signal.SIGKILL)
while embedded.pid_alive(killed):
    time.sleep(0.05)
assert Path(f"/proc/{killed}").exists(), "the killed postmaster is a zombie here"
postgres.restart()
with psycopg.connect(postgres.url(), autocommit=True) as conn:
    assert conn.execute("SELECT 1").fetchone() == (1,)
postgres.stop()
print("started again")
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux only (prctl, /proc)")
def test_a_killed_postgres_nobody_reaps_starts_again(pg_dir):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", UNDER_A_SUBREAPER, str(pg_dir)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0 and "started again" in done.stdout, done.stdout + done.stderr
