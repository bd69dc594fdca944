"""New work over HTTP, the console and MCP (all through the Tenant) is refused with the
full-disk sentence and HTTP 507 while the disk of SEEDLINE_HOME is full, and a backend that
goes silent then is named as the full disk; reads go on. Over a fake backend, no servers."""

from __future__ import annotations

import pytest

from seedline_contracts.timeline import TimelineEntryIn
from seedline_core.notices import wording_violations
from seedline_web.errors import WebError
from seedline_web.tenant import Tenant


class Backend:
    """Answers what the tenant asks here; `silent` answers as a backend whose disk is full."""

    def __init__(self, silent: bool = False) -> None:
        self.silent = silent
        self.published: list = []

    async def append(self, entry):
        if self.silent:
            raise WebError("timeout", "The request took too long to answer; try again.")
        self.published.append(entry)
        return "stored"

    async def notices(self, instance_id, after_seq, since, limit):
        return [], False


ENTRY = TimelineEntryIn(entry_id="e-1", instance_id="demo", repo="apps/x", session_id="c-1",
                        kind="chat_user", content="hello", at="2026-12-01T10:00:00Z")


@pytest.fixture
def disk(tmp_path, monkeypatch):
    """This test's SEEDLINE_HOME, its disk made full by asking for more than any disk has."""
    monkeypatch.setenv("SEEDLINE_HOME", str(tmp_path))
    monkeypatch.setenv("SEEDLINE_MIN_FREE_MB", "0")

    def fill() -> None:
        monkeypatch.setenv("SEEDLINE_MIN_FREE_MB", str(10**12))

    return fill


async def test_new_work_is_refused_with_507_naming_the_disk_and_reads_go_on(disk, tmp_path):
    backend = Backend()
    tenant = Tenant(backend, "demo")
    assert await tenant.append(ENTRY) == "stored"
    disk()
    with pytest.raises(WebError) as refused:
        await tenant.append(ENTRY)
    assert refused.value.code == "disk_full" and refused.value.status == 507
    assert refused.value.message.startswith(f"The disk that holds {tmp_path.resolve()} is full")
    assert not wording_violations(refused.value.message)
    assert backend.published == [ENTRY]  # nothing new reached the backend
    assert await tenant.notices() == ([], False)


async def test_a_backend_silent_because_the_disk_filled_is_named_as_the_full_disk(disk):
    backend = Backend(silent=True)
    tenant = Tenant(backend, "demo")
    with pytest.raises(WebError) as before:
        await tenant.append(ENTRY)
    assert before.value.code == "timeout"  # room on the disk: the backend's own words
    original = backend.append

    async def fills_then_fails(entry):
        disk()  # the disk fills while the request waits
        return await original(entry)

    backend.append = fills_then_fails
    with pytest.raises(WebError) as during:
        await tenant.append(ENTRY)
    assert during.value.code == "disk_full" and during.value.status == 507
