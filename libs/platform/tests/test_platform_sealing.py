"""Content sealed at rest with a key per instance (CONTRACT.md Conventions, Erasure, 1.2)."""

from __future__ import annotations

import nats
import pytest

from seedline_platform.sealing import (
    KEYS_BUCKET,
    PREFIX,
    Forgotten,
    InMemoryKeyStore,
    KvKeyStore,
    Sealer,
    key_name,
    sealed_instance,
)

TEXT = "DATABASE_URL=postgres://admin:hunter2@db ✓"


async def test_sealed_text_names_its_instance_and_opens_only_with_its_key() -> None:
    sealer = Sealer(InMemoryKeyStore())
    sealed = await sealer.seal("bd43f4de", TEXT)
    assert sealed.startswith(PREFIX) and "hunter2" not in sealed
    assert sealed_instance(sealed) == "bd43f4de"
    assert await sealer.open("bd43f4de", sealed) == TEXT
    assert await sealer.open(None, sealed) == TEXT
    # Two seals of one text differ (a fresh nonce each time).
    assert await sealer.seal("bd43f4de", TEXT) != sealed
    with pytest.raises(ValueError):
        await sealer.open("other", sealed)


async def test_a_sealed_text_moved_to_another_instance_does_not_open() -> None:
    sealer = Sealer(InMemoryKeyStore())
    await sealer.seal("other", "x")
    sealed = await sealer.seal("bd43f4de", TEXT)
    moved = sealed.replace(key_name("bd43f4de"), key_name("other"), 1)
    with pytest.raises(ValueError):
        await sealer.open(None, moved)


async def test_plain_text_passes_and_a_disabled_sealer_seals_nothing() -> None:
    sealer = Sealer(InMemoryKeyStore(), enabled=False)
    assert await sealer.seal("bd43f4de", TEXT) == TEXT
    assert await sealer.open("bd43f4de", TEXT) == TEXT


async def test_a_rotation_seals_with_the_new_version_and_the_old_still_opens() -> None:
    keys = InMemoryKeyStore()
    writer, reader = Sealer(keys), Sealer(keys)
    before = await writer.seal("bd43f4de", "before")
    assert await reader.open(None, before) == "before"  # the reader caches version 1
    assert await keys.rotate("bd43f4de") == 2
    writer.forget("bd43f4de")
    after = await writer.seal("bd43f4de", "after")
    assert after.split(":")[3] == "2"
    assert await reader.open(None, after) == "after"  # a version it had not seen: read again
    assert await reader.open(None, before) == "before"


async def test_a_destroyed_key_leaves_nothing_to_open() -> None:
    keys = InMemoryKeyStore()
    sealer = Sealer(keys)
    sealed = await sealer.seal("bd43f4de", TEXT)
    await keys.destroy("bd43f4de")
    sealer.forget("bd43f4de")
    with pytest.raises(Forgotten):
        await sealer.open(None, sealed)
    assert await sealer.open_or_none(None, sealed) is None


@pytest.mark.servers
async def test_the_key_bucket_makes_one_ring_and_a_forget_leaves_no_revision(settings) -> None:
    nc = await nats.connect(settings.nats_url)
    try:
        js = nc.jetstream()
        first, second = KvKeyStore(js), KvKeyStore(js)
        ring = await first.ring("apps/inst.1", create=True)
        assert await second.ring("apps/inst.1", create=True) == ring
        assert await second.rotate("apps/inst.1") == 2
        rotated = await first.ring("apps/inst.1", create=False)
        assert rotated is not None and rotated.keys[1] == ring.keys[1] and 2 in rotated.keys
        await first.destroy("apps/inst.1")
        assert await second.ring("apps/inst.1", create=False) is None
        # The bucket's stream keeps no revision holding the key.
        info = await js.stream_info(f"KV_{KEYS_BUCKET}")
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                msg = await js.get_msg(f"KV_{KEYS_BUCKET}", seq)
            except Exception:
                continue
            assert not msg.data, "a revision of the destroyed key is still stored"
    finally:
        await nc.close()
