"""The brief's numbers as `seedline open` and `seedline brief show` print them."""

from seedline_cli.conversations import brief_numbers


def brief(rows: int) -> dict:
    return {"rows": rows, "chars": 12, "omitted_rows": 0, "until_seq": 1}


def test_one_entry_is_an_entry_and_more_are_entries():
    assert brief_numbers(brief(1)) == "1 entry, 12 characters, 0 left out, up to seq 1"
    assert brief_numbers(brief(2)).startswith("2 entries, ")
    assert brief_numbers(brief(0)).startswith("0 entries, ")
