"""One open is one trace across the services and the runner, and /metrics has its series.

The trace test runs every service and a runner as processes, each exporting its spans
over OTLP/HTTP to a collector the test runs itself, and prints the trace.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nats
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider

from seedline_contracts import subjects
from seedline_devtools.processes import stop_processes
from seedline_platform.observability import trace_headers

pytestmark = pytest.mark.servers

BIN = Path(sys.executable).parent
SERVICES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway")


class Collector:
    """An OTLP/HTTP trace receiver: service name -> [(trace id, span name)]."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[str, str]]] = defaultdict(list)
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                export = ExportTraceServiceRequest.FromString(body)
                for resource_spans in export.resource_spans:
                    attributes = {a.key: a.value.string_value
                                  for a in resource_spans.resource.attributes}
                    service = attributes.get("service.name", "?")
                    for scope in resource_spans.scope_spans:
                        for span in scope.spans:
                            collector.spans[service].append((span.trace_id.hex(), span.name))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def trace(self, trace_id: str) -> dict[str, list[str]]:
        return {service: [name for t, name in spans if t == trace_id]
                for service, spans in self.spans.items()
                if any(t == trace_id for t, _ in spans)}


async def test_one_open_is_one_trace_across_five_processes(settings, tmp_path):
    collector = Collector()
    env = dict(os.environ, SEEDLINE_NATS_URL=settings.nats_url,
               SEEDLINE_NATS_MONITOR_URL=settings.nats_monitor_url,
               SEEDLINE_DATABASE_URL=settings.database_url, SEEDLINE_HTTP_PORT="0",
               SEEDLINE_OTLP_ENDPOINT=collector.endpoint, OTEL_BSP_SCHEDULE_DELAY="100")
    procs = []
    try:
        for name in SERVICES:
            procs.append(subprocess.Popen([str(BIN / name)], env=env, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [str(BIN / "seedline"), "runner", "--node-id", "mac-mini-1", "--label", "Mac mini"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        nc = await nats.connect(settings.nats_url)
        await _wait_until_answering(nc)
        tracer = TracerProvider().get_tracer("test")
        with tracer.start_as_current_span("a person opens a conversation") as root:
            trace_id = format(root.get_span_context().trace_id, "032x")
            body = {"instance_id": "bd43f4de", "repo": "apps/chess-academy", "engine": "scripted",
                    "node_id": "mac-mini-1", "instruction": "What were we doing?"}
            msg = await nc.request(subjects.API_SESSIONS_OPEN, json.dumps(body).encode(),
                                   timeout=30, headers=trace_headers())
        assert json.loads(msg.data)["ok"], msg.data
        expected = {*SERVICES, "seedline-runner"}
        for _ in range(200):
            if expected <= set(collector.trace(trace_id)):
                break
            await asyncio.sleep(0.1)
        found = collector.trace(trace_id)
        print(f"\ntrace {trace_id}:")
        for service, names in sorted(found.items()):
            print(f"  {service}: {', '.join(sorted(set(names)))}")
        assert expected <= set(found), found
        await nc.close()
    finally:
        stop_processes(procs, 10)
        collector.server.shutdown()


async def _wait_until_answering(nc) -> None:
    """Every service answers service discovery and the runner is present."""
    for _ in range(300):
        try:
            names = set()
            sub = await nc.subscribe(nc.new_inbox())
            await nc.publish("$SRV.PING", b"", reply=sub.subject)
            await asyncio.sleep(0.2)
            while True:
                try:
                    names.add(json.loads((await sub.next_msg(timeout=0.05)).data)["name"])
                except Exception:
                    break
            await sub.unsubscribe()
            kv = await nc.jetstream().key_value(subjects.RUNNERS_BUCKET)
            if set(SERVICES) <= names and await kv.get(subjects.presence_key("mac-mini-1")):
                return
        except Exception:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("the services and the runner did not come up")


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        return response.read().decode()


async def test_metrics_and_health_of_each_service_after_an_open(system):
    await system.start_runner()
    await system.append(1)
    bad = await system.nc.jetstream().publish(subjects.INGEST_TIMELINE, b"not json")
    assert bad.seq
    opened = await system.open(instruction="Add castling")
    assert opened["ok"], opened
    await asyncio.sleep(LAG_SETTLE)
    apps = {app.name: app for app in system.apps}
    text = {name: await asyncio.to_thread(_scrape, app.health.url) for name, app in apps.items()}
    assert 'seedline_continuity_decided_total{reason_code="past_window"} 1.0' in text[
        "continuity-resolver"]
    assert 'seedline_opens_total{outcome="briefed",reason_code="past_window"} 1.0' in text[
        "runner-gateway"]
    assert 'seedline_ingest_rejected_total{reason_code="not_json"} 1.0' in text["timeline-writer"]
    assert "seedline_brief_rows_count 1.0" in text["seed-composer"]
    assert "seedline_brief_chars_bucket" in text["seed-composer"]
    for name, page in text.items():
        assert "seedline_consumer_pending_messages{" in page, name  # lag per durable
        assert "faststream_received_processed_messages_duration_seconds_bucket" in page, name
        # Labelled by the routing table, not by subjects that name a conversation or an inbox.
        assert opened["session_id"] not in page and "_INBOX" not in page, name
    assert 'durable="timeline-writer"' in text["timeline-writer"]
    for name, app in apps.items():
        for path in ("/healthz", "/readyz"):
            answer = await asyncio.to_thread(_get_json, app.health.url + path)
            assert answer["ok"] is True and all(answer["checks"].values()), (name, path)


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


LAG_SETTLE = 0.5
