"""NATS over TLS: the sample deploy/nats-tls.conf, and a service connecting through it.

The certificates are made at test time (seedline_devtools.certificates); the client
trusts exactly the test CA, nothing from the machine.
"""

from __future__ import annotations

import os
import ssl
import subprocess
from pathlib import Path

import nats
import pytest

from seedline_contracts import subjects
from seedline_devtools import nats_auth
from seedline_devtools.certificates import make_certificates
from seedline_devtools.embedded import nats_server_binary, start_nats
from seedline_devtools.testing import request, running
from seedline_platform.settings import Settings
from seedline_timeline_writer.app import create_app as create_writer

pytestmark = pytest.mark.servers

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_the_tls_config_is_generated_and_nats_server_accepts_it(tmp_path):
    path = REPO_ROOT / "deploy" / "nats-tls.conf"
    assert path.read_text() == nats_auth.tls_deploy_config()
    certs = make_certificates(tmp_path / "certs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_NATS_")}
    env |= {"SEEDLINE_NATS_TLS_CERT": str(certs.cert_file), "SEEDLINE_NATS_TLS_KEY": str(certs.key_file),
            "SEEDLINE_NATS_ADMIN_PASSWORD": "a"}
    env |= {nats_auth.password_variable(n).name: n for n in nats_auth.EXAMPLE_NODES}
    env |= {nats_auth.service_password_variable(s).name: s for s in nats_auth.services()}
    checked = subprocess.run([nats_server_binary(), "-t", "-c", str(path)], env=env,
                             capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.fixture
def tls_nats(tmp_path):
    certs = make_certificates(tmp_path / "certs")
    block = (f'tls {{\n  cert_file: "{certs.cert_file}"\n  key_file: "{certs.key_file}"\n'
             "  timeout: 2\n}")
    process = start_nats(tmp_path / "nats", extra=block)
    try:
        yield process, certs
    finally:
        process.stop()


async def test_a_service_works_over_tls_trusting_only_its_ca(tls_nats, database_url, tmp_path):
    process, certs = tls_nats
    url = f"tls://127.0.0.1:{process.port}"
    settings = Settings.from_env({
        "SEEDLINE_NATS_URL": url, "SEEDLINE_NATS_MONITOR_URL": process.monitor_url,
        "SEEDLINE_NATS_CA_FILE": str(certs.ca_file), "SEEDLINE_DATABASE_URL": database_url,
        "SEEDLINE_HOME": str(tmp_path / "home"), "SEEDLINE_STRICT_DURABILITY": "1",
        "SEEDLINE_HTTP_PORT": "0",
    })
    trusted = ssl.create_default_context(cafile=str(certs.ca_file))
    async with running(create_writer(settings)):
        nc = await nats.connect(url, tls=trusted)
        body = {"entry_id": "e-1", "instance_id": "i", "repo": "r", "session_id": "s",
                "kind": "chat_user", "content": "over TLS"}
        assert (await request(nc, subjects.API_TIMELINE_APPEND, body))["seq"] == 1
        read = await request(nc, subjects.API_TIMELINE_READ, {"instance_id": "i", "repo": "r"})
        assert [e["content"] for e in read["entries"]] == ["over TLS"]
        assert nc.connected_url.scheme == "tls"
        await nc.close()
    # A client that trusts only the machine's CAs, or speaks no TLS, is refused.
    for options in ({"tls": ssl.create_default_context()}, {}):
        scheme = "tls" if options else "nats"
        with pytest.raises(Exception):
            await nats.connect(f"{scheme}://127.0.0.1:{process.port}", allow_reconnect=False,
                               connect_timeout=2, max_reconnect_attempts=0, **options)


def test_a_ca_file_that_cannot_be_read_is_named_in_the_error(tmp_path):
    from seedline_platform.settings import SettingsError

    settings = Settings.from_env({"SEEDLINE_NATS_CA_FILE": str(tmp_path / "missing.pem")})
    with pytest.raises(SettingsError, match="SEEDLINE_NATS_CA_FILE"):
        settings.nats_tls()
