"""The repo as it stood before a person's message: what a wake is decided on (CONTRACT.md 4).

A fresh message on a repo with no live conversation opens one "as in 3", with a brief
up to the entry before the message. The decision reads the repo at the same point. The
resolver's projection may already hold the message (and whatever followed it): counted,
the message made its own conversation "the previous conversation", touched 0 seconds
ago however long the repo had been quiet, and whether it did depended on how far the
projection had got when the wake was decided.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from seedline_contracts.timeline import TimelineRow
from seedline_core.decision import TURN_KINDS, PreviousConversation, Turn, newest_turn
from seedline_timeline_view import AppliedEntry, ConversationBefore, TimelineView

from .repository import Row, recency


def _capped(last_at: datetime, row: Row) -> datetime:
    """The view's latest `at` below the message, capped by the row's activity time (every
    entry counted at the earlier of its `at` and its acceptance, CONTRACT.md 3.1): the view
    keeps no acceptance time, and the row's covers later entries too, so this is an upper
    bound that a clock running ahead can no longer push into the future."""
    return min(last_at, row.last_entry_at) if row.last_entry_at else last_at


# How far back a wake looks for the conversation's last turn before the message.
TURN_LOOKBACK = 500


def _turn(entry: TimelineRow | None) -> Turn | None:
    return newest_turn(None, entry.seq, entry.kind, entry.content) if entry else None


async def previous_before(
    conversations: list[Row], view: TimelineView, instance_id: str, repo: str,
    before_seq: int, deciding: str, message: AppliedEntry | None = None,
) -> PreviousConversation | None:
    """The previous conversation over entries with seq < before_seq (and the platform's
    confirmed opens), leaving out the conversation being decided, from every conversation
    of the repo as the projection holds them now. `message`, the entry at before_seq as the
    wait for it read it, holds its own conversation before it: that one is not read
    again."""
    read_with_message: dict[str, ConversationBefore | None] = {}
    entry = message.entry if message is not None else None
    if entry is not None and (entry.instance_id, entry.repo) == (instance_id, repo):
        read_with_message[entry.session_id] = message.own_before
    rows = []
    for row in conversations:
        if row.session_id == deciding or not row.may_be_earlier:
            continue
        # The message itself (or a later turn) was never given to that engine: its turn
        # before the message is read with the rest.
        turn_after = row.newest_turn is not None and row.newest_turn.seq >= before_seq
        touched_after = row.activity_seq >= before_seq  # at or after the message
        if touched_after or turn_after:
            if row.session_id in read_with_message:  # read with TURN_KINDS
                before = read_with_message[row.session_id]
            else:
                before = await view.conversation_before(
                    instance_id, repo, row.session_id, before_seq,
                    TURN_KINDS if turn_after else (), TURN_LOOKBACK)
            if turn_after:
                row = replace(row, newest_turn=_turn(before.newest_turn if before else None))
            if touched_after:
                if before is None and row.platform is None:
                    continue  # it began with the message
                row = replace(row, activity_seq=before.last_seq if before else 0,
                              last_entry_at=_capped(before.last_at, row) if before else None,
                              entry_engine=before.engine if before else None)
        rows.append(row)
    return max(rows, key=recency).previous() if rows else None
