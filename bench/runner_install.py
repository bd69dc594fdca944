"""A runner machine's install against the whole of Seedline's: the wheels `make dist`
builds, the runner's distribution (seedline-cli alone) installed with `uv tool install`
into a folder of its own, and everything `make install` puts in a venv (less the
developers' tools), each measured: size on disk, package count, and the wall time of
`seedline --help` from each.

Installs resolve from the wheels and uv's cache first (--offline), pinned to uv.lock's
versions; what the cache lacks comes from the package index.

    python -m bench.runner_install [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import report

ROOT = Path(__file__).resolve().parents[1]
RUNNER_DIST = "seedline-cli"  # installed alone, it is a runner machine's `seedline`
# What `make install` installs, as distributions with their extras.
FULL = ("seedline-cli[platform]", "seedline-supervisor", "seedline-devtools",
        "seedline-web[cli]", "seed-composer[cli]", "timeline-writer", "continuity-resolver",
        "runner-gateway", "seedline-timeline-view")


def uv() -> str:
    found = ROOT / ".tools" / "bin" / "uv"
    return str(found) if found.exists() else (shutil.which("uv") or "uv")


def _run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=ROOT, **kw)


def _offline_first(args: list[str], env: dict[str, str] | None = None) -> None:
    """Offline from the cache and the wheels; the package index only for what is missing."""
    done = _run([*args, "--offline"], env=env)
    if done.returncode != 0:
        done = _run(args, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")


def build_wheels(dist: Path) -> list[Path]:
    """`make dist`: a versioned wheel of every package of the workspace."""
    shutil.rmtree(dist, ignore_errors=True)
    _offline_first([uv(), "build", "--all-packages", "--wheel", "--out-dir", str(dist)])
    return sorted(dist.glob("*.whl"))


def constraints(out: Path, package: str | None = None) -> Path:
    """uv.lock's versions of what `package` (or everything) needs, as a constraints file."""
    args = [uv(), "export", "--frozen", "--no-hashes", "--no-emit-workspace", "--no-dev"]
    args += ["--package", package] if package else ["--all-packages", "--all-extras"]
    done = _run(args)
    if done.returncode != 0:
        raise RuntimeError(f"uv export failed: {done.stderr}")
    pins = [line for line in done.stdout.splitlines()
            if line and not line.startswith(("#", " ", "-e", "."))]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(pins) + "\n")
    return out


def install_runner(dist: Path, home: Path) -> tuple[Path, Path]:
    """`uv tool install seedline-cli` from the wheels into `home`: the `seedline` command and
    the tool's venv."""
    pins = constraints(home / "runner-constraints.txt", RUNNER_DIST)
    env = {**os.environ, "UV_TOOL_DIR": str(home / "tools"),
           "UV_TOOL_BIN_DIR": str(home / "bin")}
    _offline_first([uv(), "tool", "install", "--find-links", str(dist), "--constraints",
                    str(pins), "--python", _python(), RUNNER_DIST], env=env)
    return home / "bin" / "seedline", home / "tools" / RUNNER_DIST


def install_full(dist: Path, venv: Path) -> Path:
    pins = constraints(venv.parent / "full-constraints.txt")
    done = _run([uv(), "venv", "--python", _python(), str(venv)])
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    _offline_first([uv(), "pip", "install", "--python", str(venv / "bin" / "python"),
                    "--find-links", str(dist), "--constraints", str(pins), *FULL])
    return venv


def _python() -> str:
    import sys

    return sys.executable


def venv_facts(venv: Path) -> dict:
    """Bytes on disk and installed distributions of a venv."""
    size = sum(p.stat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink())
    packages = sorted(p.name.split("-")[0].lower().replace("_", "-")
                      for p in venv.glob("lib/python*/site-packages/*.dist-info"))
    return {"bytes": size, "packages": len(packages), "names": packages}


def help_seconds(executable: Path, rounds: int) -> dict:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run([str(executable), "--help"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60, check=True)
        times.append(time.perf_counter() - started)
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


def run_runner_install_bench(rounds: int = 7) -> dict:
    with tempfile.TemporaryDirectory(prefix="seedline-bench-dist-") as scratch:
        tmp = Path(scratch)
        wheels = build_wheels(tmp / "dist")
        exe, tool = install_runner(tmp / "dist", tmp / "runner")
        full = install_full(tmp / "dist", tmp / "full" / "venv")
        runner_facts, full_facts = venv_facts(tool), venv_facts(full)
        result = {
            "benchmark": "runner_install", "generated_at": report.stamp(),
            "machine": report.machine(), "wheels": [w.name for w in wheels],
            "runner": {**runner_facts, "help_seconds": help_seconds(exe, rounds)},
            "full": {**full_facts, "help_seconds": help_seconds(full / "bin" / "seedline",
                                                                rounds)},
            "left_out": sorted(set(full_facts["names"]) - set(runner_facts["names"])),
        }
    report.write("runner_install", result, markdown(result))
    return result


def markdown(r: dict) -> str:
    def mb(n: int) -> str:
        return f"{n / 1e6:.0f} MB"

    def row(name: str, facts: dict) -> str:
        h = facts["help_seconds"]
        return (f"| {name} | {mb(facts['bytes'])} | {facts['packages']} | "
                f"{h['median']:.2f} s ({h['min']:.2f}-{h['max']:.2f}) |")

    return "\n".join([
        "# A runner machine's install against the whole of Seedline's", "",
        f"{len(r['wheels'])} wheels built by `make dist`.", "",
        "| install | size on disk | packages | `seedline --help` |",
        "|---|---|---|---|",
        row("runner (`uv tool install seedline-cli`)", r["runner"]),
        row("everything `make install` puts in .venv, less the dev tools", r["full"]), "",
        "Not in the runner's install: " + ", ".join(r["left_out"]) + ".", ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    result = run_runner_install_bench(parser.parse_args().rounds)
    print(markdown(result))


if __name__ == "__main__":
    main()
