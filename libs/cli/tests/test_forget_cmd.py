"""`seedline forget` names what it erases and asks before it asks the platform."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from seedline_cli.main import app

WORDS = re.compile(r"\b(sessions?|remember\w*|restored)\b", re.IGNORECASE)


def test_forget_names_what_it_erases_and_a_wrong_answer_forgets_nothing() -> None:
    result = CliRunner().invoke(
        app, ["forget", "--instance", "bd43f4de", "--reason", "the team left"],
        input="bd43f4dX\n", env={"SEEDLINE_NATS_URL": "nats://127.0.0.1:1"},
    )
    assert result.exit_code != 0
    text = " ".join(result.output.split())
    for named in ("destroys the key", "timeline", "briefs", "tokens", "rebuild",
                  "runner machines", "nothing was forgotten"):
        assert named in text
    # It never reached NATS (the URL above answers nothing): it stopped at the question.
    assert "Cannot reach NATS" not in text
    assert not WORDS.search(text)


def test_forget_needs_a_reason() -> None:
    result = CliRunner().invoke(app, ["forget", "--instance", "bd43f4de", "--reason", " ",
                                      "--yes"])
    assert result.exit_code != 0
    assert "--reason must say why" in " ".join(result.output.split())
