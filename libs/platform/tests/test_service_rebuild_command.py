"""`<service> rebuild`: the JSON lines `seedline rebuild` reads, and the usage errors."""

from __future__ import annotations

import json
import sys

import pytest

from seedline_platform.service import main_for


def no_app(settings):
    raise AssertionError("a rebuild must not start the service")


def run(monkeypatch, capsys, args, rebuild=None) -> tuple[int, list[dict], str]:
    monkeypatch.setattr(sys, "argv", ["svc", *args])
    with pytest.raises(SystemExit) as ended:
        main_for("svc", no_app, rebuild)
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    return ended.value.code, lines, captured.err


def test_progress_lines_then_the_result(monkeypatch, capsys):
    async def rebuild(settings, progress):
        progress(done=1, total=2)
        progress(done=2, total=2)
        return {"before_digest": "a", "after_digest": "a"}

    code, lines, _ = run(monkeypatch, capsys, ["rebuild"], rebuild)

    assert code == 0
    assert lines == [{"progress": {"done": 1, "total": 2}}, {"progress": {"done": 2, "total": 2}},
                     {"result": {"before_digest": "a", "after_digest": "a"}}]


def test_a_failed_rebuild_says_why_and_exits_1(monkeypatch, capsys):
    async def rebuild(settings, progress):
        raise RuntimeError("the timeline stream answered up to seq 3 of 9")

    code, lines, _ = run(monkeypatch, capsys, ["rebuild"], rebuild)

    assert code == 1
    assert lines == [{"error": "RuntimeError: the timeline stream answered up to seq 3 of 9"}]


@pytest.mark.parametrize("args, has_rebuild", [(["rebuild"], False), (["rebulid"], True),
                                               (["rebuild", "--now"], True)])
def test_unexpected_arguments_are_a_usage_error(monkeypatch, capsys, args, has_rebuild):
    async def rebuild(settings, progress):
        raise AssertionError("not reached")

    code, lines, err = run(monkeypatch, capsys, args, rebuild if has_rebuild else None)

    assert code == 2 and lines == []
    assert "unexpected arguments" in err
    assert ("svc rebuild" in err) is has_rebuild
