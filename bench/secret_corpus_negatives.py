"""The negatives of the secret corpus (bench/secret_corpus.py): text that holds no secret
and that a brief must keep whole, most of it real (this checkout's git history and lock
files, and the 57 real transcripts under tests/data)."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.secret_corpus import Case, _Values

ROOT = Path(__file__).resolve().parents[1]


def negatives(v: _Values) -> list[Case]:
    from bench.secret_corpus import Case

    cases: list[Case] = []

    def add(form: str, text: str) -> None:
        cases.append(Case(form, text, (), "negative"))

    real_shas = _git(["log", "-n", "40", "--format=%H %s"]) or "\n".join(
        f"{hashlib.sha1(str(n).encode()).hexdigest()} commit {n}" for n in range(40))
    add("git log with full shas", real_shas)
    add("git log --oneline", _git(["log", "-n", "40", "--oneline"]) or real_shas)
    add("git diff index lines", "\n".join(
        f"diff --git a/src/m{n}.py b/src/m{n}.py\nindex {v.hex(7)}..{v.hex(7)} 100644"
        for n in range(12)))
    add("git rev-parse and describe", f"$ git rev-parse HEAD\n{v.hex(40)}\n"
        f"$ git describe\nv1.4.2-17-g{v.hex(7)}\n")
    add("sha256sum output", "\n".join(
        f"{hashlib.sha256(str(n).encode()).hexdigest()}  dist/pkg-{n}.tar.gz" for n in range(15)))
    add("image digests", "\n".join(
        f"ghcr.io/team/app@sha256:{hashlib.sha256(f'i{n}'.encode()).hexdigest()}"
        for n in range(10)))
    add("npm integrity", _lock_integrity() or "\n".join(
        f'"integrity": "sha512-{base64.b64encode(hashlib.sha512(str(n).encode()).digest()).decode()}"'
        for n in range(15)))
    add("pip hashes", _uv_hashes() or "\n".join(
        f"    --hash=sha256:{hashlib.sha256(f'p{n}'.encode()).hexdigest()}" for n in range(15)))
    add("uuids", "\n".join(f"session {v.uuid()} resumed; request-id {v.uuid()}" for _ in range(15)))
    add("claude transcript paths", "\n".join(
        f"~/.claude/projects/-work-repos-app/{v.uuid()}.jsonl" for _ in range(10)))
    add("base64 image data", "data:image/png;base64," + base64.b64encode(
        bytes(random.Random(7).getrandbits(8) for _ in range(900))).decode())
    add("base64 in a test fixture",
        f'payload = "{base64.b64encode(b"hello world, this is a fixture payload " * 4).decode()}"')
    add("file paths", _paths() or "\n".join(f"libs/core/src/seedline_core/m{n}.py" for n in range(40)))
    add("pytest output", "tests/test_castling.py::test_kingside PASSED [ 12%]\n"
        "tests/test_castling.py::test_queenside PASSED [ 25%]\n"
        "==== 8 passed in 0.42s ====\n")
    add("python traceback", 'Traceback (most recent call last):\n  File "/work/app/main.py", '
        'line 42, in <module>\n    main()\nKeyError: \'SECRET_KEY\'\n')
    add("secret references, not secrets",
        'password: ${DB_PASSWORD}\ntoken = os.environ["GITHUB_TOKEN"]\n'
        "api_key: <your-api-key>\nSECRET_KEY=$(cat /run/secrets/key)\n"
        "export AWS_SECRET_ACCESS_KEY=$AWS_SECRET\npassword: changeme\n")
    add("code that names secrets", "def check_password(password: str) -> bool:\n"
        "    return hmac.compare_digest(hash_password(password), stored)\n"
        "api_key = settings.api_key\nif not token:\n    raise Unauthorized()\n")
    add("package versions and urls",
        "resolved https://registry.npmjs.org/react/-/react-18.3.1.tgz\n"
        "Collecting fastapi==0.115.0\n  Downloading fastapi-0.115.0-py3-none-any.whl (94 kB)\n")
    add("minified identifiers", "const a=" + ",".join(
        f"_{v.chars(string.ascii_letters, 6)}" for _ in range(30)) + ";")
    add("commit-pinned actions", "\n".join(
        f"      - uses: actions/checkout@{v.hex(40)} # v4" for _ in range(6)))
    add("docker ps", "\n".join(f"{v.hex(12)}   postgres:16   \"docker-entrypoint.s…\"   Up 2 hours"
                               for _ in range(8)))
    add("go.sum", "\n".join(
        f"golang.org/x/net v0.{n}.0 h1:{base64.b64encode(hashlib.sha256(str(n).encode()).digest()).decode()}"
        for n in range(12)))
    return cases


def _git(args: list[str]) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _lock_integrity() -> str:
    lock = ROOT / ".tools" / "engines" / "package-lock.json"
    try:
        packages = json.loads(lock.read_text()).get("packages", {})
    except (OSError, ValueError):
        return ""
    lines = [f'"integrity": "{p["integrity"]}"' for p in packages.values()
             if isinstance(p, dict) and p.get("integrity")]
    return "\n".join(lines[:20])


def _uv_hashes() -> str:
    try:
        text = (ROOT / "uv.lock").read_text()
    except OSError:
        return ""
    hashes = [line.strip() for line in text.splitlines() if "hash = \"sha256:" in line]
    return "\n".join(hashes[:20])


def _paths() -> str:
    files = _git(["ls-files"])
    return "\n".join(files.splitlines()[:60])


TRANSCRIPTS = ROOT / "tests" / "data" / "transcripts" / "corpus.jsonl"


def transcript_entries() -> list[Case]:
    from bench.secret_corpus import Case

    """Every entry of the real coding-agent transcripts under tests/data (none holds a
    secret): what a scanner finds there is a false positive a brief would pay for."""
    try:
        lines = TRANSCRIPTS.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [Case(f"real transcript {kind}", content, (), "real transcript")
            for line in lines for kind, content in json.loads(line) if content.strip()]
