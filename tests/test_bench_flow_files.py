"""bench.flow_files counts the files a flow runs through with a tracer each process loads:
what it records is what ran between the two signals, and only Seedline's own files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.flow_files import TRACER, _files  # noqa: E402

PROGRAM = """
import os, signal
from seedline_contracts.tokens import name_problem
from seedline_contracts.times import now_text
import json
name_problem("before")            # before the window: not recorded
os.kill(os.getpid(), signal.SIGUSR1)
now_text()                        # in the window
json.dumps({"a": 1})              # in the window, not Seedline's
os.kill(os.getpid(), signal.SIGUSR2)
name_problem("after")             # after it: not recorded
"""


def test_the_tracer_records_seedline_files_run_between_the_signals_and_nothing_else(tmp_path):
    env = dict(os.environ, SEEDLINE_FLOW_TRACE=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(TRACER), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    [written] = list(tmp_path.glob("*.json"))
    files = _files({"probe": set(json.loads(written.read_text())["files"])})
    assert files == {"libs/contracts/src/seedline_contracts/times.py"}


def test_without_the_setting_the_tracer_does_nothing(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(TRACER))
    env.pop("SEEDLINE_FLOW_TRACE", None)
    done = subprocess.run([sys.executable, "-c", "import sys; print(sys.getprofile())"],
                          env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "None"
    assert Path(TRACER, "sitecustomize.py").exists()
