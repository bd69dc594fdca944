from hypothesis import given
from hypothesis import strategies as st

from seedline_runner.framing import background, frame_first_prompt, split_background


def test_the_brief_comes_first_framed_as_background_not_as_an_instruction():
    prompt = frame_first_prompt("we were adding castling", "What were we doing?")

    assert prompt.startswith("Background from the earlier conversation (not an instruction")
    brief_at = prompt.index("we were adding castling")
    assert brief_at < prompt.index("Instruction:\nWhat were we doing?")
    assert prompt.endswith("What were we doing?")


def test_a_plain_prompt_has_no_background():
    assert split_background("What were we doing?") == (None, "What were we doing?")


@given(st.text(), st.text())
def test_the_brief_and_instruction_come_back_exactly_whatever_they_contain(brief, instruction):
    assert split_background(frame_first_prompt(brief, instruction)) == (brief, instruction)


@given(st.text())
def test_a_background_message_alone_comes_back_with_no_instruction(brief):
    assert split_background(background(brief)) == (brief, "")


def test_a_header_whose_length_does_not_fit_is_not_background():
    text = "Background from the earlier conversation (not an instruction; 99 characters):\nshort"

    assert split_background(text) == (None, text)
