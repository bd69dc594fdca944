"""Drive the compose stack from the host, as a person with the `seedline` command would.

Run by deploy/containers/test.sh once `podman-compose up` has returned with every health
check passing. Everything goes through the published ports (NATS 4222 and 8222, Postgres
5432, the web 8080, or the SEEDLINE_HOST_*_PORT test.sh chose where those are taken) and the
`seedline` command's --json output:

1. publish entries, open a conversation on the demo runner (scripted engine), read its
   brief, stop it, and wake it by a fresh chat_user message;
2. kill the timeline-writer's process (SIGKILL to the container's PID 1) while a batch of
   entries is arriving, let `restart: unless-stopped` bring it back, publish more while it
   is away, and check that every entry is in the projection exactly once and that its
   digest equals a rebuild from the stream (`seedline rebuild timeline`).

Prints each step with the time it took; exits 1 with the reason on the first failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SEEDLINE = str(REPO / ".venv" / "bin" / "seedline")
PROJECT = "seedline"
INSTANCE = "compose"
REPO_NAME = "apps/compose-check"
CRASH_REPO = "apps/crash-check"
WHILE_RUNNING, DURING_CRASH, WHILE_AWAY = 200, 3000, 300


def host_port(name: str, default: int) -> int:
    """Where docker-compose.yml published a port on the host (its SEEDLINE_HOST_* variable)."""
    return int(os.environ.get(name) or default)


NATS_PORT = host_port("SEEDLINE_HOST_NATS_PORT", 4222)
MONITOR_PORT = host_port("SEEDLINE_HOST_NATS_MONITOR_PORT", 8222)
POSTGRES_PORT = host_port("SEEDLINE_HOST_POSTGRES_PORT", 5432)
WEB_PORT = host_port("SEEDLINE_HOST_WEB_PORT", 8080)
ENV = {
    **os.environ,
    "SEEDLINE_NATS_URL": f"nats://127.0.0.1:{NATS_PORT}",
    "SEEDLINE_NATS_MONITOR_URL": f"http://127.0.0.1:{MONITOR_PORT}",
    "SEEDLINE_DATABASE_URL":
        f"postgresql://seedline:seedline@127.0.0.1:{POSTGRES_PORT}/seedline",
    "COLUMNS": "100",
    "NO_COLOR": "1",
}


class CheckFailed(Exception):
    pass


def check(condition: bool, why: str) -> None:
    if not condition:
        raise CheckFailed(why)


def seedline(*args: str, ok: bool = True) -> dict:
    """One `seedline ... --json` call; its JSON reply."""
    argv = [SEEDLINE, *args, "--json"]
    result = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=120)
    if ok and result.returncode != 0:
        raise CheckFailed(f"`seedline {' '.join(args)}` exited {result.returncode}: "
                          f"{(result.stderr or result.stdout).strip()}")
    try:
        return json.loads(result.stdout)
    except ValueError:
        raise CheckFailed(f"`seedline {' '.join(args)}` printed no JSON: {result.stdout!r}")


def podman(*args: str) -> str:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise CheckFailed(f"podman {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout.strip()


def wait_for(what: str, probe, timeout: float = 60.0, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise CheckFailed(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def step(title: str):
    def decorate(fn):
        def run(*args):
            print(f"-- {title}", flush=True)
            started = time.monotonic()
            value = fn(*args)
            print(f"   ok ({time.monotonic() - started:.1f} s)", flush=True)
            return value
        return run
    return decorate


# -- the conversation ---------------------------------------------------------------------


def publish(conversation: str, kind: str, content: str, entry_id: str) -> int:
    reply = seedline("publish", "--instance", INSTANCE, "--repo", REPO_NAME, "--conversation",
                     conversation, "--kind", kind, "--content", content, "--entry-id", entry_id)
    check(reply["ok"] and not reply["duplicate"], f"publish {entry_id}: {reply}")
    return reply["seq"]


def live_in_repo() -> list[dict]:
    rows = seedline("conversations", "--instance", INSTANCE)["conversations"]
    return [r for r in rows if r.get("repo") == REPO_NAME]


@step("status: NATS with sync always, Postgres, the four services, the demo runner, the web")
def status() -> None:
    reply = seedline("status", ok=False)
    check(reply.get("ok") is True, f"seedline status reports problems: {reply.get('problems')}")
    check(reply["durability"]["sync_interval"] == "always", f"durability: {reply['durability']}")
    running = {s["name"] for s in reply["services"] if s.get("up")}
    for name in ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway"):
        check(name in running, f"seedline status does not have {name} up: {reply['services']}")
    runners = seedline("runners")
    check(any(r.get("node_id") == "demo-runner" for r in runners.get("runners", [])),
          f"the demo runner is not online: {runners}")
    with urllib.request.urlopen(f"http://127.0.0.1:{WEB_PORT}/readyz", timeout=5) as resp:
        check(resp.status == 200, f"the web process's /readyz answered {resp.status}")
    print(f"   nats-server {reply['nats']['version']} (sync_interval always), "
          f"services up: {', '.join(sorted(running))}; runner demo-runner; "
          f"web /readyz 200 on 127.0.0.1:{WEB_PORT}")


@step("publish two entries")
def publish_history() -> None:
    first = publish("first-chat", "chat_user", "Add a README with install steps", "compose-1")
    second = publish("first-chat", "chat_assistant", "Added README.md with make targets.",
                     "compose-2")
    check(second > first, f"seqs {first}, {second}")
    print(f"   stored as seq {first} and {second}")


@step("open a conversation on the demo runner (scripted engine) and read its brief")
def open_and_brief() -> str:
    opened = seedline("open", "--instance", INSTANCE, "--repo", REPO_NAME, "--engine",
                      "scripted", "--node", "demo-runner", "What were we doing?")
    check(opened.get("ok") is True, f"open: {opened}")
    check(opened["outcome"] == "briefed" and opened["seeded"] is True, f"open: {opened}")
    conversation = opened["session_id"]
    brief = seedline("brief", "show", conversation)
    check("Add a README with install steps" in brief["text"],
          f"the brief lacks the history: {brief['text']!r}")
    check(brief["sha256"] == opened["brief"]["sha256"],
          "the brief read back is not the one the open reported")
    print(f"   {conversation}: {opened['outcome']}, brief of {opened['brief']['rows']} entries")
    return conversation


@step("stop it, then wake it by a fresh chat_user message")
def stop_and_wake(conversation: str) -> None:
    stopped = seedline("stop", conversation, "--reason", "container check")
    check(stopped["stopped"] is True, f"stop: {stopped}")
    wait_for("the stopped conversation to leave the live list",
             lambda: all(r["session_id"] != conversation for r in live_in_repo()))
    publish("first-chat", "chat_user", "Next: add a license file", "compose-3")
    woken = wait_for("a conversation woken by the message",
                     lambda: [r for r in live_in_repo()
                              if r["session_id"] != conversation])
    check(woken[0]["node_id"] == "demo-runner", f"woken on: {woken}")

    def answered():
        entries = timeline(REPO_NAME, session_id=woken[0]["session_id"])
        return [e for e in entries if e["kind"] == "chat_assistant"
                and "Next: add a license file" in e["content"]]

    wait_for("the woken conversation's reply", answered)
    print(f"   woken as {woken[0]['session_id']}, which answered the message")


# -- kill -9 and restart --------------------------------------------------------------------


def timeline(repo: str, session_id: str | None = None) -> list[dict]:
    """Every entry of a repo, paging back 1000 at a time."""
    entries: list[dict] = []
    before: list[str] = []
    while True:
        args = ["timeline", "--instance", INSTANCE, "--repo", repo, "--limit", "1000", *before]
        if session_id:
            args += ["--conversation", session_id]
        page = seedline(*args)
        entries = page["entries"] + entries
        if not page["has_more"] or not page["entries"]:
            return entries
        before = ["--before-seq", str(min(e["seq"] for e in page["entries"]))]


def write_batch(path: Path, prefix: str, count: int) -> None:
    with path.open("w") as out:
        for n in range(count):
            out.write(json.dumps({
                "entry_id": f"{prefix}-{n}", "instance_id": INSTANCE, "repo": CRASH_REPO,
                "session_id": "crash-chat", "kind": "terminal", "content": f"{prefix} line {n}",
            }) + "\n")


def publish_file(path: Path) -> subprocess.Popen:
    # --file goes to the ingest stream (acknowledged by JetStream), so it needs no writer.
    return subprocess.Popen([SEEDLINE, "publish", "--file", str(path), "--json"], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen, what: str) -> dict:
    out, err = proc.communicate(timeout=300)
    check(proc.returncode == 0, f"{what}: exited {proc.returncode}: {err.strip() or out}")
    return json.loads(out)


def writer_consumer() -> dict:
    """The writer's durable on the ingest stream, as nats-server's monitoring port reports it."""
    url = ENV["SEEDLINE_NATS_MONITOR_URL"] + "/jsz?consumers=true"
    with urllib.request.urlopen(url, timeout=5) as resp:
        jsz = json.load(resp)
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            for consumer in stream.get("consumer_detail") or []:
                if stream["name"] == "SEEDLINE_INGEST" and consumer["name"] == "timeline-writer":
                    return consumer
    raise CheckFailed("nats-server lists no timeline-writer consumer on SEEDLINE_INGEST")


def acknowledged() -> int:
    return writer_consumer()["ack_floor"]["stream_seq"]


def writer_container() -> str:
    return podman("ps", "--filter", f"label=com.docker.compose.project={PROJECT}",
                  "--filter", "label=com.docker.compose.service=timeline-writer",
                  "--format", "{{.Names}}")


@step("kill -9 the timeline-writer while entries arrive; its restart policy restarts it")
def kill_and_restart(folder: Path) -> int:
    name = writer_container()
    check(bool(name), "no running timeline-writer container")
    pid, restarts = podman("inspect", "-f", "{{.State.Pid}} {{.RestartCount}}", name).split()
    for prefix, count in (("running", WHILE_RUNNING), ("crash", DURING_CRASH),
                          ("away", WHILE_AWAY)):
        write_batch(folder / f"{prefix}.jsonl", prefix, count)
    finished(publish_file(folder / "running.jsonl"), "publish while running")
    wait_for("the writer to apply the first batch",
             lambda: len(timeline(CRASH_REPO)) == WHILE_RUNNING)
    before = acknowledged()
    during = publish_file(folder / "crash.jsonl")
    # Kill it in the middle of the batch: once it has acknowledged part of it.
    wait_for("the writer to start on the second batch", lambda: acknowledged() > before,
             every=0.05)
    os.kill(int(pid), signal.SIGKILL)
    killed_at = time.monotonic()
    consumer = writer_consumer()
    print(f"   sent SIGKILL to {name} (pid {pid}) in the middle of a batch of {DURING_CRASH}: "
          f"{consumer['ack_floor']['stream_seq'] - before} acknowledged, "
          f"{consumer['num_ack_pending']} delivered to it and not acknowledged, "
          f"{consumer['num_pending']} not yet delivered, the publisher "
          f"{'still sending' if during.poll() is None else 'done'}")
    summary = finished(during, "publish during the crash")
    finished(publish_file(folder / "away.jsonl"), "publish while it restarts")
    print(f"   published {summary.get('published', '?')} entries around the kill")

    def restarted():
        state = podman("inspect", "-f", "{{.State.Status}} {{.State.Pid}} {{.RestartCount}}",
                       name).split()
        return state if state[0] == "running" and state[1] not in ("0", pid) else None

    status, new_pid, new_restarts = wait_for("the restart policy to start it again", restarted)
    check(int(new_restarts) > int(restarts), f"restart count {restarts} -> {new_restarts}")
    wait_for("its health check (/readyz) to pass",
             lambda: subprocess.run(["podman", "healthcheck", "run", name],
                                    capture_output=True).returncode == 0, timeout=90)
    back = time.monotonic() - killed_at
    print(f"   {status} again as pid {new_pid} (restart {new_restarts}), ready {back:.1f} s "
          "after the kill")
    return WHILE_RUNNING + DURING_CRASH + WHILE_AWAY


@step("nothing lost: every entry once in the projection, its digest equal to a rebuild")
def nothing_lost(expected: int) -> None:
    entries = wait_for(f"all {expected} entries in the projection",
                       lambda: (lambda rows: rows if len(rows) >= expected else None)(
                           timeline(CRASH_REPO)), timeout=120, every=1.0)
    ids = [e["entry_id"] for e in entries]
    want = {f"{p}-{n}" for p, c in (("running", WHILE_RUNNING), ("crash", DURING_CRASH),
                                   ("away", WHILE_AWAY)) for n in range(c)}
    check(len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} entries stored twice")
    check(set(ids) == want, f"missing {sorted(want - set(ids))[:5]}, extra "
                            f"{sorted(set(ids) - want)[:5]}")
    seqs = [e["seq"] for e in entries]
    check(seqs == sorted(seqs), "the entries are not in seq order")
    rebuilt = seedline("rebuild", "timeline", ok=False)
    check(rebuilt.get("equal") is True, f"the rebuild differs: {rebuilt}")
    print(f"   {len(ids)} of {expected} entries, each once; rebuild of {rebuilt['rows']} rows "
          f"in {rebuilt['seconds']:.2f} s, digest {rebuilt['after_digest'][:16]}... equal")


def main() -> int:
    try:
        status()
        publish_history()
        stop_and_wake(open_and_brief())
        with tempfile.TemporaryDirectory(prefix="seedline-compose-") as folder:
            nothing_lost(kill_and_restart(Path(folder)))
    except CheckFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
