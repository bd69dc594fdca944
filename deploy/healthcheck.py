"""Container health check: is this service connected to NATS and answering?

Usage: python healthcheck.py SERVICE

A service subscribes to its seedline.* subjects only once it is ready to answer
them (CONTRACT.md section 7), so "a connection named SERVICE holds a seedline.*
subscription" on the nats-server monitoring endpoint means ready. Standard
library only: it runs in the service image without importing the service.
Exit 0 when ready, 1 otherwise, with one line saying why.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

DEFAULT_MONITOR_URL = "http://127.0.0.1:8222"


def ready(service: str, monitor_url: str, timeout: float = 2.0) -> tuple[bool, str]:
    url = monitor_url.rstrip("/") + "/connz?subs=1&limit=4096"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            connections = json.load(resp).get("connections") or []
    except Exception as exc:
        return False, f"cannot read {url}: {exc}"
    named = [c for c in connections if c.get("name") == service]
    if not named:
        return False, f"no NATS connection named {service} yet"
    for conn in named:
        if any(s.startswith("seedline.") for s in conn.get("subscriptions_list") or []):
            return True, f"{service} is connected and subscribed"
    return False, f"{service} is connected but not subscribed to its subjects yet"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: healthcheck.py SERVICE", file=sys.stderr)
        return 2
    monitor_url = os.environ.get("SEEDLINE_NATS_MONITOR_URL") or DEFAULT_MONITOR_URL
    ok, why = ready(argv[1], monitor_url)
    print(why)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
