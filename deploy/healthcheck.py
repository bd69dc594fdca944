"""Container health check: does this process answer ready on its /readyz?

Usage: python healthcheck.py [URL]

URL defaults to http://127.0.0.1:$SEEDLINE_HTTP_PORT/readyz (9100 when unset), the
port every service serves /healthz, /readyz and /metrics on. A service opens that
port only once it has started, and /readyz answers 200 only while its checks pass
(NATS connected, Postgres answering), so "200" means ready. Standard library only:
it runs in the service image without importing the service.
Exit 0 when ready, 1 otherwise, with one line saying why.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

DEFAULT_PORT = "9100"


def default_url() -> str:
    return f"http://127.0.0.1:{os.environ.get('SEEDLINE_HTTP_PORT') or DEFAULT_PORT}/readyz"


def ready(url: str, timeout: float = 2.0) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return True, f"ready: {resp.read(4096).decode(errors='replace').strip()}"
    except urllib.error.HTTPError as exc:
        return False, f"not ready ({exc.code}): {_failing(exc.read(4096))}"
    except Exception as exc:
        return False, f"cannot read {url}: {exc}"


def _failing(body: bytes) -> str:
    """The checks that fail, from the /readyz body ({"ok": false, "checks": {...}})."""
    try:
        checks = json.loads(body).get("checks") or {}
    except (ValueError, AttributeError):
        return body.decode(errors="replace").strip() or "no answer body"
    failing = sorted(name for name, ok in checks.items() if not ok)
    return "failing checks: " + (", ".join(failing) or "none named")


def main(argv: list[str]) -> int:
    if len(argv) > 2:
        print("usage: healthcheck.py [URL]", file=sys.stderr)
        return 2
    ok, why = ready(argv[1] if len(argv) == 2 else default_url())
    print(why)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
