from hypothesis import given
from hypothesis import strategies as st

from seedline_runner.store import (
    Conversation,
    ConversationStore,
    SeedMessage,
    replayable_history,
    seed_if_empty,
)


def user(text: str) -> SeedMessage:
    return SeedMessage(role="user", content=text)


def assistant(text: str, *call_ids: str) -> SeedMessage:
    calls = [
        {"id": c, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        for c in call_ids
    ]
    return SeedMessage(role="assistant", content=text, tool_calls=calls or None)


def tool(call_id: str, text: str = "out") -> SeedMessage:
    return SeedMessage(role="tool", content=text, tool_call_id=call_id)


HISTORY = [
    SeedMessage(role="system", content="you are a coder"),
    user("add castling"),
    assistant("", "call-1"),
    tool("call-1", "board.py"),
    assistant("castling is in"),
]


def run_turn(
    store: ConversationStore, conversation_id: str, history, current: str
) -> list[SeedMessage]:
    """What a model would be sent: the conversation (seeded only when empty) plus the input."""
    conversation = store.get_or_create(conversation_id)
    seed_if_empty(conversation, history)
    sent = [*conversation.messages, user(current)]
    conversation.append_exchange(current, f"answer to {current}")
    return sent


def test_a_cold_conversation_sees_the_seeded_turns_plus_the_current_input():
    store = ConversationStore()

    sent = run_turn(store, "c1", HISTORY, "what next?")

    assert sent == [*HISTORY[1:], user("what next?")]


def test_a_second_turn_on_a_warm_conversation_is_not_seeded_again():
    store = ConversationStore()
    run_turn(store, "c1", HISTORY, "what next?")

    sent = run_turn(store, "c1", HISTORY, "and then?")

    assert sent == [
        *HISTORY[1:],
        user("what next?"),
        SeedMessage(role="assistant", content="answer to what next?"),
        user("and then?"),
    ]
    assert [m.content for m in sent].count("add castling") == 1


def test_the_same_history_twice_is_a_no_op():
    conversation = Conversation("c1")

    assert seed_if_empty(conversation, HISTORY) == 4
    assert seed_if_empty(conversation, HISTORY) == 0
    assert conversation.messages == HISTORY[1:]


def test_system_messages_are_skipped():
    assert replayable_history([SeedMessage(role="system", content="s"), user("hi")]) == [user("hi")]


def test_a_tool_call_at_a_cut_is_dropped_with_the_results_it_has():
    history = [user("go"), assistant("", "a", "b"), tool("a")]

    assert replayable_history(history) == [user("go")]


def test_a_tool_call_is_kept_with_all_its_results():
    history = [user("go"), assistant("", "a", "b"), tool("b"), tool("a"), assistant("done")]

    assert replayable_history(history) == history


def test_a_result_without_its_call_is_dropped():
    history = [tool("a"), user("go"), tool("b"), assistant("done")]

    assert replayable_history(history) == [user("go"), assistant("done")]


def test_a_result_for_another_call_is_dropped_from_a_complete_exchange():
    history = [assistant("", "a"), tool("a"), tool("zzz")]

    assert replayable_history(history) == [assistant("", "a"), tool("a")]


def test_the_store_hands_back_the_same_conversation():
    store = ConversationStore()
    first = store.get_or_create("c1")
    first.append(user("hi"))

    assert store.get_or_create("c1") is first
    store.discard("c1")
    assert store.get_or_create("c1").is_empty


messages = st.one_of(
    st.builds(user, st.text(max_size=5)),
    st.builds(
        lambda t, ids: assistant(t, *ids),
        st.text(max_size=5),
        st.lists(st.sampled_from("abc"), max_size=3, unique=True),
    ),
    st.builds(tool, st.sampled_from("abcd")),
    st.builds(lambda t: SeedMessage(role="system", content=t), st.text(max_size=5)),
)


@given(st.lists(messages, max_size=12))
def test_replayed_history_never_separates_a_call_from_its_results(history):
    replayed = replayable_history(history)

    for index, message in enumerate(replayed):
        assert message.role != "system"
        if message.role == "assistant" and message.tool_calls:
            wanted = {c["id"] for c in message.tool_calls}
            following = []
            for later in replayed[index + 1 :]:
                if later.role != "tool":
                    break
                following.append(later.tool_call_id)
            assert sorted(following) == sorted(wanted)
        if message.role == "tool":
            calls = [m for m in replayed[:index] if m.role == "assistant" and m.tool_calls]
            assert calls and message.tool_call_id in {c["id"] for c in calls[-1].tool_calls}


@given(st.lists(messages, max_size=12))
def test_replaying_is_idempotent(history):
    once = replayable_history(history)

    assert replayable_history(once) == once
