"""The embedded Postgres started again after a kill -9, as `seedline up`'s supervisor does it."""

from __future__ import annotations

import os
import signal
import time

import psycopg
import pytest

from seedline_devtools import embedded

pytestmark = [pytest.mark.servers, pytest.mark.slow]


def test_a_killed_postgres_starts_again_and_a_second_start_finds_it_running(tmp_path):
    postgres = embedded.start_postgres(tmp_path / "pg")
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
