"""The durable-work bench names what each of nats-server's fsyncs synced, from strace's
trace of the calls (`-y` writes each descriptor's path)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.durable_work import Fsyncs  # noqa: E402

STORE = "/tmp/dw/nats/jetstream/jetstream/$G/streams"
TRACE = f"""\
7160  fsync(22<{STORE}/SEEDLINE_SESSIONS/msgs/1.blk>) = 0
7161  fsync(23<{STORE}/SEEDLINE_TIMELINE/batches/iCzwBLCd> <unfinished ...>
7160  fdatasync(24<{STORE}/SEEDLINE_INGEST/obs/timeline-writer/o.dat>) = 0
7161  <... fsync resumed>) = 0
7162  fsync(25<{STORE}/SEEDLINE_TIMELINE/batches/iCzwBLCd/msgs/1.blk>) = 0
7163  fsync(26<{STORE}/KV_seedline_runners/msgs/1.blk>) = 0
7163  fsync(27<{STORE}/SEEDLINE_TIMELINE/msgs/1.blk>) = 0
7164  fsync(28</tmp/dw/nats/jetstream/jetstream/$G/meta.inf>) = 0
+++ exited with 0 +++
"""


def test_each_sync_is_counted_once_by_the_file_it_syncs(tmp_path: Path):
    out = tmp_path / "strace.txt"
    out.write_text(TRACE)
    by_file = Fsyncs(pid=0, out=out).by_file()
    assert by_file == {"appends": 2, "atomic batch staging": 2, "consumer state": 1,
                       "presence": 1, "other": 1}
    assert sum(by_file.values()) == 7
