import msgspec

from seedline_contracts.codec import decode, encode
from seedline_contracts.events import EVENT_TYPES, SessionEvent
from seedline_contracts.schema import PUBLIC_MESSAGES, json_schemas
from seedline_contracts.sessions import OpenRequest
from seedline_contracts.timeline import TimelineEntryIn


def test_every_public_message_has_a_schema_with_its_required_fields():
    schemas = json_schemas()
    assert set(schemas) == set(PUBLIC_MESSAGES)
    assert set(schemas["TimelineEntryIn"]["required"]) == {
        "entry_id", "instance_id", "repo", "session_id", "kind", "content"}
    assert schemas["Opened"]["properties"]["type"] == {"enum": ["opened"]}


def test_unknown_fields_are_dropped_so_producers_can_be_newer():
    entry = decode(b'{"entry_id":"e","instance_id":"i","repo":"r","session_id":"s",'
                   b'"kind":"system","content":"c","brand_new_field":1}', TimelineEntryIn)
    assert entry.entry_id == "e" and not hasattr(entry, "brand_new_field")


def test_session_events_round_trip_through_their_tag():
    decoder = msgspec.json.Decoder(SessionEvent)
    for kind in EVENT_TYPES:
        tag = kind.__struct_config__.tag
        assert tag in encode({"type": tag}).decode()
    req = decode(b'{"instance_id":"i","repo":"r","engine":"claude","node_id":"n"}', OpenRequest)
    assert req.force_fresh is False and req.request_id is None and decoder is not None
