"""The data-folder lock of `seedline up`: held by a real second process, released by kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from seedline_core.notices import wording_violations
from seedline_supervisor.leftovers import stop_left_nats
from seedline_supervisor.lock import LOCK_NAME, DataFolderLock, FolderInUse
from seedline_devtools.embedded import free_port, nats_config, nats_server_binary, wait_for_port

HOLD = """
import sys, time
from pathlib import Path
from seedline_supervisor.lock import DataFolderLock
lock = DataFolderLock(Path(sys.argv[1]))
lock.acquire(int(sys.argv[2]), int(sys.argv[3]))
print("held", flush=True)
time.sleep(600)
"""


def hold_in_another_process(home: Path, nats_port: int = 4333) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home), str(nats_port), "8333"],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_held_folder_is_refused_with_the_holder_named_and_nothing_written(tmp_path):
    holder = hold_in_another_process(tmp_path)
    try:
        note = (tmp_path / LOCK_NAME).read_bytes()
        for attempt in (DataFolderLock(tmp_path).check,
                        lambda: DataFolderLock(tmp_path).acquire(4444, 8444)):
            with pytest.raises(FolderInUse) as refused:
                attempt()
            message = str(refused.value)
            assert f"pid {holder.pid}" in message and "NATS port 4333" in message
            assert "started at 20" in message and f"kill {holder.pid}" in message
        assert (tmp_path / LOCK_NAME).read_bytes() == note
    finally:
        holder.kill()
        holder.wait()


def test_kill_9_of_the_holder_frees_the_folder_and_its_stale_note_is_taken_over(tmp_path):
    holder = hold_in_another_process(tmp_path)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    left = json.loads((tmp_path / LOCK_NAME).read_text())
    assert left["pid"] == holder.pid  # the note outlives the process; the lock does not

    lock = DataFolderLock(tmp_path)
    lock.check()
    lock.acquire(5555, 8555)
    try:
        note = json.loads((tmp_path / LOCK_NAME).read_text())
        assert (note["pid"], note["nats_port"]) == (os.getpid(), 5555)
    finally:
        lock.release()
    assert (tmp_path / LOCK_NAME).read_text() == ""


def test_checking_a_folder_that_does_not_exist_creates_nothing(tmp_path):
    DataFolderLock(tmp_path / "none").check()
    assert not (tmp_path / "none").exists()


def test_a_nats_server_left_running_by_a_killed_up_is_named_and_stopped_before_anything_starts(
        tmp_path):
    """kill -9 of `seedline up` may leave the nats-server it started running: a new one on
    the same folder would share that server's JetStream store. It is named, then stopped."""
    nats_dir = tmp_path / "nats"
    nats_dir.mkdir()
    config = nats_dir / "nats.conf"
    port = free_port()
    config.write_text(nats_config(port, free_port(), nats_dir / "jetstream"))
    server = subprocess.Popen([nats_server_binary(), "-c", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc=server)  # until then its command line may read as empty
        (tmp_path / LOCK_NAME).write_text(json.dumps({
            "pid": 999_999_999, "started_at": "2026-12-01T10:00:00Z", "nats_port": port,
            "monitor_port": 1, "nats_pid": server.pid,
        }))
        left = DataFolderLock(tmp_path).check()
        assert left is not None and left.nats_pid == server.pid
        with pytest.raises(FolderInUse) as refused:  # never shared while it runs
            DataFolderLock(tmp_path).acquire(free_port(), free_port())
        assert f"nats-server (pid {server.pid}, port {port}) still runs" in str(refused.value)

        said = stop_left_nats(left, tmp_path)
        assert server.wait(10) == 0  # SIGTERM: it closed its store and exited cleanly
        assert f"its nats-server (pid {server.pid}, port {port})" in said
        assert "pid 999999999" in said and not wording_violations(said)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
    lock = DataFolderLock(tmp_path)
    assert lock.check() is None
    lock.acquire(free_port(), free_port())  # the server is gone: the note is only stale now
    lock.release()
