"""Which processes `seedline status` counts as down, and what it says is unavailable: over
a Status made by hand, no servers."""

from __future__ import annotations

from seedline_cli.status_checks import (
    SERVICES,
    ServiceState,
    Status,
    down_processes,
    problems_of,
    web_offered,
)
from seedline_cli.surfaces import WEB
from seedline_core.notices import wording_violations


def status(web_up: bool, consumers=(), processes=None, runner_state: str = "running") -> Status:
    s = Status(
        nats_url="nats://127.0.0.1:4222", server_version="2.15.1", max_payload=1 << 20,
        sync_interval="always", durability_problems=[],
        streams=[{"name": "SEEDLINE_TIMELINE", "exists": True, "messages": 0}],
        services=[*(ServiceState(name, True, 1) for name in SERVICES), ServiceState(WEB, web_up)],
        consumers=[{"consumer": c, "stream": "SEEDLINE_SESSIONS"} for c in consumers],
        machines=[], postgres={"checked": False, "url": "-", "up": None}, processes=processes)
    if processes is not None:
        for p in processes:
            if p["name"] == "demo-runner":
                p["state"] = runner_state
    s.web_offered = web_offered(s)
    s.unavailable = down_processes(s)
    s.problems = problems_of(s)
    return s


def supervised(*names: str) -> list[dict]:
    return [{"name": n, "state": "running", "log": f"/logs/{n}.log", "last_exit": None}
            for n in names]


def test_a_web_that_never_ran_here_is_not_down():
    assert status(web_up=False).problems == []


def test_a_web_that_ran_here_and_does_not_answer_is_down_with_what_is_unavailable():
    s = status(web_up=False, consumers=["seedline-web-opens-2"])
    assert s.problems == ["seedline-web is not running: the HTTP API, the console and MCP "
                          "over HTTP are unavailable"]
    assert not wording_violations(s.problems[0])


def test_a_web_that_seedline_up_runs_is_down_when_it_does_not_answer():
    s = status(web_up=False, processes=supervised("nats-server", WEB))
    assert [d["process"] for d in s.unavailable] == [WEB]


def test_a_supervised_process_starting_again_is_down_and_named_once():
    processes = supervised("nats-server", WEB, "demo-runner")
    processes[1].update(state="restarting", last_exit="killed by signal 9")
    processes[2].update(last_exit="exit code 1")
    s = status(web_up=False, processes=processes, runner_state="restarting")
    assert s.problems == [
        "seedline-web is not running: the HTTP API, the console and MCP over HTTP are "
        "unavailable",
        "demo-runner is starting again after it stopped (exit code 1): conversations on the "
        "demo runner are unavailable",
    ]


def test_everything_up_is_no_problem():
    s = status(web_up=True, consumers=["seedline-web-opens-2"],
               processes=supervised("nats-server", WEB))
    assert s.problems == [] and s.unavailable == []


def test_a_process_waiting_for_room_on_a_full_disk_is_down():
    processes = supervised("nats-server", "postgres")
    processes[1].update(state="waiting for room on the disk", last_exit="exit code 1")
    s = status(web_up=True, processes=processes)
    assert s.problems == ["postgres stopped (exit code 1) and is waiting for room on the disk: "
                          "reading timelines, opening conversations and the web's sign-in "
                          "tokens are unavailable"]
