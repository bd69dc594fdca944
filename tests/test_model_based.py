"""Conversation state against a reference model of CONTRACT.md 4.1, step by step.

A Hypothesis state machine drives the real platform: the four services and two runner
machines as processes of their own console scripts, a real nats-server and Postgres.
Its steps are random sequences of entries published by two instances that share
conversation ids, opens (engines a machine does and does not offer, either machine,
force_fresh, an instruction), relocations, stops, a person's fresh messages (a turn, a
wake, or not_woken), a machine going offline and coming back, a runner process killed
with -9 and started again, and a service killed with SIGKILL and restarted. The faults
of 1.2 (each a rule of its own, so others can be added beside them): a producer whose
clock runs ahead (entries dated 20 hours after their arrival), a failed open between a
stop and the next open, and an engine that refuses a resume after its reply (the
runner's `resume_lost`).

After every step the system is left to settle (ingest empty, every durable consumer
idle, the machine's replies in the timeline, the expected notices received) and is
then compared with tests/model/reference.py: every reply, which conversation each
instance lists as live and where, what each machine's presence says it hosts, which
entries the timeline gained, which lifecycle events were recorded and which notices
were sent, none missing and none extra.

Every precondition and every choice a rule makes depends only on the model's state and the
example's own draws; what the system did is compared after each step and never used to choose
the next one (conversations are taken in the order the model made them, not by the ids the
platform drew). So a failure on any seed replays and shrinks, and Hypothesis names the steps
that lead to it and the step whose comparison failed.

Each Hypothesis example uses a fresh pair of instance ids, so one long-lived platform
serves them all (its machines are shared). ``make test`` runs 800 steps or more (about
three minutes on two cores); ``make test-faults`` (``-m slow``) runs 3,000 or more;
SEEDLINE_MODEL_STEPS overrides. ``make test`` always draws from the same seed, so it is
reproducible; ``make test-faults`` draws a fresh one on every run and prints it, and
SEEDLINE_MODEL_SEED=<seed> replays it. Every step, and each settled result, is written to
steps.log in the platform's log folder (named in the summary line), beside each process's log.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import secrets
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncio

import nats.errors
import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    precondition,
    rule,
    run_state_machine_as_test,
)

from seedline_contracts import subjects
from seedline_core.notices import wording_violations

sys.path.insert(0, str(Path(__file__).parent))
from model.processes import SERVICES, Loop, Platform, servers  # noqa: E402
from seedline_cli.timeline_opens import read_marks  # noqa: E402
from model.reference import Expected, Model, Verdict  # noqa: E402

pytestmark = [pytest.mark.servers, pytest.mark.slow]

MACHINES = {"m1": "Machine one", "m2": "Machine two"}
REPOS = ("apps/alpha", "apps/beta")
SHARED_IDS = ("s1", "s2")
AGES = {"2 hours": 2 * 3600, "30 hours": 30 * 3600, "5 days": 5 * 86400}
# A producer whose clock runs ahead: dated this long after it arrives (CONTRACT.md 3.1, 1.2).
AHEAD = "20 hours ahead"
AHEAD_SECONDS = 20 * 3600
KINDS = ("chat_assistant", "terminal", "command", "brain", "chat_user")
ENTRY_ENGINES = (None, "scripted", "claude")
OPEN_ENGINES = ("scripted",) * 4 + ("codex", "openai")
# Lifecycle events compared one for one with the model (the others are read, not counted).
COUNTED_EVENTS = ("open_requested", "opened", "open_failed", "relocated", "stopped", "reaped",
                  "engine_bound", "wake_requested", "resume_lost")
# The expensive steps act on one draw in four or eight (False first: shrinking drops them).
ONE_IN_4 = st.sampled_from((False,) * 3 + (True,))
ONE_IN_8 = st.sampled_from((False,) * 7 + (True,))
STEP_TIMEOUT = 45.0
# A kill and restart costs seconds, and Hypothesis sometimes draws it 70 times in 800 steps.
# At most this many kills in one example (of up to 30 steps), so the suite's time stays
# predictable; counted in the example, never across examples, so an example replays alike.
KILLS_PER_EXAMPLE = 1
DEFAULT_STEPS, SLOW_STEPS = 800, 3000
RUN = secrets.token_hex(2)
# `make test` draws from this seed (reproducible); `make test-faults` from a fresh one.
FIXED_SEED = 20261202
REFUSED = "the engine found no conversation to continue"
# Scaling out and slowness (CONTRACT.md 4, 1.2): SEEDLINE_MODEL_COPIES=2 runs two copies of
# every service; SEEDLINE_MODEL_PAUSES=1 adds opens made while a service copy is paused
# (SIGSTOP) for a random span, retried by request_id as a timed-out caller is told to.
COPIES = max(1, int(os.environ.get("SEEDLINE_MODEL_COPIES", "1")))
PAUSES = os.environ.get("SEEDLINE_MODEL_PAUSES", "") not in ("", "0")
PAUSE_SPANS = (0.5, 3.0, 12.0)


@dataclass
class Stats:
    steps: int = 0
    examples: int = 0
    idle_draws: int = 0
    rules: Counter = field(default_factory=Counter)

    def line(self, seconds: float) -> str:
        rules = ", ".join(f"{name} {n}" for name, n in sorted(self.rules.items()))
        return (f"model-based: {self.steps} steps in {self.examples} examples "
                f"({self.idle_draws} draws that did nothing) in {seconds:.0f} s; {rules}")


class Harness:
    """What every example shares: the running platform, its loop, the counts."""

    def __init__(self, platform: Platform, loop: Loop, started: datetime) -> None:
        self.platform = platform
        self.loop = loop
        self.started = started
        self.stats = Stats()
        self._trace = open(platform.logs / "steps.log", "a")

    def trace(self, line: str) -> None:
        """Every settled step, in the platform's log folder (read it when a step fails)."""
        self._trace.write(line + "\n")
        self._trace.flush()


HARNESS: Harness | None = None


def _old_time(started: datetime, age_seconds: int) -> str:
    return (started - timedelta(seconds=age_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _ahead_text() -> str:
    return (datetime.now(UTC) + timedelta(seconds=AHEAD_SECONDS)).strftime("%Y-%m-%dT%H:%M:%SZ")


class ConversationState(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        h = HARNESS
        self.h, self.p, self.run = h, h.platform, h.loop.run
        h.stats.examples += 1
        token = f"{RUN}x{h.stats.examples}"
        self.instances = (f"inst-{token}-a", f"inst-{token}-b")
        for node_id, machine in self.p.machines.items():
            if not machine.online:
                self.run(self.p.start_machine(node_id))
        self.model = Model({n: m.generation for n, m in self.p.machines.items()},
                           online=set(self.p.machines), offered={"scripted"})
        for instance_id in self.instances:
            self.run(self.p.follow_notices(instance_id))
        self.run(self.p.pull())
        self.mine: set[str] = set()  # platform conversation ids this example created
        self.published: list[dict] = []
        self.open_bodies: dict[str, dict] = {}  # each open's request, to read its reply again
        self.n = 0
        self.kills = 0
        # What each conversation's newest save held: its checkout's uncommitted files then.
        self.saved: dict[str, dict] = {}
        self.p.checkouts.reset()

    # -- helpers ------------------------------------------------------------------------

    def _count(self, rule_name: str, **args) -> None:
        self.h.stats.steps += 1
        self.h.stats.rules[rule_name] += 1
        self.n += 1
        self.h.trace(f"{self.instances[0][:-2]} step {self.n}: {rule_name} {args}")

    def _idle_draw(self) -> None:
        self.h.stats.idle_draws += 1

    def _mark(self) -> dict:
        seen = self.p.seen
        return {"timeline": len(seen.timeline), "events": len(seen.events),
                "rejected": len(seen.rejected),
                "notices": {i: len(seen.notices.get(i, [])) for i in self.instances},
                "trees": self._trees()}

    def _trees(self) -> dict:
        checkouts = self.p.checkouts
        return {(node, repo): checkouts.listing(node, repo)
                for node in MACHINES for repo in REPOS}

    def _check_trees(self, mark: dict, new: dict, what: str) -> None:
        """No tree is ever half-applied (CONTRACT.md 6): after every step no apply is left
        unfinished, a tree applied makes the target hold exactly what was saved, and one
        not applied leaves the target as it was."""
        assert self.p.checkouts.markers() == [], f"{what}: an apply left unfinished"
        before, after = mark["trees"], self._trees()
        for e in new["events"]:
            if e["type"] == "worktree_saved":
                self.saved[e["session_id"]] = before[(e["node_id"], e["repo"])]
        for e in new["events"]:
            if e["type"] != "worktree_applied":
                continue
            *_, decided = [d for d in new["events"] if d["type"] == "continuity_decided"
                           and d["session_id"] == e["session_id"]]
            carried = decided["plan"]["carry"]
            target = (e["node_id"], decided["plan"]["repo"])
            if e["worktree"] and e["worktree"]["applied"]:
                assert after[target] == self.saved[carried["session_id"]], (
                    f"{what}: {target} holds {sorted(after[target])} after the apply, saved "
                    f"{sorted(self.saved[carried['session_id']])}")
            else:
                assert after[target] == before[target], f"{what}: {target} changed, not applied"

    @rule(repo=st.sampled_from(REPOS), n=st.integers(0, 10_000))
    def work(self, repo, n):
        """An engine changes its checkout: a file of its own, where the repo runs now."""
        live = [c for c in self.model.by_id.values() if c.state == "live" and c.repo == repo]
        if not live:
            return self._idle_draw()
        self._count("work", repo=repo, n=n)
        node_id = live[n % len(live)].node_id
        mark = self._mark()
        work = self.p.checkouts.folder(node_id) / repo / "work" / f"w-{self.n}.txt"
        work.parent.mkdir(exist_ok=True)
        work.write_text(f"work {self.n} of {self.instances[0]}\n")
        mark["trees"] = self._trees()
        self._settle(mark, Expected(), f"work on {repo} at {node_id}")

    def _since(self, mark: dict) -> dict:
        seen = self.p.seen
        return {
            "timeline": seen.timeline[mark["timeline"]:],
            "events": seen.events[mark["events"]:],
            "rejected": seen.rejected[mark["rejected"]:],
            "notices": [(i, n) for i in self.instances
                        for n in seen.notices.get(i, [])[mark["notices"][i]:]],
        }

    def _request(self, subject: str, body: dict) -> dict:
        return self.run(self.p.request(subject, body))

    def _created(self, mark: dict, event_type: str, instance_id: str, repo: str) -> str:
        """The id of the conversation a step created, from its first recorded event."""
        async def find():
            await self.p.pull()
            for e in self._since(mark)["events"]:
                if (e["type"], e.get("instance_id"), e.get("repo")) == (
                        event_type, instance_id, repo):
                    return e["session_id"]
            return None

        return self.run(self.p._until(find, STEP_TIMEOUT, f"a {event_type} event on {repo}"))

    def _settle(self, mark: dict, expected: Expected, what: str) -> dict:
        """Wait for quiescence and for everything expected, then compare one for one."""
        async def settled():
            await self.p.pull()
            new = self._since(mark)
            if _missing(expected, new) or not await self.p.idle():
                return None
            if await self._presence_differs():
                return None
            return new

        try:
            new = self.run(self.p._until(settled, STEP_TIMEOUT, what))
            self.h.trace(f"{self.instances[0][:-2]} {what}: {_summary(new)}")
        except AssertionError:
            self.run(self.p.pull())
            new = self._since(mark)
            raise AssertionError(
                f"{what}: did not settle in {STEP_TIMEOUT:.0f} s; missing "
                f"{_missing(expected, new)}; presence {self.run(self._presence_differs())}; "
                f"seen {_summary(new)}") from None
        entries = sorted(e["entry_id"] for e in new["timeline"])
        assert entries == sorted(expected.entries), f"{what}: timeline entries {_summary(new)}"
        events = sorted(_counted(new["events"]))
        assert events == sorted(expected.events), (
            f"{what}: lifecycle events {events}, expected {sorted(expected.events)}")
        notices = sorted(_notice_key(i, n) for i, n in new["notices"])
        assert Counter(notices) == Counter(expected.notices), (
            f"{what}: notices {notices}, expected {expected.notices}")
        for _, notice in new["notices"]:
            assert not wording_violations(notice["text"]), notice
        assert new["rejected"] == [], f"{what}: rejected {new['rejected']}"
        self._check_live(what)
        self._check_hosted_once(what)
        self._check_trees(mark, new, what)
        return new

    def _check_hosted_once(self, what: str) -> None:
        """No repo was hosted twice at any moment of the step, by the machines' own presence."""
        async def take():
            return self.p.watch.take()

        self.h.stats.rules["hosting samples checked"] += 1
        for sample in self.run(take()):
            repos = Counter((c.instance_id, c.repo) for session_id in sample
                            if (c := self.model.by_id.get(session_id)) is not None)
            twice = [repo for repo, n in repos.items() if n > 1]
            if twice:
                self.h.trace(f"  hosted twice at once: {twice} ({sorted(sample)})")
            assert not twice, f"{what}: {twice} hosted twice at once ({sorted(sample)})"

    async def _presence_differs(self) -> dict | None:
        """Each online machine hosts exactly the model's live conversations on it."""
        differs = {}
        for node_id in self.model.online:
            presence = await self.p.presence(node_id)
            hosted = set(presence["live"]) & self.mine if presence else None
            want = {c.session_id for c in self.model.live() if c.node_id == node_id}
            if hosted != want:
                differs[node_id] = {"hosts": hosted, "model": want}
        return differs or None

    def _check_live(self, what: str) -> None:
        for instance_id in self.instances:
            reply = self._request(subjects.API_SESSIONS_LIST, {"instance_id": instance_id})
            assert reply["ok"], reply
            listed = sorted((c["session_id"], c["repo"], c["node_id"], c["engine"],
                             c.get("outcome")) for c in reply["conversations"])
            want = sorted((c.session_id, c.repo, c.node_id, c.engine, c.outcome)
                          for c in self.model.live(instance_id))
            assert listed == want, f"{what}: {instance_id} lists {listed}, the model {want}"

    def _event(self, new: dict, event_type: str, session_id: str) -> dict:
        found = [e for e in new["events"]
                 if (e["type"], e["session_id"]) == (event_type, session_id)]
        assert found, f"no {event_type} for {session_id}"
        return found[-1]

    def _check_decided(self, new: dict, session_id: str, verdict: Verdict, what: str) -> None:
        event = self._event(new, "continuity_decided", session_id)
        decided = event["continuity"]
        assert (decided["reason_code"], decided["mode"]) == (verdict.reason_code, verdict.mode), (
            f"{what}: decided {decided}, the model {verdict.reason_code}")
        self._check_expect(event["plan"].get("resume_expect"), verdict, what)
        assert not wording_violations(decided["reason"]), decided
        for words in verdict.reason_says:
            assert words in decided["reason"], f"{what}: {decided['reason']!r} lacks {words!r}"

    def _check_expect(self, expect: dict | None, verdict: Verdict, what: str) -> None:
        """A resume names the earlier conversation's newest turn (CONTRACT.md 6, 1.2)."""
        if verdict.expect is None:
            assert expect is None, f"{what}: resume_expect {expect}, the model none"
            return
        [entry] = [e for e in self.p.seen.timeline if e["entry_id"] == verdict.expect]
        got = expect and (expect["seq"], expect["kind"], expect["excerpt"])
        assert got == (entry["_seq"], entry["kind"], entry["content"][:200]), (
            f"{what}: resume_expect {expect}, the model {verdict.expect} at #{entry['_seq']}")

    def _check_reply(self, reply: dict, verdict: Verdict, node_id: str, what: str) -> None:
        if verdict.error:
            assert not reply["ok"] and reply["error"]["code"] == verdict.error, (
                f"{what}: {reply}, the model says {verdict.error}")
            assert not wording_violations(reply["error"]["message"]), reply
            if verdict.error_message_names:
                assert verdict.error_message_names in reply["error"]["message"], reply
            if verdict.error == "runner_offline":
                assert MACHINES[node_id] in reply["error"]["message"], reply
            return
        assert reply["ok"], f"{what}: {reply}, the model says {verdict}"
        continuity = reply["continuity"]
        got = (continuity["reason_code"], continuity["mode"], continuity["resume_from"],
               reply["resumed"], reply["seeded"], reply["outcome"], reply["brief"] is not None,
               reply["node_id"])
        want = (verdict.reason_code, verdict.mode, verdict.resume_from, verdict.resumed,
                verdict.seeded, verdict.outcome, verdict.brief, node_id)
        assert got == want, f"{what}: reply {got}, the model {want}"
        assert reply["notice"]["tone"] == ("info" if verdict.resumed else "warning"), reply
        for register in ("chat", "console", "mcp"):
            assert not wording_violations(reply["notice"][register]), reply["notice"]

    def _check_engine_saw(self, new: dict, session_id: str, reply: dict, step: str) -> None:
        """The engine's first answer says whether it found a brief, and which."""
        # The scripted engine's one reply ends its turn: the step's end mark.
        [said] = [e for e in new["timeline"] if e["entry_id"] == f"{session_id}:{step}:end"]
        brief = reply.get("brief")
        if reply["seeded"]:
            assert f"seed sha256 {brief['sha256']}" in said["content"], (said, brief)
        elif not reply["resumed"]:
            assert "no seed" in said["content"], (said, reply)

    # -- rules --------------------------------------------------------------------------

    @rule(which=st.integers(0, 1), repo=st.sampled_from(REPOS),
          session_id=st.sampled_from(SHARED_IDS), kind=st.sampled_from(KINDS),
          age=st.sampled_from([*AGES, AHEAD]), engine=st.sampled_from(ENTRY_ENGINES))
    def publish(self, which, repo, session_id, kind, age, engine):
        """Another system's entry, written hours or days before the test started."""
        self._count("publish", which=which, repo=repo, session_id=session_id, kind=kind,
                    age=age, engine=engine)
        instance_id = self.instances[which]
        ahead = age == AHEAD and kind != "chat_user"  # a message dated ahead is no wake
        age = "2 hours" if age == AHEAD and not ahead else age
        entry = {"entry_id": f"e-{self.instances[0]}-{self.n}", "instance_id": instance_id,
                 "repo": repo, "session_id": session_id, "kind": kind,
                 "content": f"{kind} number {self.n}",
                 "at": _ahead_text() if ahead else _old_time(self.h.started, AGES[age]),
                 "engine": engine}
        mark, expected = self._mark(), Expected(entries=[entry["entry_id"]])
        at = AHEAD_SECONDS * 1000 if ahead else -AGES[age]  # ahead: after anything the test does
        if kind == "chat_user":
            # The synchronous append names the entry's seq: a turn's answer is keyed by it.
            reply = self._request(subjects.API_TIMELINE_APPEND, entry)
            assert reply["ok"] and not reply["duplicate"], reply
            self.model.message(instance_id, repo, session_id, at, reply["seq"], expected,
                               engine, entry["entry_id"])
        else:
            self.run(self.p.publish_ingest(entry))
            # Counted from its arrival, not its `at` (3.1, 1.2).
            self.model.add_entry(instance_id, repo, session_id, at, engine, kind,
                                 entry["entry_id"], self.model.tick() if ahead else None)
        self.published.append(entry)
        self._settle(mark, expected, f"publish {kind} {session_id} on {repo} ({age} old)")

    @precondition(lambda self: self.published)
    @rule(pick=st.integers(0, 10_000))
    def publish_duplicate(self, pick):
        """The same entry_id again, with other content: the first entry stands."""
        self._count("publish_duplicate", pick=pick)
        entry = dict(self.published[pick % len(self.published)], content="changed", at=_now_text())
        mark = self._mark()
        self.run(self.p.publish_ingest(entry))
        self._settle(mark, Expected(), f"duplicate of {entry['entry_id']}")

    @rule(which=st.integers(0, 1), repo=st.sampled_from(REPOS),
          node=st.sampled_from(("where it ran", *MACHINES)), engine=st.sampled_from(OPEN_ENGINES),
          force_fresh=st.sampled_from((False, False, False, True)), instruction=st.booleans(),
          again=st.sampled_from((False, False, True)))
    def open(self, which, repo, node, engine, force_fresh, instruction, again):
        self._count("open", which=which, repo=repo, node=node, engine=engine,
                    force_fresh=force_fresh, instruction=instruction, again=again)
        instance_id = self.instances[which]
        opened = sorted(self.model.last_open.items())
        if again and opened:
            # The person opens again what they last worked on, where and as it ran: a
            # resume that lands, or one its machine cannot make after a restart.
            (instance_id, repo), (node, engine) = opened[len(self.published) % len(opened)]
        # Often the machine the repo last ran on: where a resume can land, or fail to.
        node_id = self.model.last_open.get((instance_id, repo), ("m1",))[0] \
            if node == "where it ran" else node
        what = (f"open {repo} of {instance_id[-1]} on {node_id} with {engine}"
                f"{' force_fresh' if force_fresh else ''}{' +instruction' if instruction else ''}")
        verdict = self.model.predict_open(instance_id, repo, engine, node_id, force_fresh)
        body = {"instance_id": instance_id, "repo": repo, "engine": engine, "node_id": node_id,
                "force_fresh": force_fresh, "request_id": f"open-{self.n}"}
        if instruction:
            body["instruction"] = f"instruction {self.n}"
        mark = self._mark()
        reply = self._request(subjects.API_SESSIONS_OPEN, body)
        self.h.trace(f"  model {verdict}; reply {_brief_reply(reply)}")
        self._check_reply(reply, verdict, node_id, what)
        session_id = (reply["session_id"] if reply["ok"]
                      else self._created(mark, "open_requested", instance_id, repo))
        self.mine.add(session_id)
        self.open_bodies[session_id] = body
        expected = Expected()
        self.model.open(verdict, session_id, instance_id, repo, engine, node_id,
                        instruction_entry=instruction, instructed=instruction, expected=expected)
        new = self._settle(mark, expected, what)
        self._check_decided(new, session_id, verdict, what)
        if reply["ok"] and instruction:
            self._check_engine_saw(new, session_id, reply, "launch")

    def _platform_ids(self, *states: str) -> list[str]:
        return [c.session_id for c in _in_model_order(self.model.by_id.values())
                if c.state in states]

    def _pick(self, pick: str, n: int) -> str:
        """A conversation id of the kind asked for; an unknown id when there is none."""
        model = self.model
        ran = [c for c in model.by_id.values() if c.state in ("live", "stopped")]
        repos = sorted({(c.instance_id, c.repo) for c in ran})
        newest = [[o for o in model.platform_of_repo(*r) if o.state in ("live", "stopped")][-1]
                  for r in repos]
        candidates = {
            "newest": [c.session_id for c in newest],
            "older": [c.session_id for c in _in_model_order(ran)
                      if c.session_id not in {o.session_id for o in newest}],
            "live": self._platform_ids("live"),
            "stopped": self._platform_ids("stopped"),
            "failed": self._platform_ids("failed"),
            "timeline": sorted({s for (_, _, s), c in model.conversations.items()
                                if not c.platform}),
        }.get(pick, [])
        return candidates[n % len(candidates)] if candidates else f"csess_unknown{n}"

    @rule(pick=st.sampled_from(("newest", "newest", "older", "failed", "timeline", "unknown")),
          node_id=st.sampled_from(list(MACHINES)), n=st.integers(0, 10_000))
    def relocate(self, pick, node_id, n):
        self._count("relocate", pick=pick, node_id=node_id, n=n)
        session_id = self._pick(pick, n)
        what = f"relocate {pick} {session_id} to {node_id}"
        verdict = self.model.predict_relocate(session_id, node_id)
        mark = self._mark()
        reply = self._request(subjects.API_SESSIONS_RELOCATE,
                              {"session_id": session_id, "node_id": node_id})
        self.h.trace(f"  model {verdict}; reply {_brief_reply(reply)}")
        if verdict.unchanged:
            assert reply["ok"] and (reply["session_id"], reply["node_id"]) == (
                session_id, node_id), f"{what}: {reply}"
        else:
            self._check_reply(reply, verdict, node_id, what)
        if reply["ok"]:
            assert reply["session_id"] == session_id, reply
        expected = Expected()
        self.model.relocate(verdict, session_id, node_id, expected)
        new = self._settle(mark, expected, what)
        if verdict.unchanged:
            assert new["events"] == [], f"{what}: a relocation that changes nothing recorded " \
                                        f"{_counted(new['events'])}"
        elif verdict.reason_code:
            self._check_decided(new, session_id, verdict, what)

    @rule(pick=st.sampled_from(("live", "live", "stopped", "failed", "timeline", "unknown")),
          n=st.integers(0, 10_000))
    def stop(self, pick, n):
        self._count("stop", pick=pick, n=n)
        session_id = self._pick(pick, n)
        mark, expected = self._mark(), Expected()
        want = self.model.stop(session_id, expected)
        reply = self._request(subjects.API_SESSIONS_STOP,
                              {"session_id": session_id, "reason": "requested"})
        what = f"stop {pick} {session_id}"
        if want == "not_found":
            assert not reply["ok"] and reply["error"]["code"] == "not_found", f"{what}: {reply}"
        else:
            assert reply == {"ok": True, "stopped": want == "stopped"}, f"{what}: {reply}"
        self._settle(mark, expected, what)

    @rule(which=st.integers(0, 1), repo=st.sampled_from(REPOS),
          to=st.sampled_from(("an opened repo", "an opened repo", "any repo")),
          on=st.sampled_from(("newest", "shared", "own")), n=st.integers(0, 10_000))
    def message(self, which, repo, to, on, n):
        """A person's message written now: a turn, a wake, or not_woken."""
        self._count("message", which=which, repo=repo, to=to, on=on, n=n)
        instance_id = self.instances[which]
        opened = sorted(self.model.last_open)
        if to == "an opened repo" and opened:
            instance_id, repo = opened[n % len(opened)]
        platform = self.model.platform_of_repo(instance_id, repo)
        session_id = {"newest": platform[-1].session_id if platform else "s1",
                      "shared": SHARED_IDS[n % 2], "own": f"person-{self.n}"}[on]
        woken = None
        if self.model.live_in_repo(instance_id, repo) is None and (
                (instance_id, repo) in self.model.last_open):
            woken = self.model.predict_wake(instance_id, repo)  # as the repo stood before it
        entry = {"entry_id": f"m-{self.instances[0]}-{self.n}", "instance_id": instance_id,
                 "repo": repo, "session_id": session_id, "kind": "chat_user",
                 "content": f"message {self.n}", "at": _now_text()}
        mark, expected = self._mark(), Expected(entries=[entry["entry_id"]])
        at = self.model.tick()
        reply = self._request(subjects.API_TIMELINE_APPEND, entry)
        assert reply["ok"], reply
        kind = self.model.message(instance_id, repo, session_id, at, reply["seq"], expected,
                                  entry_id=entry["entry_id"])
        what = f"message on {repo} of {instance_id[-1]} as {session_id} ({kind})"
        if kind != "wake":
            self._settle(mark, expected, what)
            return
        verdict, node_id, engine = woken
        new_id = self._created(mark, "wake_requested", instance_id, repo)
        self.mine.add(new_id)
        expected.events.append(("wake_requested", new_id, None))
        self.model.open(verdict, new_id, instance_id, repo, engine, node_id,
                        instruction_entry=False, instructed=True, expected=expected)
        if verdict.error == "runner_offline":
            expected.notices.append((instance_id, "runner_offline", new_id, node_id))
        new = self._settle(mark, expected, f"{what} on {node_id}")
        self._check_decided(new, new_id, verdict, what)
        if not verdict.error:
            opened = self._event(new, "opened", new_id)
            assert opened["plan"]["instruction"] == entry["content"], opened["plan"]
            self._check_reply(dict(opened["reply"], ok=True), verdict, node_id, what)
            self._check_engine_saw(new, new_id, opened["reply"], "launch")

    @rule(node_id=st.sampled_from(list(MACHINES)), act=ONE_IN_4)
    def machine_offline(self, node_id, act):
        """A clean stop: the runner deletes its presence key."""
        if not act or node_id not in self.model.online:
            return self._idle_draw()
        self._count("machine_offline", node_id=node_id)
        mark, expected = self._mark(), Expected()
        self.model.machine_gone(node_id, "runner_offline", expected)
        self.run(self.p.stop_machine(node_id))
        self._settle(mark, expected, f"{node_id} offline")

    @precondition(lambda self: len(self.model.online) < len(MACHINES))
    @rule(node_id=st.sampled_from(list(MACHINES)))
    def machine_online(self, node_id):
        if node_id in self.model.online:
            return self._idle_draw()
        self._count("machine_online", node_id=node_id)
        mark = self._mark()
        self.run(self.p.start_machine(node_id))
        self.model.machine_started(node_id, self.p.machines[node_id].generation)
        self._settle(mark, Expected(), f"{node_id} back online")

    @rule(node_id=st.sampled_from(list(MACHINES)), act=ONE_IN_8)
    def runner_restart(self, node_id, act):
        """kill -9 and start again at once: the new process hosts nothing."""
        if not act or node_id not in self.model.online:
            return self._idle_draw()
        self._count("runner_restart", node_id=node_id)
        mark, expected = self._mark(), Expected()
        self.model.machine_gone(node_id, "runner_restarted", expected)
        self.run(self.p.restart_machine(node_id))
        self.model.machine_started(node_id, self.p.machines[node_id].generation)
        self._settle(mark, expected, f"{node_id} restarted")

    @precondition(lambda self: PAUSES)
    @rule(name=st.sampled_from(SERVICES), copy=st.integers(0, 1),
          span=st.sampled_from(PAUSE_SPANS), which=st.integers(0, 1),
          repo=st.sampled_from(REPOS), instruction=st.booleans())
    def open_while_paused(self, name, copy, span, which, repo, instruction):
        """An open while a copy of a service is stopped (SIGSTOP): the caller times out and
        asks again with its request_id until it has the answer; one conversation opens."""
        self._count("open_while_paused", name=name, copy=copy, span=span, which=which,
                    repo=repo, instruction=instruction)
        procs = self.p.every_copy(name)
        proc = procs[copy % len(procs)]
        instance_id = self.instances[which]
        node_id = self.model.last_open.get((instance_id, repo), ("m1",))[0]
        what = f"open {repo} of {instance_id[-1]} on {node_id} while {name} is paused {span} s"
        verdict = self.model.predict_open(instance_id, repo, "scripted", node_id, False)
        body = {"instance_id": instance_id, "repo": repo, "engine": "scripted",
                "node_id": node_id, "request_id": f"paused-{self.n}"}
        if instruction:
            body["instruction"] = f"instruction {self.n}"
        mark = self._mark()
        reply, retries = self.run(self._open_while_paused(proc, span, body))
        self.h.stats.rules["retries by request_id"] += retries
        self.h.trace(f"  model {verdict}; reply {_brief_reply(reply)} after {retries} retries")
        self._check_reply(reply, verdict, node_id, what)
        session_id = (reply["session_id"] if reply["ok"]
                      else self._created(mark, "open_requested", instance_id, repo))
        self.mine.add(session_id)
        expected = Expected()
        self.model.open(verdict, session_id, instance_id, repo, "scripted", node_id,
                        instruction_entry=instruction, instructed=instruction, expected=expected)
        new = self._settle(mark, expected, what)
        self._check_decided(new, session_id, verdict, what)
        opens = [e for e in new["events"] if e["type"] == "open_requested"]
        assert len(opens) == 1, f"{what}: {len(opens)} opens for one request_id"

    async def _open_while_paused(self, proc, span: float, body: dict) -> tuple[dict, int]:
        paused = asyncio.create_task(self.p.pause(proc, span))
        await asyncio.sleep(0.05)
        retries = 0
        try:
            while True:
                try:
                    reply = await self.p.request(subjects.API_SESSIONS_OPEN, body, timeout=8)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    retries += 1  # the copy that took the request is paused: ask again
                    continue
                if reply.get("ok") or reply["error"]["code"] != "timeout":
                    return reply, retries
                assert body["request_id"] in reply["error"]["message"], reply
                retries += 1
                await asyncio.sleep(0.5)
        finally:
            await paused

    @rule(name=st.sampled_from(SERVICES), act=ONE_IN_8)
    def kill_service(self, name, act):
        """SIGKILL and start again: nothing visible may change."""
        if not act or self.kills >= KILLS_PER_EXAMPLE:
            return self._idle_draw()
        self.kills += 1
        self._count("kill_service", name=name)
        mark = self._mark()
        self.run(self.p.kill_service(name))
        self._settle(mark, Expected(), f"{name} killed and restarted")

    # -- the faults of 1.2 (rules of their own: more can be added beside them) ---------------

    @precondition(lambda self: any(c.outcome == "resumed" for c in self.model.live()))
    @rule(n=st.integers(0, 10_000))
    def resume_refused_late(self, n):
        """The engine refuses a resume after the reply said it resumed: the runner reports
        `resume_lost` (as a runner does, CONTRACT.md 6), and every read of the open shows
        the machine's final word from then on (7)."""
        resumed = [c.session_id for c in _in_model_order(self.model.live())
                   if c.outcome == "resumed"]
        session_id = resumed[n % len(resumed)]
        c = self.model.by_id[session_id]
        self._count("resume_refused_late", session_id=session_id)
        mark, expected = self._mark(), Expected()
        self.model.resume_lost(session_id, REFUSED, expected)
        self.run(self.p.runner_event(c.node_id, {
            "type": "resume_lost", "session_id": session_id, "at": _now_text(),
            "reason": REFUSED}))
        what = f"resume_lost of {session_id} on {c.node_id}"
        self._settle(mark, expected, what)
        body = self.open_bodies.get(session_id)
        if body is not None:  # the same request again: its reply, as corrected
            again = self._request(subjects.API_SESSIONS_OPEN, body)
            assert again.get("session_id") == session_id, f"{what}: {again}"
            assert (again["outcome"], again["resumed"]) == (c.outcome, False), (
                f"{what}: the request's reply again {_brief_reply(again)}, the model {c.outcome}")
            if again["brief"] is not None:
                assert again["brief"]["spent"] is True, f"{what}: {again['brief']}"
        marks = self.run(read_marks(self.p.nc, {session_id}))
        assert [m.outcome for m in marks if m.kind != "relocation"][-1] == c.outcome, (
            f"{what}: the timeline's open line says {[m.outcome for m in marks]}")

    @precondition(lambda self: any(c.node_id in self.model.online for c in self.model.live()))
    @rule(n=st.integers(0, 10_000), act=ONE_IN_4)
    def failed_open_between_stop_and_open(self, n, act):
        """Stop a conversation, take its machine offline, open (runner_offline), bring the
        machine back and open again where it ran: the failed open is never the earlier
        conversation (3.1, 1.2), so the decision is the one without it."""
        if not act:
            return self._idle_draw()
        live = [c for c in _in_model_order(self.model.live()) if c.node_id in self.model.online]
        c = live[n % len(live)]
        self._count("failed_open_between_stop_and_open", session_id=c.session_id)
        which, node_id = self.instances.index(c.instance_id), c.node_id
        self.stop("live", self._platform_ids("live").index(c.session_id))
        self.machine_offline(node_id, True)
        self.open(which, c.repo, node_id, c.engine, False, True, False)
        self.machine_online(node_id)
        self.open(which, c.repo, node_id, c.engine, False, False, False)

    def teardown(self) -> None:
        """Stop what the example left live, as the platform lists it (the model may be the
        one that was wrong), so the next example starts on machines hosting nothing."""
        try:
            for instance_id in self.instances:
                listed = self._request(subjects.API_SESSIONS_LIST, {"instance_id": instance_id})
                for c in listed.get("conversations", []):
                    self._request(subjects.API_SESSIONS_STOP, {"session_id": c["session_id"]})
                self.run(self.p.unfollow_notices(instance_id))
            self.run(self.p._until(self.p.idle, STEP_TIMEOUT, "idle after the example"))
        except Exception as exc:  # the example's own failure is what matters
            self.h.trace(f"teardown: {exc!r}")


# -- comparing ------------------------------------------------------------------------------


def _in_model_order(conversations) -> list:
    """The platform's conversations in the order the model made them. Never by their ids:
    the platform draws those at random, and a choice that followed them would pick another
    conversation when Hypothesis replays or shrinks the example (the draws would then mean
    something else, and it stops with FlakyStrategyDefinition)."""
    return sorted(conversations, key=lambda c: c.created)


def _counted(events: list[dict]) -> list[tuple]:
    return [(e["type"], e["session_id"], e.get("reason")) for e in events
            if e["type"] in COUNTED_EVENTS]


def _notice_key(instance_id: str, notice: dict) -> tuple:
    where = notice.get("node_id") if "node_id" in notice else notice.get("repo")
    return (instance_id, notice["kind"], notice.get("session_id"), where)


def _missing(expected: Expected, new: dict) -> dict:
    seen_entries = Counter(e["entry_id"] for e in new["timeline"])
    seen_events = Counter(_counted(new["events"]))
    seen_notices = Counter(_notice_key(i, n) for i, n in new["notices"])
    missing = {
        "entries": list((Counter(expected.entries) - seen_entries).elements()),
        "events": list((Counter(expected.events) - seen_events).elements()),
        "notices": list((Counter(expected.notices) - seen_notices).elements()),
    }
    return {k: v for k, v in missing.items() if v}


def _brief_reply(reply: dict) -> str:
    if not reply.get("ok"):
        return json.dumps(reply.get("error"))
    keep = ("session_id", "node_id", "resumed", "seeded", "outcome")
    return json.dumps({**{k: reply.get(k) for k in keep}, "continuity": reply.get("continuity"),
                       "brief": reply.get("brief") is not None})


def _summary(new: dict) -> str:
    return json.dumps({
        "entries": [(e["entry_id"], e["session_id"]) for e in new["timeline"]],
        "events": _counted(new["events"]),
        "notices": [_notice_key(i, n) for i, n in new["notices"]],
        "rejected": [r.get("reason_code") for r in new["rejected"]],
    })


# -- the test -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def harness(postgres_server):
    with servers(postgres_server, "model") as (nats_proc, database_url, workdir):
        loop = Loop()
        platform = Platform(nats_url=nats_proc.url, monitor_url=nats_proc.monitor_url,
                            database_url=database_url, logs=workdir)
        try:
            loop.run(platform.start(MACHINES, copies=COPIES, repos=REPOS))
            yield Harness(platform, loop, datetime.now(UTC))
        finally:
            platform.close()
            loop.run(platform.disconnect())
            loop.close()


def _seed(config: pytest.Config) -> int:
    """SEEDLINE_MODEL_SEED replays a run; else a fresh seed under -m slow, the fixed one
    otherwise."""
    if os.environ.get("SEEDLINE_MODEL_SEED"):
        return int(os.environ["SEEDLINE_MODEL_SEED"])
    if "slow" in (config.getoption("markexpr") or ""):
        return secrets.randbits(32)
    return FIXED_SEED


def _target_steps(config: pytest.Config) -> int:
    if os.environ.get("SEEDLINE_MODEL_STEPS"):
        return int(os.environ["SEEDLINE_MODEL_STEPS"])
    return SLOW_STEPS if "slow" in (config.getoption("markexpr") or "") else DEFAULT_STEPS


@pytest.mark.timeout(4 * 3600)
def test_conversation_state_matches_the_model_step_by_step(harness, request, capsys):
    global HARNESS
    HARNESS = harness
    target = _target_steps(request.config)
    first_seed = _seed(request.config)
    with capsys.disabled():
        print(f"\nmodel-based seed {first_seed} (replay: SEEDLINE_MODEL_SEED={first_seed})")
    began = time.monotonic()
    try:
        # Hypothesis chooses each example's length: run until the target is reached. Each
        # round draws from a seed of its own, all derived from the first (one replays all).
        for round_ in itertools.count():
            if (stats := harness.stats).steps >= target:
                break
            per_example = stats.steps / stats.examples if stats.steps else 15
            machine = seed(first_seed + round_)(ConversationState)
            run_state_machine_as_test(machine, settings=settings(
                max_examples=max(2, math.ceil((target - stats.steps) / per_example)),
                stateful_step_count=30, deadline=None, database=None, print_blob=True,
                suppress_health_check=list(HealthCheck),
            ))
    finally:
        with capsys.disabled():
            print(f"\n{harness.stats.line(time.monotonic() - began)}; "
                  f"{COPIES} cop{'y' if COPIES == 1 else 'ies'} of each service; "
                  f"{harness.platform.watch.samples} presence samples; "
                  f"logs in {harness.platform.logs}")
    assert harness.stats.steps >= target
