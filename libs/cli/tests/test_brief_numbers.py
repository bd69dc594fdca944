"""The brief's numbers as `seedline open` and `seedline brief show` print them."""

from seedline_cli.conversations import brief_numbers


def brief(rows: int) -> dict:
    return {"rows": rows, "chars": 12, "omitted_rows": 0, "until_seq": 1}


def test_one_entry_is_an_entry_and_more_are_entries():
    assert brief_numbers(brief(1)) == "1 entry, 12 characters, 0 left out, up to seq 1"
    assert brief_numbers(brief(2)).startswith("2 entries, ")
    assert brief_numbers(brief(0)).startswith("0 entries, ")


def test_the_open_reply_s_receipt_says_whether_the_brief_was_given_and_why_not(capsys):
    from seedline_cli.conversations import print_open_reply
    from seedline_core.notices import BRIEF_GIVEN, BRIEF_NOT_GIVEN, BRIEF_NOT_YET_GIVEN

    def shown(reply: dict) -> str:
        print_open_reply({"session_id": "csess_a", "node_id": "mac", "continuity": {},
                          "notice": {}, **reply})
        return " ".join(capsys.readouterr().out.split())

    resumed = shown({"outcome": "resumed", "resumed": True, "seeded": False,
                     "brief": {**brief(3), "spent": False}})
    assert BRIEF_NOT_GIVEN in resumed
    briefed = shown({"outcome": "briefed", "resumed": False, "seeded": True,
                     "brief": {**brief(3), "spent": True}})
    assert BRIEF_GIVEN in briefed and BRIEF_NOT_GIVEN not in briefed
    # Opened with no message: the brief waits for the first one.
    waiting = shown({"outcome": "briefed", "resumed": False, "seeded": True,
                     "brief": {**brief(3), "spent": False}})
    assert BRIEF_NOT_YET_GIVEN in waiting and BRIEF_GIVEN + ")" not in waiting
    older = shown({"outcome": "resumed", "resumed": True, "seeded": False,
                   "brief": brief(3)})  # before 1.2
    assert BRIEF_NOT_GIVEN in older
