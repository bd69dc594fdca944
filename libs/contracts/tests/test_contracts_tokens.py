from hypothesis import given
from hypothesis import strategies as st
import pytest

from seedline_contracts import subjects
from seedline_contracts.tokens import TokenError, escape_token, is_valid_token, unescape_token


def test_escapes_every_byte_outside_the_safe_set():
    assert escape_token("apps/chess.academy") == "apps~2Fchess~2Eacademy"
    assert escape_token("a b*>") == "a~20b~2A~3E"
    assert escape_token("é") == "~C3~A9"
    assert escape_token("Plain_name-1") == "Plain_name-1"


@pytest.mark.parametrize("bad", ["", "x" * 256, "/" * 86, "\ud800"])
def test_refuses_empty_too_long_and_unencodable(bad):
    with pytest.raises(TokenError):
        escape_token(bad)
    assert not is_valid_token(bad)


def test_the_longest_token_is_255_escaped_bytes():
    assert len(escape_token("x" * 255)) == 255
    assert len(escape_token("/" * 85)) == 255


@given(st.text(min_size=1, max_size=80))
def test_unescape_inverts_escape_and_no_subject_wildcards_survive(value):
    try:
        token = escape_token(value)
    except TokenError:
        return
    assert unescape_token(token) == value
    assert not set(token) & set(". *>\t\r\n")


@pytest.mark.parametrize("bad", ["a~2", "a~zz", "a.b", "~FF"])
def test_unescape_refuses_what_escape_never_writes(bad):
    with pytest.raises(TokenError):
        unescape_token(bad)


def test_subjects_use_escaped_tokens():
    assert subjects.timeline_subject("i", "apps/x", "s.1", "chat_user") == (
        "seedline.timeline.i.apps~2Fx.s~2E1.chat_user")
    assert subjects.runner_subject("mac mini", "launch") == "seedline.runner.mac~20mini.launch"
    assert subjects.presence_key("mac mini") == "mac=20mini"
    assert subjects.node_from_presence_key("mac=20mini") == "mac mini"
