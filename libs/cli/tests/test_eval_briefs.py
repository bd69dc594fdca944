"""`seedline eval briefs`: the briefs of real transcripts, measured through the composer's code."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from seedline_seed_composer import eval_cmd

CORPUS = Path(__file__).resolve().parents[3] / "tests" / "data" / "transcripts" / "corpus.jsonl"
SOURCES = CORPUS.with_name("sources.jsonl")


def run_json(seedline, *args: str) -> dict:
    result = seedline("eval", "briefs", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def corpus_figures() -> dict:
    from typer.testing import CliRunner

    from seedline_cli.main import app

    result = CliRunner().invoke(app, ["eval", "briefs", str(CORPUS), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# The committed corpus


def test_the_corpus_is_real_varied_and_described_line_by_line() -> None:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    sources = [json.loads(line) for line in SOURCES.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(sources) >= 25
    assert [s["line"] for s in sources] == list(range(1, len(lines) + 1))
    assert CORPUS.stat().st_size < 5 * 1024 * 1024
    kinds = {s["source"].split()[0] for s in sources}
    assert {"aider", "SWE-agent", "Claude", "Codex"} <= kinds
    # Long agent runs: hundreds of tool rows after one or two instructions.
    long_runs = [s for s in sources if s["tool_rows"] >= 300 and s["instructions"] <= 2]
    assert len(long_runs) >= 3
    assert any(s["instructions"] > 10 for s in sources)


def test_every_brief_is_contiguous_and_holds_the_newest_entry_and_last_instruction(
    corpus_figures,
) -> None:
    total = corpus_figures["total"]
    assert total["transcripts"] == len(CORPUS.read_text(encoding="utf-8").splitlines())
    assert corpus_figures["malformed"] == []
    for key in ("contiguous", "newest", "last_instruction"):
        assert total[key]["present"] == total[key]["of"], key
    assert total["budget"] == {"rows": 60, "chars": 12_000}


def test_the_task_is_in_every_brief_whose_conversation_has_at_most_ten_instructions_and_the_first_fits(  # noqa: E501
    corpus_figures,
) -> None:
    fitting = [t for t in corpus_figures["transcripts"] if t["task_fits"]]
    assert len(fitting) >= 25
    missing = [t["line"] for t in fitting if not t["task"]]
    assert missing == []
    total = corpus_figures["total"]["task_where_it_fits"]
    assert total == {"present": len(fitting), "of": len(fitting)}


def test_long_runs_spend_most_of_the_budget_on_tool_output_yet_keep_the_task(
    corpus_figures,
) -> None:
    sources = {json.loads(line)["line"]: json.loads(line)
               for line in SOURCES.read_text(encoding="utf-8").splitlines()}
    long_runs = [t for t in corpus_figures["transcripts"]
                 if sources[t["line"]]["tool_rows"] >= 300]
    assert long_runs
    for t in long_runs:
        assert t["instructions_part"] and t["task"] and t["tool_share"] > 0.5


def test_each_brief_keeps_within_its_budget(corpus_figures) -> None:
    for t in corpus_figures["transcripts"]:
        assert 1 <= t["rows_kept"] <= 60 and t["chars_kept"] <= 12_000
        assert 0 <= t["tool_share"] <= 1


def test_a_larger_budget_keeps_more(seedline, corpus_figures) -> None:
    larger = run_json(seedline, str(CORPUS), "--budget", "120:40000")
    assert larger["total"]["budget"] == {"rows": 120, "chars": 40_000}
    assert larger["total"]["chars_kept"] > corpus_figures["total"]["chars_kept"]
    assert larger["total"]["task"]["present"] >= corpus_figures["total"]["task"]["present"]


def test_the_table_names_every_figure(seedline) -> None:
    result = seedline("eval", "briefs", str(CORPUS))
    assert result.exit_code == 0, result.output
    for words in ("transcripts", "contiguous", "newest entry", "last instruction", "task",
                  "task where it fits", "tool output", "of the budget"):
        assert words in result.stdout


# Off the happy path


def write(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(content)
    return path


GOOD = json.dumps([["chat_user", "Add castling."], ["terminal", "ok"]]).encode()


def test_malformed_lines_are_reported_by_number_and_skipped(seedline, tmp_path) -> None:
    lines = [GOOD, b"not json", b"{}", b"[]", b'[["bogus", "x"]]', b'[["chat_user", 5]]',
             b"\xff\xfe", b"", b'[["chat_user"]]', GOOD]
    path = write(tmp_path, b"\n".join(lines) + b"\n")
    figures = run_json(seedline, str(path))
    assert [t["line"] for t in figures["transcripts"]] == [1, 10]
    reasons = {bad["line"]: bad["reason"] for bad in figures["malformed"]}
    assert sorted(reasons) == [2, 3, 4, 5, 6, 7, 9]
    assert "not JSON" in reasons[2] and "not a JSON list" in reasons[3]
    assert "no rows" in reasons[4] and "'bogus'" in reasons[5]
    assert "row 1 is not a [kind, content] pair" in reasons[6]
    assert "not UTF-8" in reasons[7]
    table = seedline("eval", "briefs", str(path))
    assert table.exit_code == 0
    assert "line 2 skipped: it is not JSON" in table.stderr


def test_a_corpus_with_nothing_to_measure_fails_saying_so(seedline, tmp_path) -> None:
    path = write(tmp_path, b"nothing here\n")
    result = seedline("eval", "briefs", str(path))
    assert result.exit_code == 1
    assert "holds no transcript to measure" in result.stderr
    empty = seedline("eval", "briefs", str(write(tmp_path, b"")))
    assert empty.exit_code == 1


def test_a_missing_corpus_or_a_bad_budget_is_a_usage_error(seedline, tmp_path) -> None:
    missing = seedline("eval", "briefs", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 2 and "is not a file" in missing.stderr
    for budget in ("60", "a:b", "5:12000", "60:1000000"):
        bad = seedline("eval", "briefs", str(write(tmp_path, GOOD)), "--budget", budget)
        assert bad.exit_code == 2 and "--budget" in bad.stderr, bad.output


def test_a_transcript_without_instructions_is_measured_without_them(seedline, tmp_path) -> None:
    path = write(tmp_path, json.dumps([["terminal", "x" * 5000]] * 5).encode())
    (measured,) = run_json(seedline, str(path))["transcripts"]
    assert measured["task"] is None and measured["last_instruction"] is None
    assert measured["contiguous"] and measured["newest"] and measured["tool_share"] == 1.0


def test_a_progress_bar_is_shown_on_a_terminal(seedline, monkeypatch) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(eval_cmd, "err", Console(file=screen, force_terminal=True, width=100))
    result = seedline("eval", "briefs", str(CORPUS))
    assert result.exit_code == 0
    assert "Composing briefs" in screen.getvalue()


@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.one_of(
    st.binary(max_size=60),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                 lambda inner: st.lists(inner, max_size=3), max_leaves=8).map(
        lambda value: json.dumps(value).encode()),
    st.lists(st.tuples(st.sampled_from(["chat_user", "terminal", "command", "x"]),
                       st.text(max_size=300)), max_size=8).map(
        lambda rows: json.dumps(rows).encode()),
), max_size=6))
def test_no_input_gives_a_traceback(seedline, tmp_path, lines) -> None:
    path = write(tmp_path, b"\n".join(lines))
    result = seedline("eval", "briefs", str(path), "--json")
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    json.loads(result.stdout)
