"""What a relocation adds for a dirty working tree (CONTRACT.md 6): the save on the machine
it leaves (the snapshot taken, sealed and stored in the object store) and the arrival on the
one it goes to (fetched, opened, applied all or nothing), against moving the same changes
by hand between the same two clones on the same machine: `git diff --binary HEAD | git
apply` and the untracked files copied with tar.

Each round makes a dirty tree of the given size in the first clone (half of it a change to
a tracked binary file, half new untracked files), then resets the second clone. A real
nats-server with sync_interval: always holds the object store.

    python -m bench.worktree_move [--rounds 3] [--sizes 1,20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench import report

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          input=stdin, env=GIT_ENV).stdout


def _clones(root: Path) -> tuple[Path, Path]:
    root.mkdir(parents=True)
    origin, seed = root / "origin.git", root / "seed"
    _git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(root, "clone", "-q", str(origin), str(seed))
    (seed / "assets.bin").write_bytes(os.urandom(1024))
    _git(seed, "add", ".")
    _git(seed, "commit", "-qm", "first")
    _git(seed, "push", "-q", "origin", "main")
    a, b = root / "a", root / "b"
    _git(root, "clone", "-q", str(origin), str(a))
    _git(root, "clone", "-q", str(origin), str(b))
    return a, b


def _dirty(a: Path, megabytes: int) -> None:
    half = megabytes * 1024 * 1024 // 2
    (a / "assets.bin").write_bytes(os.urandom(half))
    new = a / "generated"
    new.mkdir(exist_ok=True)
    for n in range(8):
        (new / f"part-{n}.bin").write_bytes(os.urandom(half // 8))


def _clean(b: Path) -> None:
    _git(b, "checkout", "-q", "main")
    _git(b, "reset", "-q", "--hard", "origin/main")
    _git(b, "clean", "-q", "-f", "-d")


def _by_hand(a: Path, b: Path) -> float:
    started = time.perf_counter()
    patch = _git(a, "diff", "--binary", "HEAD")
    _git(b, "apply", "--binary", stdin=patch)
    untracked = _git(a, "ls-files", "--others", "--exclude-standard", "-z").split(b"\0")
    names = [n.decode() for n in untracked if n]
    archive = subprocess.run(["tar", "-cf", "-", *names], cwd=a, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-xf", "-"], cwd=b, check=True, input=archive)
    return time.perf_counter() - started


async def _seedline(a: Path, b: Path, nats_url: str, n: int) -> tuple[float, float]:
    import nats

    from seedline_contracts.runner import LaunchRequest
    from seedline_contracts.sealed_objects import derive_key
    from seedline_contracts.worktrees import Carry
    from seedline_platform import natsio
    from seedline_runner.engines.scripted import ScriptedEngine
    from seedline_runner.worktree.carrying import Carrier
    from seedline_runner.worktree.store import SavedObjects

    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await natsio.ensure_worktrees_bucket(js)
        key = derive_key(os.urandom(32), 1, "bench", f"csess_{n}")
        request = LaunchRequest(session_id=f"csess_{n}", instance_id="bench", repo="r",
                                engine="scripted", resume=None, seed=None, instruction=None,
                                seal=key)
        carrier = Carrier(SavedObjects(js))
        started = time.perf_counter()
        saved = await carrier.save(request, a, ScriptedEngine(), None, n)
        saving = time.perf_counter() - started
        carry = Carry(from_node="a", from_label="A", worktree=saved, engine_record=None, key=key)
        started = time.perf_counter()
        arrival = await carrier.arrive(carry, request, b, ScriptedEngine())
        arriving = time.perf_counter() - started
        assert arrival.worktree is not None and arrival.worktree.applied, arrival
        return saving, arriving
    finally:
        await nc.close()


def run_worktree_move(rounds: int = 3, sizes: tuple[int, ...] = (1, 20)) -> dict:
    from seedline_devtools.embedded import start_nats

    results: dict = {"benchmark": "worktree_move", "config": {"rounds": rounds,
                                                              "sizes_mb": list(sizes)},
                     "seconds": {}}
    with tempfile.TemporaryDirectory(prefix="seedline-bench-worktree-") as tmp:
        root = Path(tmp)
        server = start_nats(root / "nats")  # sync_interval: always, as everywhere
        try:
            for size in sizes:
                a, b = _clones(root / f"{size}mb")
                saves, arrivals, totals, hands = [], [], [], []
                for n in range(rounds):
                    _dirty(a, size)
                    _clean(b)
                    hands.append(_by_hand(a, b))
                    _clean(b)
                    saving, arriving = asyncio.run(_seedline(a, b, server.url, n + 1))
                    saves.append(saving)
                    arrivals.append(arriving)
                    totals.append(saving + arriving)
                results["seconds"][f"{size}"] = {
                    "save": report.spread(saves), "arrive": report.spread(arrivals),
                    "seedline": report.spread(totals), "by_hand": report.spread(hands)}
                shutil.rmtree(root / f"{size}mb", ignore_errors=True)
        finally:
            server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="1,20")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    result = run_worktree_move(args.rounds, sizes)
    for size, s in result["seconds"].items():
        print(f"{size} MB: seedline {report.cell(s['seedline'], 3)} s "
              f"(save {report.cell(s['save'], 3)}, arrive {report.cell(s['arrive'], 3)}), "
              f"by hand {report.cell(s['by_hand'], 3)} s")


if __name__ == "__main__":
    main()
