"""The durability check against real servers: what it names, and strict mode."""

from pathlib import Path

import nats
import pytest

from seedline_platform import natsio
from seedline_devtools.embedded import start_nats
from seedline_platform.settings import Settings, SettingsError

pytestmark = pytest.mark.servers


async def test_a_server_configured_as_required_passes(nats_server):
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await natsio.ensure_streams(js)
    await natsio.ensure_streams(js)  # idempotent
    report = await natsio.check_durability(nc, js, nats_server.monitor_url)
    assert report.ok, report.problems
    await nc.close()


async def test_without_sync_always_the_check_names_it_and_strict_mode_refuses(tmp_path: Path):
    server = start_nats(tmp_path / "weak", sync_always=False)
    try:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await natsio.ensure_streams(js)
        report = await natsio.check_durability(nc, js, server.monitor_url)
        assert any("sync_interval: always" in p for p in report.problems)
        await natsio.enforce_durability(nc, js, server.monitor_url, strict=False)
        with pytest.raises(natsio.DurabilityError, match="SEEDLINE_STRICT_DURABILITY=1"):
            await natsio.enforce_durability(nc, js, server.monitor_url, strict=True)
        await nc.close()
    finally:
        server.stop()


async def test_a_clusters_monitoring_list_checks_every_server_that_answers(
    nats_server, tmp_path: Path
):
    """One server of a cluster down does not keep a service from starting; a server that
    answers without fsync on every write is named."""
    from seedline_devtools.embedded import free_port

    down = f"http://127.0.0.1:{free_port()}"
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await natsio.ensure_streams(js)
    report = await natsio.check_durability(nc, js, f"{down},{nats_server.monitor_url}")
    assert report.ok, report.problems
    weak = start_nats(tmp_path / "weak", sync_always=False)
    try:
        report = await natsio.check_durability(
            nc, js, f"{nats_server.monitor_url}, {weak.monitor_url}")
        assert [p for p in report.problems if "sync_interval" in p] == [
            f"nats-server at {weak.monitor_url} is not configured with jetstream "
            "{ sync_interval: always }; acknowledged writes can be lost on a crash"]
        report = await natsio.check_durability(nc, js, down)
        assert any(p.startswith(f"cannot read {down}/varz") for p in report.problems)
    finally:
        weak.stop()
        await nc.close()


def test_settings_errors_name_the_variable():
    with pytest.raises(SettingsError, match="SEEDLINE_MAX_DELIVER"):
        Settings.from_env({"SEEDLINE_MAX_DELIVER": "lots"})
    with pytest.raises(SettingsError, match="SEEDLINE_STRICT_DURABILITY"):
        Settings.from_env({"SEEDLINE_STRICT_DURABILITY": "yes"})
    assert Settings.from_env({}).idle_stop.total_seconds() == 6 * 3600

