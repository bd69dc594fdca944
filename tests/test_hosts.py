"""The fault harness's short form (tests/hosts; `make test-cluster` runs it in full).

Three nats-server nodes, two copies of every service and of the web, Postgres and two runner
machines, each on a host (network namespace) of its own; the workload runs while one node
is cut off from the other two and healed; then the checker: every acknowledged entry in the
timeline once and in its producer's order, every projection equal to a rebuild, every open
answered, no repo ever live twice (session events and the machines' own presence), every
notice told once. Needs root and `ip`; without them it is skipped and says why.

SEEDLINE_HOSTS_SEED=<seed> runs another seed's faults (the seed picks the kind), and
SEEDLINE_HOSTS_SECONDS another length.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hosts.network import why_not  # noqa: E402
from hosts.run import run_once  # noqa: E402

pytestmark = [pytest.mark.servers, pytest.mark.timeout(900)]

# Seed 9 draws a partition of one node (the kind is the seed modulo the nine kinds).
SHORT_SEED, SHORT_SECONDS = 9, 20.0


def test_a_node_cut_off_from_the_others_loses_nothing_and_every_promise_holds(capsys):
    reason = why_not()
    if reason:
        pytest.skip(reason)
    seed = int(os.environ.get("SEEDLINE_HOSTS_SEED") or SHORT_SEED)
    seconds = float(os.environ.get("SEEDLINE_HOSTS_SECONDS") or SHORT_SECONDS)
    # A short folder: Postgres' socket path must stay under 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="slh-"))
    with capsys.disabled():
        report = run_once(seed, seconds, root, say=lambda line: print("\n" + line))
        print("\n" + report.verdict())
    assert report.acknowledged > 0, "the workload had no entry acknowledged"
    assert report.ok, report.verdict()
