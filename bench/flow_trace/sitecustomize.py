"""Loaded by every process `python -m bench.flow_files` starts (it is on their PYTHONPATH):
records the Seedline source files whose functions run between SIGUSR1 and SIGUSR2, and
writes them to SEEDLINE_FLOW_TRACE/<pid>.json at SIGUSR2. Nothing else loads it."""

import json
import os
import re
import signal
import sys
import threading

_OUT = os.environ.get("SEEDLINE_FLOW_TRACE")
_OURS = re.compile(r"/(?:libs|services)/[^/]+/src/seedline_")

if _OUT:
    _seen: set[str] = set()
    _on = [False]

    def _profile(frame, event, _arg):
        if _on[0] and event == "call":
            name = frame.f_code.co_filename
            if _OURS.search(name):
                _seen.add(name)

    def _start(*_):
        _seen.clear()
        _on[0] = True

    def _stop(*_):
        _on[0] = False
        with open(os.path.join(_OUT, f"{os.getpid()}.json"), "w") as out:
            json.dump({"argv": sys.argv, "files": sorted(_seen)}, out)

    sys.setprofile(_profile)
    threading.setprofile(_profile)
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
