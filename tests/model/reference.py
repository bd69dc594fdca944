"""A small reference model of conversation state (CONTRACT.md 3.1, 3.2, 4 and 4.1).

Written from the contract alone, without the services' code: what each open, wake,
relocation and stop must answer, which conversation is live where, which entries the
timeline gains, which lifecycle events are recorded and which notices are sent.

Time is a number: an entry written hours or days before the test started is the
negative of its age in seconds; everything the platform does during the test gets the
next tick of a logical clock (1, 2, 3 ...), in the order it happens (a person's
message, then the machine's confirmation, then what the engine says).

Readings of the contract it makes: a wake is decided as the repo stood before the
person's message (the message is the new conversation's instruction, not the previous
one's activity); a conversation whose only open failed is never the earlier
conversation (1.2; its instruction entry still counts for the brief); an entry counts
at the earlier of its `at` and when it was accepted (1.2: one dated ahead counts from
its arrival); activity ties go to the conversation with the higher entry seq; the
engine a timeline-only conversation ran on is the newest engine its entries name; a
resume's expectation is the newest chat_user or chat_assistant entry of the earlier
conversation (1.2); a runner's `resume_lost` after a resumed reply makes the outcome
resume_unconfirmed_briefed (fresh when no brief was offered), recorded, listed and told
once (1.2, section 7).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

RESUME_WINDOW_SECONDS = 4 * 86400
TURN_KINDS = ("chat_user", "chat_assistant")
STATELESS_ENGINES = frozenset({"raw", "openai"})


@dataclass
class Conversation:
    instance_id: str
    repo: str
    session_id: str
    platform: bool = False
    state: str | None = None  # live | stopped | failed, for conversations the platform opened
    created: int = 0  # order among the platform's conversations
    node_id: str | None = None
    engine: str | None = None  # only a confirmed open or relocation says it
    entry_engine: str | None = None  # the newest engine its entries name
    key: tuple[str, int] | None = None  # (machine, runner generation) that issued the resume key
    # The engine's own conversation behind the key was given a message: an empty one is
    # never resumed (CONTRACT.md 3.2, 1.2).
    key_given: bool = False
    last_entry_at: float | None = None
    last_entry_seq: int = 0
    confirmed_at: float | None = None
    newest_turn: str | None = None  # entry_id of its newest chat_user or chat_assistant entry
    outcome: str | None = None  # the last launch's outcome, as the machine finally had it
    brief_offered: bool = False  # whether that launch was offered a brief

    @property
    def activity(self) -> float | None:
        times = [t for t in (self.last_entry_at, self.confirmed_at) if t is not None]
        return max(times) if times else None

    def recency(self) -> tuple:
        activity = self.activity
        return (activity is not None, activity if activity is not None else float("-inf"),
                self.last_entry_seq, self.created, self.session_id)

    @property
    def ran_engine(self) -> str | None:
        return self.engine or self.entry_engine


@dataclass(frozen=True)
class Verdict:
    """What an open, a wake or a relocation must answer."""

    error: str | None = None  # an error code, or None for ok
    reason_code: str | None = None
    mode: str | None = None
    resume_from: str | None = None
    resumed: bool = False
    brief: bool = False
    seeded: bool = False
    outcome: str | None = None
    unchanged: bool = False  # a relocation to the machine it is live on
    reason_says: tuple[str, ...] = ()  # words the reason sentence must hold
    error_message_names: str | None = None  # e.g. the newer conversation's id
    expect: str | None = None  # a resume's expectation: the entry_id of the earlier turn


@dataclass
class Expected:
    """What one step must add: entries (ids), lifecycle events and notices."""

    entries: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str | None]] = field(default_factory=list)  # type, id, reason
    # (instance, kind, session_id (None for not_woken), node_id (or the repo, for not_woken))
    notices: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)


def age_words(seconds: float) -> str:
    """3.1: whole units rounded down, hours below 48, then days (the ages the test writes)."""
    hours = int(seconds // 3600)
    return f"{hours} hours ago" if hours < 48 else f"{hours // 24} days ago"


def reason_words(reason: str, prev: Conversation | None, engine: str) -> tuple[str, ...]:
    says: list[str] = []
    if prev is not None and prev.activity is not None and prev.activity < 0:
        says.append(age_words(-prev.activity))  # written before the test started
    if reason == "engine_changed":
        says.append(f"ran on {prev.ran_engine} rather than {engine}")
    if reason == "past_window":
        says.append("past the 4-day window")
    return tuple(says)


def outcome_of(resumed: bool, seeded: bool, brief: bool, mode: str) -> str:
    """CONTRACT.md 3.2."""
    if resumed:
        return "resumed"
    if seeded:
        return "briefed" if mode == "fresh" else "resume_unconfirmed_briefed"
    if not brief:
        return "fresh"
    return "resume_unconfirmed_fresh" if mode == "resume" else "unbriefed"


class Model:
    def __init__(self, machines: dict[str, int], online: set[str], offered: set[str]) -> None:
        self.generation = dict(machines)  # each machine's current runner generation
        self.online = set(online)
        self.offered = frozenset(offered)  # engines every machine offers
        self.conversations: dict[tuple[str, str, str], Conversation] = {}
        self.by_id: dict[str, Conversation] = {}  # the platform's, by their unique ids
        self.last_open: dict[tuple[str, str], tuple[str, str]] = {}
        # Repos whose people were told not_woken: a burst gets one notice per 10 minutes
        # (CONTRACT.md 4, 1.2); an example runs well within one window.
        self.told_not_woken: set[tuple[str, str]] = set()
        self.repo_entries: Counter[tuple[str, str]] = Counter()
        self._clock = 0
        self._seq = 0
        self._created = 0

    # -- time and entries -------------------------------------------------------------

    def tick(self) -> int:
        self._clock += 1
        return self._clock

    def conversation(self, instance_id: str, repo: str, session_id: str) -> Conversation:
        key = (instance_id, repo, session_id)
        if key not in self.conversations:
            self.conversations[key] = Conversation(instance_id, repo, session_id)
        return self.conversations[key]

    def add_entry(
        self, instance_id: str, repo: str, session_id: str, at: float, engine: str | None,
        kind: str | None = None, entry_id: str | None = None, accepted: float | None = None,
    ) -> None:
        """`accepted`: when the writer took it, for an entry dated after that (3.1, 1.2)."""
        c = self.conversation(instance_id, repo, session_id)
        self._seq += 1
        if accepted is not None:
            at = min(at, accepted)
        if kind in TURN_KINDS and entry_id is not None:
            c.newest_turn = entry_id
        c.last_entry_at = at if c.last_entry_at is None else max(at, c.last_entry_at)
        c.last_entry_seq = self._seq
        c.entry_engine = engine or c.entry_engine
        self.repo_entries[(instance_id, repo)] += 1

    # -- what is live ------------------------------------------------------------------

    def live(self, instance_id: str | None = None) -> list[Conversation]:
        return [c for c in self.by_id.values() if c.state == "live"
                and instance_id in (None, c.instance_id)]

    def live_in_repo(self, instance_id: str, repo: str) -> Conversation | None:
        found = [c for c in self.live(instance_id) if c.repo == repo]
        assert len(found) <= 1, f"the model holds two live conversations on {repo}: {found}"
        return found[0] if found else None

    def platform_of_repo(self, instance_id: str, repo: str) -> list[Conversation]:
        return sorted((c for c in self.by_id.values()
                       if (c.instance_id, c.repo) == (instance_id, repo)), key=lambda c: c.created)

    # -- the decision (3.1) -------------------------------------------------------------

    def previous(self, instance_id: str, repo: str) -> Conversation | None:
        mine = [c for (i, r, _), c in self.conversations.items()
                if (i, r) == (instance_id, repo) and c.state != "failed"]
        return max(mine, key=Conversation.recency, default=None)

    def decide(
        self, instance_id: str, repo: str, engine: str, node_id: str, force_fresh: bool
    ) -> tuple[str, Conversation | None]:
        prev = self.previous(instance_id, repo)
        if force_fresh:
            return "force_fresh", prev
        if prev is None:
            return "no_previous", prev
        if prev.activity is None:
            return "no_activity", prev
        if -prev.activity > RESUME_WINDOW_SECONDS:
            return "past_window", prev
        if prev.ran_engine is not None and prev.ran_engine != engine:
            return "engine_changed", prev
        if engine in STATELESS_ENGINES:
            return "engine_stateless", prev
        if prev.key is None:
            return "no_resume_key", prev
        if prev.key[0] != node_id:
            return "other_machine", prev
        return "resume", prev

    def predict_open(
        self, instance_id: str, repo: str, engine: str, node_id: str, force_fresh: bool
    ) -> Verdict:
        reason, prev = self.decide(instance_id, repo, engine, node_id, force_fresh)
        mode = "resume" if reason == "resume" else "fresh"
        brief = self.repo_entries[(instance_id, repo)] > 0 and not force_fresh
        base = Verdict(reason_code=reason, mode=mode, brief=brief,
                       resume_from=prev.session_id if mode == "resume" else None,
                       reason_says=reason_words(reason, prev, engine),
                       expect=prev.newest_turn if mode == "resume" else None)
        if node_id not in self.online:
            return replace(base, error="runner_offline")
        if engine not in self.offered:
            return replace(base, error="launch_refused")
        resumed = (mode == "resume" and prev.key == (node_id, self.generation[node_id])
                   and prev.key_given)
        seeded = brief and not resumed
        return replace(base, resumed=resumed, seeded=seeded,
                       outcome=outcome_of(resumed, seeded, brief, mode))

    # -- steps ----------------------------------------------------------------------------

    def open(
        self, verdict: Verdict, session_id: str, instance_id: str, repo: str, engine: str,
        node_id: str, *, instruction_entry: bool, instructed: bool, expected: Expected,
    ) -> None:
        """Apply an open the verdict judged. A wake has no instruction entry of its own (the
        person's message is one already) but its launch runs that message."""
        self._created += 1
        c = self.conversation(instance_id, repo, session_id)
        c.platform, c.created, c.node_id = True, self._created, node_id
        self.by_id[session_id] = c
        expected.events.append(("open_requested", session_id, None))
        if instruction_entry:
            self.add_entry(instance_id, repo, session_id, self.tick(), None, "chat_user",
                           f"{session_id}:instruction")
            expected.entries.append(f"{session_id}:instruction")
        if verdict.error:
            c.state = "failed"
            expected.events.append(("open_failed", session_id, None))
            return
        self._supersede(instance_id, repo, session_id, expected)
        prev = self.by_id.get(verdict.resume_from) if verdict.resume_from else None
        c.state, c.engine, c.confirmed_at = "live", engine, self.tick()
        c.key = prev.key if verdict.resumed else (node_id, self.generation[node_id])
        c.key_given = (verdict.resumed and prev.key_given) or instructed
        c.outcome, c.brief_offered = verdict.outcome, verdict.brief
        self.last_open[(instance_id, repo)] = (node_id, engine)
        # The engine's own id is in `opened`: no `engine_bound` is recorded besides (1.3).
        expected.events.append(("opened", session_id, None))
        if instructed:
            self.add_entry(instance_id, repo, session_id, self.tick(), engine, "chat_assistant",
                           f"{session_id}:launch:end")
            expected.entries.append(f"{session_id}:launch:end")

    def _supersede(self, instance_id: str, repo: str, keep: str, expected: Expected) -> None:
        for other in self.live(instance_id):
            if other.repo == repo and other.session_id != keep:
                other.state = "stopped"
                expected.events.append(("stopped", other.session_id, "superseded"))

    def message(
        self, instance_id: str, repo: str, session_id: str, at: float, seq: int,
        expected: Expected, engine: str | None = None, entry_id: str | None = None,
    ) -> str:
        """A person's chat_user entry: a turn, a wake, not_woken, or (a backfill) nothing.

        Returns "turn", "wake", "not_woken" or "backfill". A wake is then applied with
        ``open`` once its conversation's id is known.
        """
        fresh = at > 0
        live = self.live_in_repo(instance_id, repo)
        self.add_entry(instance_id, repo, session_id, at, engine, "chat_user", entry_id)
        if live is not None:
            answer = f"{live.session_id}:turn-{seq}:end"
            self.add_entry(instance_id, repo, live.session_id, self.tick(), live.engine,
                           "chat_assistant", answer)
            expected.entries.append(answer)
            live.key_given = True
            return "turn"
        if not fresh:
            return "backfill"
        if (instance_id, repo) not in self.last_open:
            if (instance_id, repo) not in self.told_not_woken:
                self.told_not_woken.add((instance_id, repo))
                expected.notices.append((instance_id, "not_woken", None, repo))
            return "not_woken"
        return "wake"

    def predict_wake(self, instance_id: str, repo: str) -> tuple[Verdict, str, str]:
        """Decided as the repo stood before the message (its brief ends before it too)."""
        node_id, engine = self.last_open[(instance_id, repo)]
        return self.predict_open(instance_id, repo, engine, node_id, False), node_id, engine

    def predict_relocate(self, session_id: str, node_id: str) -> Verdict:
        c = self.by_id.get(session_id)
        if c is None:
            return Verdict(error="not_found")
        if c.state not in ("live", "stopped"):
            return Verdict(error="invalid_request")
        ran = [o for o in self.platform_of_repo(c.instance_id, c.repo)
               if o.state in ("live", "stopped")]
        if ran[-1] is not c:
            return Verdict(error="invalid_request", error_message_names=ran[-1].session_id)
        if c.state == "live" and c.node_id == node_id:
            return Verdict(unchanged=True)
        brief = self.repo_entries[(c.instance_id, c.repo)] > 0
        base = Verdict(reason_code="other_machine", mode="fresh", brief=brief)
        if node_id not in self.online:
            return replace(base, error="runner_offline")
        return replace(base, seeded=brief, outcome=outcome_of(False, brief, brief, "fresh"))

    def relocate(self, verdict: Verdict, session_id: str, node_id: str, expected: Expected):
        if verdict.unchanged or verdict.error in ("not_found", "invalid_request"):
            return
        if verdict.error:
            expected.events.append(("open_failed", session_id, None))
            return
        c = self.by_id[session_id]
        if c.state == "live":
            # Stopped first, so its machine saves its checkout before the new launch
            # (CONTRACT.md 4, 6).
            expected.events.append(("stopped", session_id, "relocated"))
        self._supersede(c.instance_id, c.repo, session_id, expected)
        c.state, c.node_id, c.confirmed_at = "live", node_id, self.tick()
        c.key, c.key_given = (node_id, self.generation[node_id]), False
        c.outcome, c.brief_offered = verdict.outcome, verdict.brief
        self.last_open[(c.instance_id, c.repo)] = (node_id, c.engine)
        expected.events.append(("relocated", session_id, None))

    def resume_lost(self, session_id: str, reason: str, expected: Expected) -> bool:
        """A runner says the engine refused the resume after its reply (6, 7; 1.2). Only a
        live, resumed launch changes: its outcome becomes the machine's final word,
        recorded once and told once. Returns whether it changed."""
        c = self.by_id.get(session_id)
        if c is None or c.state != "live" or c.outcome != "resumed":
            return False
        c.outcome = outcome_of(False, c.brief_offered, c.brief_offered, "resume")
        expected.events.append(("resume_lost", session_id, reason))
        expected.notices.append((c.instance_id, "resume_lost", session_id, None))
        return True

    def stop(self, session_id: str, expected: Expected) -> str:
        """"not_found", "stopped" or "not_live"."""
        c = self.by_id.get(session_id)
        if c is None:
            return "not_found"
        if c.state != "live":
            return "not_live"
        c.state = "stopped"
        expected.events.append(("stopped", session_id, "requested"))
        return "stopped"

    def machine_gone(self, node_id: str, reason: str, expected: Expected) -> None:
        """A clean stop (runner_offline) or a restart that lost everything (runner_restarted)."""
        for c in self.live():
            if c.node_id == node_id:
                c.state = "stopped"
                expected.events.append(("stopped", c.session_id, reason))
                expected.notices.append((c.instance_id, reason, c.session_id, node_id))
        if reason == "runner_offline":
            self.online.discard(node_id)

    def machine_started(self, node_id: str, generation: int) -> None:
        self.generation[node_id] = generation
        self.online.add(node_id)
