"""A full disk is a state, not a crash: `seedline up` on a small filesystem of its own (a
tmpfs this test mounts) that fills up keeps running, names the disk on every surface (its
own output, the CLI, HTTP 507, MCP, `seedline status`), counts exactly what NATS
acknowledged, and once the space is freed carries on by itself, having lost nothing.

Mounting needs root (or CAP_SYS_ADMIN); elsewhere the test is skipped and says so."""

from __future__ import annotations

import errno
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest

from seedline_core.notices import wording_violations
from seedline_devtools.embedded import free_port
from seedline_platform.disk_space import free_bytes

pytestmark = [pytest.mark.slow, pytest.mark.servers]

READY_LINE = "Seedline is up."
DISK_SIZE_MB = 384
NEEDED_MB = 64  # SEEDLINE_MIN_FREE_MB: what the test's small disk must keep free (room for
# Postgres's next 16 MB WAL file while it writes what was taken before the refusal)
ENTRY_CHARS = 40_000
INSTANCE = "demo"


def mount_small_disk(folder: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem for the data folder needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE_MB}m", "tmpfs",
                           str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")


def unmount(folder: Path) -> None:
    if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path, leave: int) -> Path | None:
    """A file that takes all but ``leave`` bytes of the folder's disk (or all of it); None
    when the disk is too full for even a new file's name (what was asked, to the last byte:
    the running services took the rest first)."""
    filler = folder / f"filler-{len(list(folder.glob('filler-*')))}"
    size = max(0, free_bytes(folder) - leave)
    try:
        # Unbuffered: a write the full disk refused leaves nothing for the close to flush
        # (a buffered file raised ENOSPC again on closing).
        handle = open(filler, "wb", buffering=0)
    except OSError as exc:
        if leave == 0 and exc.errno == errno.ENOSPC:
            return None
        raise
    with handle:
        try:
            os.posix_fallocate(handle.fileno(), 0, size)
        except OSError:
            pass  # as much as there was
        if leave == 0:  # to the last byte, as a disk fills
            try:
                while True:
                    handle.write(b"\0" * 65536)
            except OSError:
                pass
    return filler


class Up:
    def __init__(self, root: Path, home: Path) -> None:
        self.nats_port, self.monitor_port = free_port(), free_port()
        self.web_port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")}
        self.env.update(SEEDLINE_HOME=str(home), PYTHONUNBUFFERED="1",
                        SEEDLINE_WEB_PORT=str(self.web_port),
                        SEEDLINE_MIN_FREE_MB=str(NEEDED_MB), COLUMNS="300")
        self.cli_env = {**self.env, "SEEDLINE_NATS_URL": f"nats://127.0.0.1:{self.nats_port}",
                        "SEEDLINE_NATS_MONITOR_URL": f"http://127.0.0.1:{self.monitor_port}"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seedline_cli", "up", "--nats-port", str(self.nats_port),
             "--monitor-port", str(self.monitor_port)],
            cwd=root, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.seen: list[str] = []
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in iter(self.proc.stdout.readline, ""):
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in " ".join(" ".join(self.seen).split()):  # rich wraps long lines
                return
            try:
                line = self._lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("seedline up exited:\n" + "".join(self.seen))
            self.seen.append(line)
        raise AssertionError(f"no {text!r} within {timeout:g} s:\n" + "".join(self.seen))

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "seedline_cli", *args], env=self.cli_env,
                              input=stdin, capture_output=True, text=True, timeout=120)

    def http(self, method: str, path: str, token: str, body: dict) -> tuple[int, dict]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.web_port}{path}", data=json.dumps(body).encode(),
            method=method, headers={"Authorization": f"Bearer {token}",
                                    "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                return reply.status, json.load(reply)
        except urllib.error.HTTPError as refused:
            return refused.code, json.load(refused)


def entries_file(path: Path, prefix: str, count: int, repo: str) -> Path:
    lines = [json.dumps({"entry_id": f"{prefix}{n}", "instance_id": INSTANCE, "repo": repo,
                         "session_id": f"chat-{prefix}", "kind": "terminal",
                         "content": f"{n} " + "x" * ENTRY_CHARS, "at": "2026-12-01T10:00:00Z"})
             for n in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def mcp_send_message(up: Up, repo: str, text: str) -> dict:
    """One MCP tool call over stdio, as an agent makes it; its result."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "send_message", "arguments": {"repo": repo, "text": text}}},
    ]
    # Stdin stays open until the answer comes: the server ends when its stdin does.
    server = subprocess.Popen([sys.executable, "-m", "seedline_cli", "mcp", "--instance",
                               INSTANCE], env=up.cli_env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for message in messages:
            server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
        for line in iter(server.stdout.readline, ""):
            reply = json.loads(line)
            if reply.get("id") == 2:
                assert "result" in reply, reply
                return reply["result"]
        raise AssertionError(f"no answer to the tool call: {server.stderr.read()}")
    finally:
        server.stdin.close()
        try:
            server.wait(30)
        finally:
            if server.poll() is None:
                server.kill()


def stored(home: Path, prefix: str) -> list[str]:
    """The entry ids of this prefix in the timeline projection, one row each (a timeline
    read of them all would be over NATS's largest message)."""
    url = f"postgresql://postgres@/seedline?host={home / 'postgres'}"
    with psycopg.connect(url, connect_timeout=10) as conn:
        return [row[0] for row in conn.execute(
            "SELECT entry_id FROM timeline_entries WHERE entry_id LIKE %s", (prefix + "%",))]


def until(probe, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := probe():
            return found
        time.sleep(0.5)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def test_a_full_disk_is_named_everywhere_and_seedline_carries_on_once_there_is_room():
    root = Path(tempfile.mkdtemp(prefix="seedline-full-disk-"))
    home = root / "home"
    home.mkdir()
    mount_small_disk(home)
    up = None
    try:
        up = Up(root, home)
        up.wait_for(READY_LINE, 240)
        disk = str(home.resolve())
        token = json.loads(up.cli("tokens", "create", "--instance", INSTANCE, "--json").stdout
                           )["token"]
        before = up.cli("publish", "--file", str(entries_file(root / "a.jsonl", "a-", 20,
                                                               "apps/a")), "--json")
        assert before.returncode == 0 and json.loads(before.stdout)["published"] == 20, before

        # 1. The disk fills while a file is published: the publisher stops once the disk is
        # short of room, and says how many entries NATS acknowledged, which are those stored.
        fill(home, leave=(NEEDED_MB + 6) * 1_000_000)
        file_c = entries_file(root / "c.jsonl", "c-", 200, "apps/c")
        stopped = up.cli("publish", "--file", str(file_c), "--window", "8", "--json")
        assert stopped.returncode == 1, stopped.stdout + stopped.stderr
        refused = json.loads(stopped.stdout)
        assert refused["error"]["code"] == "disk_full", refused
        assert f"The disk that holds {disk} is full" in refused["error"]["message"]
        acknowledged = refused["published"]
        assert 0 < acknowledged < 200, refused
        up.wait_for(f"The disk that holds {disk} is full", 30)
        until(lambda: len(stored(home, "c-")) >= acknowledged, 60,
              "the acknowledged entries readable")
        assert len(stored(home, "c-")) == acknowledged

        # 2. Full to the last byte: writes now fail under NATS and Postgres themselves.
        fill(home, leave=0)
        assert up.proc.poll() is None
        one = up.cli("publish", "--instance", INSTANCE, "--repo", "apps/a", "--conversation",
                     "chat-a-", "--kind", "chat_user", "--content", "one more")
        assert one.returncode == 1 and f"The disk that holds {disk} is full" in one.stderr, one
        assert "did not answer" not in one.stderr and not wording_violations(one.stderr)
        status, body = up.http("POST", f"/v1/instances/{INSTANCE}/entries", token,
                               {"entry_id": "http-1", "repo": "apps/a", "session_id": "chat-h",
                                "kind": "chat_user", "content": "over HTTP"})
        assert status == 507 and body["error"]["code"] == "disk_full", body
        assert f"The disk that holds {disk} is full" in body["error"]["message"]
        tool = mcp_send_message(up, "apps/a", "over MCP")
        assert tool["isError"] and f"The disk that holds {disk} is full" in (
            tool["content"][0]["text"]), tool
        checked = up.cli("status", "--json")
        assert checked.returncode == 1, checked.stdout
        assert json.loads(checked.stdout)["disk"]["full"] is True
        assert any(p.startswith(f"The disk that holds {disk} is full")
                   for p in json.loads(checked.stdout)["problems"])
        time.sleep(3)  # the system runs a while on the full disk: background writes fail
        assert up.proc.poll() is None, "".join(up.seen)

        # 3. Space is freed: it carries on by itself, and the same file again stores what
        # was missing, each entry once.
        for filler in home.glob("filler-*"):
            filler.unlink()
        up.wait_for(f"There is room on the disk that holds {disk} again", 30)
        until(lambda: up.cli("publish", "--instance", INSTANCE, "--repo", "apps/a",
                             "--conversation", "chat-a-", "--kind", "chat_user", "--content",
                             "room again", "--entry-id", "a-room").returncode == 0,
              180, "a publish after the disk had room again")
        again = up.cli("publish", "--file", str(file_c), "--json")
        assert again.returncode == 0, again.stdout + again.stderr
        assert json.loads(again.stdout)["published"] == 200
        until(lambda: len(stored(home, "c-")) >= 200, 120, "every entry readable")
        c_entries = stored(home, "c-")
        assert sorted(c_entries) == sorted(f"c-{n}" for n in range(200))  # each once
        a_entries = stored(home, "a-")
        assert sorted(a_entries) == sorted([*(f"a-{n}" for n in range(20)), "a-room"])
        assert up.proc.poll() is None
    except BaseException:
        if up is not None:  # what seedline up said, and the disk, shown with the failure
            print("".join(up.seen), subprocess.run(["df", "-k", str(home)], text=True,
                                                   capture_output=True).stdout)
        raise
    finally:
        if up is not None:
            up.proc.send_signal(signal.SIGINT)
            try:
                up.proc.wait(90)
            finally:
                if up.proc.poll() is None:
                    up.proc.kill()
        unmount(home)
        shutil.rmtree(root, ignore_errors=True)
