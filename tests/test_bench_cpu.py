"""The scale-out projection's CPU accounting (bench.cpu_accounting): it counts a process
tree's CPU, children included, and projects with the limits its docstring states."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import cpu_accounting  # noqa: E402

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"


def test_a_tree_counts_the_cpu_of_a_running_child_and_of_one_it_reaped():
    # The parent burns nothing itself; one child burns 0.3 s and is reaped, another burns
    # 0.3 s and waits to be read while it still runs.
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {BURN!r}])\n"
        f"child = subprocess.Popen([sys.executable, '-c', {BURN!r} + 'import time; time.sleep(30)'])\n"
        "sys.stdout.write('ready\\n'); sys.stdout.flush(); child.wait()\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline() == "ready\n"
        import time
        # The second child finishes its burn when the machine gives it the CPU: on a
        # loaded machine that takes longer than its 0.3 s.
        deadline = time.monotonic() + 30
        while (counted := cpu_accounting.tree_cpu_seconds(parent.pid)) < 0.55:
            assert time.monotonic() < deadline, f"only {counted:.2f} s of CPU counted"
            time.sleep(0.1)
    finally:
        for proc in subprocess.run(["pgrep", "-P", str(parent.pid)], capture_output=True,
                                   text=True).stdout.split():
            subprocess.run(["kill", proc])
        parent.wait(10)


def test_the_projection_is_the_tightest_of_the_three_limits():
    costs = {"writers": 0.2, "postgres": 0.1, "nats": 0.1}  # CPU s per 1,000 entries
    projected = cpu_accounting.projection(costs)
    assert projected["1"] == 1000 / 0.2  # one writer: 5,000/s
    assert projected["2"] == 2 * 1000 / 0.2
    assert projected["8"] == cpu_accounting.NATS_CORES * 1000 / 0.1  # nats-server's cores
    assert cpu_accounting.limited_by(costs, 1) == "timeline-writers"
    assert cpu_accounting.limited_by(costs, 8) == "nats-server"


def test_costs_are_per_thousand_entries_of_the_difference():
    before = {"writers": 1.0, "nats": 2.0}
    after = {"writers": 3.0, "nats": 2.5}
    assert cpu_accounting.per_thousand(before, after, 4000) == {"writers": 0.5, "nats": 0.125}
