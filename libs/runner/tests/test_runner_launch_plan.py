import pytest
from seedline_contracts.runner import LaunchRequest, LaunchResume, ResumeExpect, Seed

from seedline_runner.engines.base import StartResult
from seedline_runner.launch_plan import launch_refusal, plan_seed, store_proof
from seedline_runner.store import Conversation, SeedMessage

COLD = StartResult(resumed=False, engine_session_id="e1")
WARM = StartResult(resumed=True, engine_session_id="e1")
PROVEN_BY_RECORD = StartResult(resumed=True, engine_session_id="e1", acceptance_pending=True)


def test_a_cold_stateful_engine_reads_the_brief_before_its_first_instruction():
    plan = plan_seed("brief", COLD, stateless=False)

    assert (plan.resumed, plan.seeded, plan.brief_for_first_prompt, plan.held_brief) == (
        False, True, "brief", None,
    )


def test_a_resumed_engine_does_not_read_the_brief():
    plan = plan_seed("brief", WARM, stateless=False)

    assert (plan.resumed, plan.seeded, plan.brief_for_first_prompt, plan.brief_for_history) == (
        True, False, None, None,
    )
    assert plan.held_brief is None


def test_a_resume_the_engine_has_yet_to_accept_holds_the_brief_unread():
    plan = plan_seed("brief", PROVEN_BY_RECORD, stateless=False)

    assert (plan.resumed, plan.seeded, plan.held_brief) == (True, False, "brief")


def test_a_stateless_engine_gets_the_brief_as_history_unless_its_store_proved_a_resume():
    cold = plan_seed("brief", COLD, stateless=True)
    warm = plan_seed("brief", WARM, stateless=True)

    assert (cold.resumed, cold.seeded, cold.brief_for_history) == (False, True, "brief")
    assert (warm.resumed, warm.seeded, warm.brief_for_history) == (True, False, None)


def said(*texts: str) -> Conversation:
    conversation = Conversation("csess_1")
    for index, text in enumerate(texts):
        role = "user" if index % 2 == 0 else "assistant"
        conversation.append(SeedMessage(role=role, content=text))
    return conversation


def resume(excerpt: str | None, kind: str = "chat_assistant") -> LaunchResume:
    expect = None if excerpt is None else ResumeExpect(seq=9, kind=kind, excerpt=excerpt)
    return LaunchResume(engine_session_id="csess_1", expect=expect)


def test_a_store_proves_a_resume_only_when_it_holds_the_expected_turn():
    store = said("add castling", "castling is in")

    assert store_proof(store, resume("castling is in")).holds
    assert store_proof(store, resume("add castling", "chat_user")).holds
    assert not store_proof(store, resume("en passant is in")).holds
    assert not store_proof(store, None).holds


@pytest.mark.parametrize("excerpt", [None, "castling is in"])
def test_an_empty_store_or_one_without_the_conversation_is_never_a_resume(excerpt):
    assert not store_proof(said(), resume(excerpt)).holds
    assert not store_proof(None, resume(excerpt)).holds


@pytest.mark.parametrize("seed_text", [None, ""])
def test_no_seed_means_not_seeded(seed_text):
    assert plan_seed(seed_text, COLD, stateless=False).seeded is False
    assert plan_seed(seed_text, COLD, stateless=True).seeded is False


def launch(**overrides) -> LaunchRequest:
    fields = dict(
        session_id="csess_1",
        instance_id="bd43f4de",
        repo="apps/chess-academy",
        engine="scripted",
        resume=LaunchResume(engine_session_id="x"),
        seed=Seed(text="t", sha256="s"),
        instruction=None,
    )
    return LaunchRequest(**{**fields, **overrides})


LABEL = "Your Mac mini"


def test_a_known_engine_with_usable_ids_is_taken():
    assert launch_refusal(launch(), {"scripted"}, label=LABEL) is None


def test_an_unknown_engine_is_refused_naming_what_the_machine_offers():
    reason = launch_refusal(launch(engine="codex"), {"scripted", "claude"}, label=LABEL)

    assert reason == "Your Mac mini has no engine called 'codex'; it offers: claude, scripted."


def test_a_machine_that_serves_some_instances_refuses_the_others_naming_itself():
    served = ["team-a", "team-b"]

    taken = launch_refusal(launch(instance_id="team-b"), {"scripted"}, label=LABEL,
                           instances=served)
    refused = launch_refusal(launch(), {"scripted"}, label=LABEL, instances=served)

    assert taken is None
    assert refused == (
        "Your Mac mini serves only instances team-a, team-b, not bd43f4de; "
        "open the conversation on a machine of that instance."
    )


def test_a_machine_that_lists_no_instances_serves_every_instance():
    assert launch_refusal(launch(instance_id="any"), {"scripted"}, label=LABEL) is None


@pytest.mark.parametrize("field_name", ["session_id", "instance_id", "repo"])
def test_an_empty_id_is_refused_naming_the_field(field_name):
    reason = launch_refusal(launch(**{field_name: ""}), {"scripted"}, label=LABEL)

    assert reason is not None and field_name in reason
    assert "session " not in reason.replace("session_id", "")
