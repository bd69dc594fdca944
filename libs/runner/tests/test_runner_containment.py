"""Every containment holds an engine's whole process tree: ending a pen leaves nothing.

Each test runs against every containment this machine can give, selected explicitly:
the cgroup v2 one (where the machine lets this process create cgroups), the subreaper
one (Linux) and the process-group one macOS runners use, which works on Linux too.
The "engine" is a shell run by ``run_cli`` in a bound pen, as an engine adapter runs
its CLI; it starts a tool in a session of its own, an orphan whose parent exits at
once, and a plain background process, and names their pids.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from seedline_runner.containment import (
    CgroupContainment,
    Keeper,
    Pen,
    ProcessGroupContainment,
    SubreaperContainment,
    bind_pen,
    choose_containment,
    unbind_pen,
)
from seedline_runner.containment.sweep import alive
from seedline_runner.containment.subreaper import become_subreaper
from seedline_runner.engines.cli_process import run_cli
from seedline_runner.pens import Pens

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes only")

SCRIPT = """
setsid sh -c 'sleep 60' & echo "pid $!"
sh -c 'sleep 61 & echo "pid $!"'
sleep 62 & echo "pid $!"
echo ready
wait
"""


def make(kind: str, key: str):
    if kind == "cgroup":
        containment = CgroupContainment.create(key) if sys.platform == "linux" else None
        if containment is None:
            pytest.skip("this machine does not let this process create cgroups (v2)")
        return containment
    if kind == "subreaper":
        if sys.platform != "linux" or not become_subreaper():
            pytest.skip("needs Linux's PR_SET_CHILD_SUBREAPER")
        return SubreaperContainment(key)
    return ProcessGroupContainment(key)


@pytest.fixture(params=["cgroup", "subreaper", "process-group"])
def kind(request) -> str:
    return request.param


@pytest.fixture
def key() -> str:
    return "test-" + uuid.uuid4().hex[:12]


async def start_engine(containment, pen_name: str, tmp_path: Path):
    """The shell, started in its pen as a runner starts an engine; its task and the tools' pids."""
    pids: list[int] = []
    ready = asyncio.Event()

    async def on_line(line: str) -> None:
        if line.startswith("pid "):
            pids.append(int(line.split()[1]))
        elif line.strip() == "ready":
            ready.set()

    token = bind_pen(Pen(containment, pen_name))
    try:
        task = asyncio.create_task(run_cli(
            ["sh", "-c", SCRIPT], label="shell", cwd=tmp_path, env=os.environ,
            stdin_text=None, on_line=on_line))
    finally:
        unbind_pen(token)
    await asyncio.wait_for(ready.wait(), 30)
    return task, pids


def running(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            if alive(psutil.Process(pid)):
                left.append(pid)
        except psutil.Error:
            continue
    return left


async def test_ending_a_pen_kills_the_engine_and_every_tool_it_started(kind, key, tmp_path):
    containment = make(kind, key)
    task, pids = await start_engine(containment, "csess_1", tmp_path)
    assert len(running(pids)) == 3  # the tools run: one in a session of its own, one orphaned

    killed = await containment.end("csess_1")
    run = await asyncio.wait_for(task, 10)

    assert running(pids) == []
    assert killed >= 4  # the shell and its three tools
    assert run.returncode != 0
    if kind == "cgroup":
        assert not containment.pen_dir("csess_1").exists()  # tidied away once empty
    containment.release()


async def test_a_pen_leaves_other_pens_alone(kind, key, tmp_path):
    containment = make(kind, key)
    first, first_pids = await start_engine(containment, "csess_1", tmp_path)
    second, second_pids = await start_engine(containment, "csess_2", tmp_path)

    await containment.end("csess_1")
    still = running(second_pids)
    await containment.end("csess_2")
    await asyncio.gather(first, second)

    assert still == second_pids
    assert running(first_pids + second_pids) == []
    containment.release()


async def test_a_later_run_of_the_same_key_finds_and_ends_what_an_earlier_one_left(
    kind, key, tmp_path
):
    earlier = make(kind, key)
    task, pids = await start_engine(earlier, "csess_1", tmp_path)

    # A new run knows nothing of the earlier run's processes but its key.
    later = make(kind, key)
    left = later.pens_left()
    await later.end("csess_1")
    await asyncio.wait_for(task, 10)

    assert left == ["csess_1"]
    assert running(pids) == []
    assert later.pens_left() == []
    later.release()


async def test_the_keeper_ends_every_pen_once_its_runner_is_gone(kind, key, tmp_path):
    containment = make(kind, key)
    keeper = Keeper(containment.keeper_args())
    task, pids = await start_engine(containment, "csess_1", tmp_path)
    _, more = await start_engine(containment, "csess_2", tmp_path)

    # What the kernel does when the runner dies: the keeper's pipe closes.
    await asyncio.to_thread(keeper.close)
    await asyncio.wait_for(task, 10)

    assert running(pids + more) == []
    for pen in ("csess_1", "csess_2"):
        await containment.end(pen)
    containment.release()


def test_a_containment_is_chosen_by_name_or_refused():
    assert isinstance(choose_containment("k", "process-group"), ProcessGroupContainment)
    with pytest.raises(ValueError, match="Unknown containment"):
        choose_containment("k", "jail")
    if sys.platform != "linux":
        with pytest.raises(ValueError, match="needs Linux"):
            choose_containment("k", "subreaper")


async def test_a_second_runner_on_the_same_state_folder_is_refused(key, tmp_path):
    async def publish(entry) -> None:
        raise AssertionError("nothing to publish")

    def pens():
        return Pens(ProcessGroupContainment(key), tmp_path, {}, publish, lambda: "now")

    first = pens()
    await first.start()
    try:
        with pytest.raises(RuntimeError, match="Another runner is using"):
            await pens().start()
    finally:
        await first.stop()
    later = pens()
    await later.start()  # once the first has stopped, the folder is free again
    await later.stop()
