"""docs/tour.txt is what scripts/tour.sh prints: run for real here, so the recorded tour
cannot drift from what the tour does (it once showed a wake as `fresh ... briefed` while
the tour itself gave `resume ... resumed`). What differs between two runs by nature (ids,
times, ages, hashes, ports, column widths) is set aside before comparing.

Regenerate with:  scripts/tour.sh > docs/tour.txt
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
from pathlib import Path

import pytest

from seedline_devtools.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]
VARYING = [
    (re.compile(r"csess_[0-9a-f]{16}"), "csess_ID"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "SHA256"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?Z?)?"), "TIME"),
    (re.compile(r"(?<=\[)(\d+ \w+) \d\d:\d\d\]"), r"\1 TIME]"),
    (re.compile(r"\b\d+ (s|seconds?|minutes?|min|hours?|h)\b( ago)?"), "AGE"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
    (re.compile(r"/tmp/seedline-tour-\w+"), "/tmp/TOUR"),
    (re.compile(r"\b\d[\d,]* (characters|requests|errors)\b"), r"N \1"),
    (re.compile(r"\b\d[\d,.]* (GB|MB|kB|bytes) free\b"), "SIZE free"),
    (re.compile(r"[─━═]+"), "─"),
]


def normalised(text: str) -> list[str]:
    # Cells wrap where their column's width puts them: compare the words, not the layout.
    for pattern, replacement in VARYING:
        text = pattern.sub(replacement, text)
    words = " ".join(text.split())
    return [step.strip() for step in re.split(r"(?=\$ seedline )", words)]


@pytest.mark.slow
@pytest.mark.servers
def test_the_recorded_tour_is_what_the_tour_prints():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")}
    env.update(TOUR_NATS_PORT=str(free_port()), TOUR_MONITOR_PORT=str(free_port()),
               SEEDLINE_WEB_PORT=str(free_port()))
    ran = subprocess.run(["bash", str(ROOT / "scripts" / "tour.sh")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    recorded = normalised((ROOT / "docs" / "tour.txt").read_text())
    printed = normalised(ran.stdout)
    assert printed == recorded, (
        "docs/tour.txt drifted from what scripts/tour.sh prints; regenerate it with "
        "`scripts/tour.sh > docs/tour.txt`:\n"
        + "\n".join(difflib.unified_diff(recorded, printed, "docs/tour.txt", "tour.sh",
                                         lineterm="")))


def test_the_readmes_excerpt_is_part_of_the_recorded_tour():
    readme = (ROOT / "README.md").read_text()
    excerpt = readme.split("is recorded in [docs/tour.txt](docs/tour.txt). An excerpt:", 1)[1]
    excerpt = excerpt.split("```text", 1)[1].split("```", 1)[0]
    recorded = normalised((ROOT / "docs" / "tour.txt").read_text())
    for step in normalised(excerpt):
        if step.strip():
            assert step in recorded, f"the README's excerpt is not in docs/tour.txt:\n{step}"
