"""Seedline against LangGraph's PostgresSaver: a 500-turn conversation, turn by turn.

The same conversation (alternating person and assistant messages, 100-3,000
characters of text each) is written to both, on the same Postgres server:

- LangGraph (langgraph-checkpoint-postgres, the bench extra): after every turn
  one checkpoint is put whose ``messages`` channel holds the whole message list
  (langchain_core messages, each with an id), as a StateGraph with an
  ``add_messages`` channel checkpoints it. The saver API is used directly with
  one checkpoint per turn, which is the least a graph writes (a real graph run
  also writes its input checkpoint and pending writes), so LangGraph's figures
  here are a lower bound.
- Seedline: one timeline entry per turn, appended through the timeline-writer
  (``seedline.api.timeline.append``: durable in SEEDLINE_TIMELINE, then
  projected), the writer running as its own process.

Bytes stored are ``pg_total_relation_size`` (heap, TOAST and indexes) summed
over each side's tables, after turns 10, 100 and 500. Rebuilding an engine's
context at turn 500: LangGraph loads the thread's latest state (``get_tuple``:
all 500 messages); Seedline composes the brief from the projection
(``compose_for`` with the composer's ``ViewReader`` over the Postgres TimelineView,
built as the seed-composer's app builds it),
and, for the same content as LangGraph, reads all 500 rows.

Each run uses fresh databases (and a fresh nats-server for Seedline); figures are
medians over runs with min and max.

    python -m bench.langgraph_compare [--runs 3] [--turns 500]

Writes bench/results/langgraph_compare.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from seedline_timeline_view.postgres import OFFSETS_TABLE as TIMELINE_OFFSETS_TABLE
from seedline_timeline_view.postgres import TABLE as TIMELINE_TABLE

from bench import journal_model, memory, report

TURNS = 500
MARKS = (10, 100, 500)
# Sizes are also taken here, so bytes per turn show stretch by stretch.
SIZE_MARKS = (10, 50, 100, 200, 300, 400, 500)
# Where the durable-execution journal model (bench.journal_model) is compared.
JOURNAL_MARKS = (50, 100, 200, 500)
RUNS = 3
CONTEXT_REPS = 15
INSTANCE = "benchlg"
REPO = "bench/langgraph"
LANGGRAPH_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
# The timeline-writer's projection and its offsets.
SEEDLINE_TABLES = (TIMELINE_TABLE, TIMELINE_OFFSETS_TABLE)
FLAT_LIMIT = 1.5  # bytes per turn late in the conversation / early, at most

_WORDS = (
    "the board move check pawn engine test failing passes branch commit diff file function returns"
    " value error trace line module import fixed opening rook knight bishop queen king castle rating"
    " puzzle lesson student review merge rebase build cache query index plan latency replay stream"
).split()


def conversation(turns: int, seed: int = 20260817) -> list[tuple[str, str]]:
    """(role, text) per turn: a person's message of 100-600 chars, an assistant's of 300-3,000."""
    rng = random.Random(seed)
    out = []
    for turn in range(1, turns + 1):
        role = "user" if turn % 2 else "assistant"
        length = rng.randint(100, 600) if role == "user" else rng.randint(300, 3_000)
        words, size = [], 0
        while size < length:
            word = rng.choice(_WORDS)
            words.append(word)
            size += len(word) + 1
        out.append((role, " ".join(words)[:length]))
    return out


# -- LangGraph -------------------------------------------------------------------------


def relation_bytes(conn, tables) -> dict[str, int]:
    """Heap, TOAST and indexes of each table; a table that is not there is an error, not 0
    bytes (a renamed table would otherwise make a side look smaller)."""
    out = {}
    for table in tables:
        row = conn.execute("SELECT pg_total_relation_size(to_regclass(%s))", (table,)).fetchone()
        value = row["pg_total_relation_size"] if isinstance(row, dict) else row[0]
        if value is None:
            raise RuntimeError(f"table {table} does not exist; the benchmark names the wrong one")
        out[table] = int(value)
    return out


def langgraph_run(url: str, turns: list[tuple[str, str]], marks, size_marks, reps: int) -> dict:
    import psycopg
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    thread = {"configurable": {"thread_id": f"thread-{uuid.uuid4().hex[:8]}", "checkpoint_ns": ""}}
    sizes, write_ms, all_writes = {}, {}, []
    with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        sizes[0] = relation_bytes(conn, LANGGRAPH_TABLES)
        config = thread
        checkpoint = empty_checkpoint()
        messages: list = []
        version = None
        for turn, (role, text) in enumerate(turns, 1):
            kind = HumanMessage if role == "user" else AIMessage
            # add_messages returns a new list with the message (given an id) appended.
            messages = [*messages, kind(content=text, id=str(uuid.uuid4()))]
            version = saver.get_next_version(version, None)
            checkpoint = create_checkpoint(checkpoint, None, turn)
            checkpoint["channel_values"] = {"messages": messages}
            checkpoint["channel_versions"] = {"messages": version}
            checkpoint["updated_channels"] = ["messages"]
            started = time.perf_counter()
            config = saver.put(
                config,
                checkpoint,
                {"source": "loop", "step": turn, "parents": {}},
                {"messages": version},
            )
            all_writes.append((time.perf_counter() - started) * 1000)
            if turn in marks:
                write_ms[turn] = all_writes[-1]
            if turn in size_marks:
                sizes[turn] = relation_bytes(conn, LANGGRAPH_TABLES)
        context_ms = []
        for _ in range(reps):
            started = time.perf_counter()
            state = saver.get_tuple(thread)
            context_ms.append((time.perf_counter() - started) * 1000)
            if len(state.checkpoint["channel_values"]["messages"]) != len(turns):
                raise RuntimeError("LangGraph's latest state does not hold every message")
        rows = conn.execute("SELECT count(*) AS n FROM checkpoints").fetchone()["n"]
    return {
        "sizes": sizes,
        "write_ms": write_ms,
        "write_ms_all": all_writes,
        "context_ms": statistics.median(context_ms),
        "context_messages": len(turns),
        "checkpoints": rows,
    }


# -- Seedline --------------------------------------------------------------------------


def _at(turn: int) -> str:
    minutes, seconds = divmod(turn * 10, 60)
    hours, minutes = divmod(minutes, 60)
    return f"2026-08-17T{10 + hours:02d}:{minutes:02d}:{seconds:02d}Z"


async def seedline_run(
    sys_: memory.System, turns: list[tuple[str, str]], marks, size_marks, reps: int
) -> dict:
    import psycopg
    from seedline_contracts import subjects
    from seedline_contracts.events import ContinuityDecided, LaunchPlan
    from seedline_contracts.sessions import Continuity
    from seedline_devtools.testing import request
    from seedline_platform import pg
    from seedline_seed_composer.brief_of_decision import compose_for
    from seedline_seed_composer.reader import ViewReader
    from seedline_platform.sealing import KvKeyStore, Sealer
    from seedline_timeline_view import PostgresTimelineView

    session = f"csess_lg{uuid.uuid4().hex[:8]}"
    sizes, write_ms, all_writes, stream_bytes = {}, {}, [], {}
    last_seq = None
    with psycopg.connect(sys_.database_url, autocommit=True) as conn:
        sizes[0] = relation_bytes(conn, SEEDLINE_TABLES)
        for turn, (role, text) in enumerate(turns, 1):
            body = {
                "entry_id": f"{session}-{turn}",
                "instance_id": INSTANCE,
                "repo": REPO,
                "session_id": session,
                "kind": "chat_user" if role == "user" else "chat_assistant",
                "content": text,
                "at": _at(turn),
                "engine": "raw",
            }
            started = time.perf_counter()
            reply = await request(sys_.nc, subjects.API_TIMELINE_APPEND, body)
            all_writes.append((time.perf_counter() - started) * 1000)
            if "seq" not in reply:
                raise RuntimeError(f"the append of turn {turn} failed: {reply}")
            last_seq = reply["seq"]
            if turn in marks:
                write_ms[turn] = all_writes[-1]
            if turn in size_marks:
                sizes[turn] = relation_bytes(conn, SEEDLINE_TABLES)
                info = await sys_.js.stream_info(subjects.TIMELINE_STREAM)
                stream_bytes[turn] = int(info.state.bytes)
    continuity = Continuity(mode="fresh", resume_from=None, reason_code="bench", reason="bench")
    plan = LaunchPlan(
        instance_id=INSTANCE,
        repo=REPO,
        engine="raw",
        node_id="bench-node",
        continuity=continuity,
        resume_key=None,
        instruction=None,
        clean_slate=False,
    )
    decision = ContinuityDecided(
        session_id=session,
        at=_at(len(turns)),
        continuity=continuity,
        seed_source="repo_timeline",
        until_seq=last_seq,
        entries_upto=len(turns),
        plan=plan,
    )
    brief_ms, full_ms = [], []
    brief = None
    pool = await pg.open_pool(sys_.database_url, "bench-seed-composer", max_size=1)
    try:
        # Content is stored sealed: the composer's reader opens it, as in the service.
        sealer = Sealer(KvKeyStore(sys_.nc.jetstream()))
        reader = ViewReader(PostgresTimelineView(pool, sealer))
        await compose_for(decision, reader)  # the pool's first connection is not part of the figure
        for _ in range(reps):
            started = time.perf_counter()
            brief = await compose_for(decision, reader)
            brief_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            rows = await reader.newest_first(INSTANCE, REPO, last_seq, len(turns))
            full_ms.append((time.perf_counter() - started) * 1000)
            if len(rows) != len(turns):
                raise RuntimeError(f"the projection holds {len(rows)} of {len(turns)} turns")
    finally:
        await pool.close()
    return {
        "sizes": sizes,
        "write_ms": write_ms,
        "write_ms_all": all_writes,
        "stream_bytes": stream_bytes,
        "context_ms": statistics.median(brief_ms),
        "full_read_ms": statistics.median(full_ms),
        "brief": {"rows": brief.rows, "chars": brief.chars, "omitted_rows": brief.omitted_rows},
    }


# -- the run ---------------------------------------------------------------------------


def _total(sizes: dict) -> int:
    return sum(sizes.values())


def _per_turn(sizes: dict[int, dict], marks) -> dict:
    """Bytes stored per turn over each stretch between marks (what each new turn costs)."""
    out, previous = {}, 0
    for mark in marks:
        out[f"{previous}-{mark}"] = (_total(sizes[mark]) - _total(sizes[previous])) / (
            mark - previous
        )
        previous = mark
    return out


async def _run(runs: int, turns_count: int, reps: int) -> dict:
    from seedline_devtools.embedded import start_postgres
    from seedline_platform.logging import configure_logging

    configure_logging("error", "bench")
    turns = conversation(turns_count)
    marks = tuple(m for m in MARKS if m <= turns_count)
    if turns_count not in marks:
        marks = (*marks, turns_count)
    size_marks = tuple(sorted({m for m in SIZE_MARKS if m <= turns_count} | set(marks)))
    tmp = Path(tempfile.mkdtemp(prefix="seedline-bench-langgraph-"))
    postgres = await asyncio.to_thread(start_postgres, tmp / "pg")
    per_run = []
    facts = None
    try:
        for index in range(runs):
            lg_url = await asyncio.to_thread(postgres.ensure_database, f"langgraph_run{index}")
            async with memory.system(
                services=("timeline-writer",),
                prefix="seedline-bench-lg-",
                postgres=postgres,
                database=f"seedline_run{index}",
            ) as sys_:
                facts = facts or sys_.facts()
                result = {}
                for side in (
                    ("langgraph", "seedline") if index % 2 == 0 else ("seedline", "langgraph")
                ):
                    if side == "langgraph":
                        result[side] = await asyncio.to_thread(
                            langgraph_run, lg_url, turns, marks, size_marks, reps
                        )
                    else:
                        result[side] = await seedline_run(sys_, turns, marks, size_marks, reps)
                per_run.append(result)
            print(f"langgraph_compare run {index + 1}/{runs} done", flush=True)
    finally:
        try:
            postgres.stop()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return assemble(per_run, marks, size_marks, turns, facts)


def assemble(per_run: list[dict], marks, size_marks, turns, facts) -> dict:
    sides = {}
    for side in ("langgraph", "seedline"):
        runs = [r[side] for r in per_run]
        sides[side] = {
            "bytes": {m: report.spread(_total(r["sizes"][m]) for r in runs) for m in (0, *size_marks)},
            "bytes_by_table_at_end": runs[0]["sizes"][marks[-1]],
            "bytes_per_turn": {
                k: report.spread(_per_turn(r["sizes"], size_marks)[k] for r in runs)
                for k in _per_turn(runs[0]["sizes"], size_marks)
            },
            "write_ms": {m: report.spread(r["write_ms"][m] for r in runs) for m in marks},
            "write_ms_last10_median": report.spread(
                statistics.median(r["write_ms_all"][-10:]) for r in runs
            ),
            "context_ms": report.spread(r["context_ms"] for r in runs),
        }
    sl = per_run[0]["seedline"]
    sides["seedline"]["full_read_ms"] = report.spread(
        r["seedline"]["full_read_ms"] for r in per_run
    )
    sides["seedline"]["brief"] = sl["brief"]
    sides["seedline"]["stream_bytes"] = {
        m: report.spread(r["seedline"]["stream_bytes"][m] for r in per_run) for m in size_marks
    }
    # The first stretches fill pages the empty tables already hold; from turn 100 on, each
    # stretch of 100 turns pays for its own pages.
    keys = list(sides["seedline"]["bytes_per_turn"])
    early, late = keys[2] if len(keys) > 2 else keys[0], keys[-1]
    sl_bpt = sides["seedline"]["bytes_per_turn"]
    flat = sl_bpt[late]["median"] / sl_bpt[early]["median"]
    lg_bpt = sides["langgraph"]["bytes_per_turn"]
    end = marks[-1]
    text_bytes = sum(len(t.encode()) for _, t in turns)
    return {
        "benchmark": "langgraph_compare",
        "generated_at": report.stamp(),
        "machine": report.machine(),
        "servers": facts,
        "config": {
            "turns": len(turns),
            "marks": marks,
            "size_marks": size_marks,
            "runs": len(per_run),
            "context_reps": CONTEXT_REPS,
            "conversation_text_bytes": text_bytes,
            "message_chars": "person 100-600, assistant 300-3,000 (alternating)",
        },
        "sides": sides,
        "ratios": {
            "bytes_at_end_langgraph_over_seedline": sides["langgraph"]["bytes"][end]["median"]
            / sides["seedline"]["bytes"][end]["median"],
            "write_ms_at_end_langgraph_over_seedline": sides["langgraph"]["write_ms"][end]["median"]
            / sides["seedline"]["write_ms"][end]["median"],
            "context_ms_langgraph_over_seedline_brief": sides["langgraph"]["context_ms"]["median"]
            / sides["seedline"]["context_ms"]["median"],
            "seedline_bytes_per_turn_late_over_early": flat,
            "langgraph_bytes_per_turn_late_over_early": lg_bpt[late]["median"]
            / lg_bpt[early]["median"],
        },
        "stretches": {"early": early, "late": late},
        "journal": journal_compare(turns, sides["seedline"], size_marks),
        "target_flat_limit": FLAT_LIMIT,
        "target_met": flat <= FLAT_LIMIT,
        "per_run": [
            {side: {k: v for k, v in r[side].items() if k != "write_ms_all"} for side in r}
            for r in per_run
        ],
    }


def journal_compare(turns, seedline: dict, size_marks) -> dict:
    """The journal model's bytes beside Seedline's measured ones at the same turns, and
    the turn at which the journal passes Temporal's 50 MB history limit (the same
    conversation, continued: bench.langgraph_compare.conversation is prefix-stable)."""
    marks = [m for m in JOURNAL_MARKS if m in size_marks]
    journal = journal_model.journal_bytes(turns)
    longer = conversation(max(len(turns), 4_000))
    over = journal_model.first_turn_over(journal_model.HISTORY_LIMIT_BYTES, longer)
    stream = seedline["stream_bytes"]
    stream_per_turn = {m: stream[m]["median"] / m for m in marks}
    return {
        "marks": marks,
        "journal_bytes": {m: journal[m - 1] for m in marks},
        "seedline_stream_bytes": {m: stream[m]["median"] for m in marks},
        "seedline_postgres_bytes": {m: seedline["bytes"][m]["median"] for m in marks
                                    if m in seedline["bytes"]},
        "journal_over_seedline": {m: journal[m - 1] / stream[m]["median"] for m in marks},
        "journal_passes_limit_at_turn": over,
        "history_limit_bytes": journal_model.HISTORY_LIMIT_BYTES,
        # Linear: the stream bytes per turn at the last mark against the first.
        "seedline_stream_per_turn_last_over_first": stream_per_turn[marks[-1]]
        / stream_per_turn[marks[0]] if marks else None,
    }


def _kb(s: dict) -> str:
    return report.cell(
        {k: (v / 1024 if isinstance(v, (int, float)) else v) for k, v in s.items()}, 0, " KB"
    )


def markdown(result: dict) -> str:
    lg, sl, marks = (
        result["sides"]["langgraph"],
        result["sides"]["seedline"],
        result["config"]["marks"],
    )
    end = marks[-1]
    lines = [
        "# Seedline against LangGraph PostgresSaver",
        "",
        f"One {result['config']['turns']}-turn conversation ({result['config']['message_chars']} characters;"
        f" {result['config']['conversation_text_bytes']:,} bytes of text in all), written turn by turn;"
        f" {result['config']['runs']} runs on fresh databases, median (min - max).",
        "",
        "| after turn | LangGraph: Postgres bytes | Seedline: Postgres bytes | LangGraph: write that turn ms"
        " | Seedline: write that turn ms |",
        "|---:|---:|---:|---:|---:|",
    ]
    for m in marks:
        lines.append(
            f"| {m} | {_kb(lg['bytes'][m])} | {_kb(sl['bytes'][m])} | {report.cell(lg['write_ms'][m], 2)}"
            f" | {report.cell(sl['write_ms'][m], 2)} |"
        )
    for stretch in lg["bytes_per_turn"]:
        lines.append(
            f"| bytes per turn, turns {stretch} | {report.cell(lg['bytes_per_turn'][stretch])}"
            f" | {report.cell(sl['bytes_per_turn'][stretch])} | | |"
        )
    r = result["ratios"]
    lines += [
        "",
        f"| context at turn {end} | LangGraph: get_tuple (all {end} messages) | Seedline: brief (compose_for)"
        f" | Seedline: read all {end} rows |",
        "|---|---:|---:|---:|",
        f"| ms | {report.cell(lg['context_ms'], 2)} | {report.cell(sl['context_ms'], 2)}"
        f" | {report.cell(sl['full_read_ms'], 2)} |",
        "",
        f"At turn {end} LangGraph stores {r['bytes_at_end_langgraph_over_seedline']:.1f}x Seedline's bytes;"
        f" its turn-{end} write takes {r['write_ms_at_end_langgraph_over_seedline']:.1f}x as long"
        f" (last 10 turns: LangGraph {report.cell(lg['write_ms_last10_median'], 2)} ms,"
        f" Seedline {report.cell(sl['write_ms_last10_median'], 2)} ms).",
        f"Bytes per turn, turns {result['stretches']['late']} / turns {result['stretches']['early']}:"
        f" Seedline {r['seedline_bytes_per_turn_late_over_early']:.2f}x"
        f" (flat: at most {result['target_flat_limit']}x, {'met' if result['target_met'] else 'NOT met'}),"
        f" LangGraph {r['langgraph_bytes_per_turn_late_over_early']:.2f}x.",
        f"Seedline's brief at turn {end}: {sl['brief']['rows']} rows, {sl['brief']['chars']:,} chars,"
        f" {sl['brief']['omitted_rows']} older rows summarised as omitted.",
        f"Outside Postgres Seedline also keeps the entries in SEEDLINE_TIMELINE (its source of truth):"
        f" {_kb(sl['stream_bytes'][end])} at turn {end}.",
        *journal_lines(result["journal"]),
        f"LangGraph tables at turn {end} (run 1): "
        + ", ".join(f"{t} {v / 1024:,.0f} KB" for t, v in lg["bytes_by_table_at_end"].items())
        + "; Seedline: "
        + ", ".join(f"{t} {v / 1024:,.0f} KB" for t, v in sl["bytes_by_table_at_end"].items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


def journal_lines(j: dict) -> list[str]:
    lines = ["", "Against a durable-execution journal (bench.journal_model: each model call's whole"
             " input journaled, a lower bound):", "",
             "| after turn | journal bytes (model) | Seedline stream bytes (measured) | journal / Seedline |",
             "|---:|---:|---:|---:|"]
    for m in j["marks"]:
        lines.append(f"| {m} | {j['journal_bytes'][m] / 1024:,.0f} KB"
                     f" | {j['seedline_stream_bytes'][m] / 1024:,.0f} KB"
                     f" | {j['journal_over_seedline'][m]:,.1f}x |")
    over = j["journal_passes_limit_at_turn"]
    lines += ["", f"The journal passes {j['history_limit_bytes'] // 1024 // 1024} MB at turn {over}"
              f" (model call {over // 2 if over else '-'}); Seedline's stream bytes per turn at turn"
              f" {j['marks'][-1]} are {j['seedline_stream_per_turn_last_over_first']:.2f}x those at"
              f" turn {j['marks'][0]} (linear).", ""]
    return lines


def run_langgraph_compare(
    runs: int = RUNS, turns: int = TURNS, reps: int = CONTEXT_REPS, write: bool = True
) -> dict:
    result = asyncio.run(_run(runs, turns, reps))
    if write:
        report.write("langgraph_compare", result, markdown(result))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.langgraph_compare", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--turns", type=int, default=TURNS)
    args = parser.parse_args(argv)
    print(markdown(run_langgraph_compare(args.runs, args.turns)))


if __name__ == "__main__":
    main()
