"""What must hold after a run, once every fault is healed and the system has caught up.

Each check is a pure function of the history (what the clients did and saw) and of what the
streams, the projections and the APIs hold afterwards; each returns the problems it found,
in sentences that name the entries, requests and conversations concerned:

- every acknowledged entry is in the timeline exactly once, and each producer's entries of
  an instance are in the order the producer sent them (CONTRACT.md 2.2);
- the timeline projection holds exactly the stream's entries, and rebuilding each
  projection from the streams gives the digest it had;
- every open got a reply, or a `timeout` naming its request_id that was answered when the
  same request_id was asked again; one request_id never opened two conversations;
- each repo's conversations, folded from the session events in stream order, are never two
  live at once, and no sample of the machines' own presence shows two machines (or two
  entries on one) hosting conversations of the same repo (a listing the machine had already
  reported ended, `exited`, is one its next put has not yet caught up with);
- every stop that must tell the person (a machine gone offline or restarted, an idle stop,
  a lost resume) was told exactly once, and no notice was told twice;
- `sessions.list` shows exactly the conversations the session events leave live.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from seedline_contracts.times import parse_rfc3339

TOLD = {"runner_offline": "runner_offline", "runner_restarted": "runner_restarted",
        "idle": "stopped_idle"}


@dataclass
class Streams:
    """What the system holds afterwards."""

    timeline: list[dict]  # stored entries in stream order
    events: list[dict]  # session events in stream order
    notices: list[dict]  # SEEDLINE_NOTICES in stream order
    projected: Counter  # entry_id -> rows in the timeline projection
    listed: dict[str, set[str]]  # instance -> conversation ids sessions.list shows live
    rebuilds: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> digests


def check_entries(history, streams: Streams) -> list[str]:
    problems = []
    counts = Counter(e["entry_id"] for e in streams.timeline)
    twice = sorted(i for i, n in counts.items() if n > 1)
    if twice:
        problems.append(f"{len(twice)} entries are in the timeline more than once: {twice[:8]}")
    lost = sorted(set(history.acked) - set(counts))
    if lost:
        problems.append(f"{len(lost)} acknowledged entries are not in the timeline: {lost[:8]}")
    position = {e["entry_id"]: i for i, e in enumerate(streams.timeline)}
    for producer, sent in history.sent.items():
        by_instance = defaultdict(list)
        for entry_id in sent:
            if entry_id in history.acked and entry_id in position:
                by_instance[history.acked[entry_id]["instance"]].append(entry_id)
        for instance, ids in by_instance.items():
            late = [b for a, b in zip(ids, ids[1:]) if position[b] < position[a]]
            if late:
                problems.append(f"producer {producer}: {len(late)} entries of {instance} are "
                                f"before one it sent earlier, first {late[:5]}")
    if streams.projected != Counter(counts.keys()):
        missing = sorted(set(counts) - set(streams.projected))
        extra = sorted(set(streams.projected) - set(counts))
        doubled = sorted(i for i, n in streams.projected.items() if n > 1)
        problems.append(f"the timeline projection differs from the stream: {len(missing)} "
                        f"missing {missing[:5]}, {len(extra)} extra {extra[:5]}, "
                        f"{len(doubled)} twice {doubled[:5]}")
    for name, (before, after) in streams.rebuilds.items():
        if before != after:
            problems.append(f"rebuilding the {name} projection from the streams gives another "
                            f"digest ({before[:12]} before, {after[:12]} after)")
    return problems


def check_opens(history, streams: Streams) -> list[str]:
    problems = []
    unanswered = sorted(r for r, o in history.opens.items() if "final" not in o)
    if unanswered:
        problems.append(f"{len(unanswered)} opens never got a reply, even asked again by "
                        f"request_id: {unanswered[:8]}")
    for request_id, record in history.opens.items():
        for attempt in record["attempts"]:
            error = (attempt.get("reply") or {}).get("error") or {}
            if error.get("code") == "timeout" and request_id not in error.get("message", ""):
                problems.append(f"open {request_id}: a timeout that does not name its "
                                f"request_id: {error.get('message')!r}")
    opened_by = defaultdict(set)
    for e in streams.events:
        if e["type"] == "open_requested" and e.get("request_id"):
            opened_by[(e["instance_id"], e["request_id"])].add(e["session_id"])
    for (instance, request_id), ids in opened_by.items():
        if len(ids) > 1:
            problems.append(f"request_id {request_id} of {instance} opened {len(ids)} "
                            f"conversations: {sorted(ids)}")
    for request_id, record in history.opens.items():
        final = record.get("final") or {}
        if final.get("ok"):
            ids = opened_by.get((record["request"]["instance_id"], request_id), set())
            if final["session_id"] not in ids:
                problems.append(f"open {request_id} replied {final['session_id']}, which the "
                                f"session events never opened for it ({sorted(ids)})")
    return problems


def repo_of(events: list[dict]) -> dict[str, tuple[str, str]]:
    """Each conversation's (instance, repo), from the event that asked for it."""
    return {e["session_id"]: (e["instance_id"], e["repo"]) for e in events
            if e["type"] in ("open_requested", "wake_requested")}


def fold_live(events: list[dict]) -> tuple[dict[str, str], list[str]]:
    """The conversations live at the end (id -> machine), and every moment in the session
    events at which a repo had two live."""
    repos = repo_of(events)
    live: dict[str, str] = {}
    problems = []
    for e in events:
        sid = e["session_id"]
        if e["type"] in ("opened", "relocated"):
            node = e.get("to_node_id") or (e.get("reply") or {}).get("node_id") or \
                e.get("plan", {}).get("node_id", "?")
            others = [o for o in live if o != sid and repos.get(o) == repos.get(sid)]
            if others:
                problems.append(f"{sid} became live on {node} (event {e['type']} #{e['_seq']}) "
                                f"while {others} of the same repo {repos.get(sid)} was live")
            live[sid] = node
        elif e["type"] in ("stopped", "reaped", "open_failed"):
            live.pop(sid, None)
    return live, problems


def launches_on(events: list[dict]) -> dict[tuple[str, str], list[float]]:
    """When each conversation was launched on each machine (opened, relocated there), in
    seconds of the wall clock."""
    out = defaultdict(list)
    for e in events:
        if e["type"] in ("opened", "relocated"):
            node = e.get("to_node_id") or (e.get("reply") or {}).get("node_id")
            out[(node, e["session_id"])].append(parse_rfc3339(e["at"]).timestamp())
    return out


def ended_before(history, launches, node: str, session_id: str, t: float) -> bool:
    """Whether the machine had reported the conversation ended (`exited`) by run time t,
    with no launch of it there since: a presence still listing it is one not yet put again
    (the machine's put may wait on the cluster), not an engine that runs."""
    ends = [te for te, n, sid in history.exited if (n, sid) == (node, session_id) and te <= t]
    if not ends:
        return False
    ended = history.wall + max(ends)
    return not any(ended < at <= history.wall + t for at in launches.get((node, session_id), ()))


def check_one_live(history, streams: Streams) -> list[str]:
    live, problems = fold_live(streams.events)
    repos = repo_of(streams.events)
    launches = launches_on(streams.events)
    seen_twice: set = set()
    for t, hosted in history.presence:
        by_repo = defaultdict(list)
        for n, ids in hosted.items():
            for sid in ids:
                if ended_before(history, launches, n, sid, t):
                    continue
                by_repo[repos.get(sid, ("?", sid))].append((n, sid))
        for repo, where in by_repo.items():
            if len(where) > 1 and repo[0] != "?" and (repo, tuple(where)) not in seen_twice:
                seen_twice.add((repo, tuple(where)))
                problems.append(f"at {t:.1f} s the machines' presence shows {repo} hosted "
                                f"twice: {where}")
    for instance, listed in streams.listed.items():
        want = {sid for sid in live if repos.get(sid, ("",))[0] == instance}
        if listed != want:
            problems.append(f"sessions.list of {instance} shows {sorted(listed)}, the session "
                            f"events leave {sorted(want)} live")
    return problems


def check_notices(history, streams: Streams) -> list[str]:
    problems = []
    told = Counter((n.get("kind"), n.get("session_id")) for n in streams.notices
                   if n.get("session_id"))
    doubled = sorted(k for k, n in told.items() if n > 1)
    if doubled:
        problems.append(f"{len(doubled)} notices were told more than once: {doubled[:6]}")
    must = Counter()
    for e in streams.events:
        if e["type"] == "stopped" and e.get("reason") in TOLD:
            must[(TOLD[e["reason"]], e["session_id"])] += 1
        elif e["type"] == "reaped":
            must[("stopped_idle", e["session_id"])] += 1
        elif e["type"] == "resume_lost":
            must[("resume_lost", e["session_id"])] += 1
    untold = sorted(k for k in must if k not in told)
    if untold:
        problems.append(f"{len(untold)} stops that must tell the person were never told: "
                        f"{untold[:6]}")
    return problems


CHECKS = {"entries": check_entries, "opens": check_opens, "one live engine": check_one_live,
          "notices": check_notices}


def check(history, streams: Streams) -> dict[str, list[str]]:
    return {name: fn(history, streams) for name, fn in CHECKS.items()}
