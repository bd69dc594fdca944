"""One secret scanner over the corpus, as spans: run by bench.secret_scanners in the
scanner's own environment (detect-secrets and its forks install the same module name, so
each needs an interpreter of its own).

    python bench/secret_scanner_adapters.py NAME CORPUS.json BRIEFS.json

prints {"spans": [[[start, end], ...] per case], "seconds_per_brief": [...]}. A scanner
that reports a secret's value rather than where it stands has each occurrence of that
value on the reported line taken as its span. Standalone: imports nothing of Seedline
but the `seedline` scanners.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable

Spans = list[tuple[int, int]]
_KEEP: list = []


def _occurrences(text: str, value: str, lo: int = 0, hi: int | None = None) -> Spans:
    hi = len(text) if hi is None else hi
    found, at = [], text.find(value, lo, hi)
    while value and at >= 0:
        found.append((at, at + len(value)))
        at = text.find(value, at + 1, hi)
    return found


def _line_bounds(text: str) -> list[tuple[int, int]]:
    bounds, at = [], 0
    for line in text.split("\n"):
        bounds.append((at, at + len(line)))
        at += len(line) + 1
    return bounds


def _by_line_values(text: str, findings: Iterable[tuple[int, str]]) -> Spans:
    """Spans of (1-based line, value) findings; a line of 0 searches the whole text."""
    bounds = _line_bounds(text)
    spans: Spans = []
    for line, value in findings:
        if 1 <= line <= len(bounds):
            lo, hi = bounds[line - 1]
            spans += _occurrences(text, value, lo, hi) or _occurrences(text, value)[:1]
        else:
            spans += _occurrences(text, value)[:1]
    return spans


_WORD_END = re.compile(r"[\s'\"`,;]")


def _whole_word(text: str, span: tuple[int, int]) -> tuple[int, int]:
    """Some plugins report only a token's prefix as its value (the GitHub plugin's `ghp`):
    a value under 8 characters is taken to the end of the word it starts."""
    start, end = span
    if end - start >= 8:
        return span
    stop = _WORD_END.search(text, end)
    return start, stop.start() if stop else len(text)


def seedline(ruleset: int | None) -> Callable[[str], Spans]:
    from seedline_core import redaction

    def scan(text: str) -> Spans:
        if ruleset is None:
            return [(s.start, s.end) for s in redaction.find_secrets(text)]
        return [(s.start, s.end) for s in redaction.find_secrets(text, ruleset)]

    return scan


def detect_secrets_all() -> Callable[[str], Spans]:
    """Every plugin detect-secrets (or a fork) enables by default, with its default filters,
    each text scanned as a file is (`detect-secrets scan`). Its ad hoc line scan searches
    every word eagerly and would flag nearly all of them, which no one uses on files."""
    from detect_secrets.core.scan import scan_file
    from detect_secrets.settings import default_settings

    # Entered for the life of the process: a context left to the garbage collector would
    # end, and reset the settings to no plugins at all.
    _KEEP.append(default_settings())
    _KEEP[-1].__enter__()
    folder = tempfile.mkdtemp(prefix="ds-scan-")
    path = os.path.join(folder, "entry.txt")

    def scan(text: str) -> Spans:
        with open(path, "w") as out:
            out.write(text)
        findings = [(secret.line_number, secret.secret_value) for secret in scan_file(path)
                    if secret.secret_value]
        return [_whole_word(text, span) for span in _by_line_values(text, findings)]

    return scan


def betterleaks() -> Callable[[str], Spans]:
    import betterleaks as bl

    def scan(text: str) -> Spans:
        found = bl.scan_string(text)
        return _by_line_values(text, [(f.location.start_line, f.match.value or f.match.full)
                                      for f in found])

    return scan


def kingfisher_sdk() -> Callable[[str], Spans]:
    from kingfisher_sdk import Rules, Scanner

    scanner = Scanner(Rules(), base64=False)

    def scan(text: str) -> Spans:
        findings = []
        for f in scanner.scan(text):
            line = (f.location or {}).get("line") or (f.location or {}).get("start_line") or 0
            findings.append((int(line), f.secret))
        return _by_line_values(text, findings)

    return scan


def kingfisher_bin() -> Callable[[str], Spans]:
    """The Kingfisher CLI: one process per batch of texts (a process per entry would cost
    it a tenth of a second each), so `scan_many` is what main uses for it."""
    from kingfisher import get_binary_path

    binary = get_binary_path()

    def scan_many(texts: list[str]) -> list[Spans]:
        with tempfile.TemporaryDirectory() as folder:
            for n, text in enumerate(texts):
                with open(os.path.join(folder, f"{n}.txt"), "w") as out:
                    out.write(text)
            done = subprocess.run(
                [binary, "scan", folder, "--format", "json", "--no-validate",
                 "--no-update-check", "--confidence", "low"],
                capture_output=True, text=True, check=False)
        found: list[list[tuple[int, str]]] = [[] for _ in texts]
        for item in _json_items(done.stdout):
            finding = item.get("finding", item)
            value, path = finding.get("snippet") or "", finding.get("path") or ""
            name = os.path.basename(path)
            if value and name.endswith(".txt") and name[:-4].isdigit():
                found[int(name[:-4])].append((int(finding.get("line") or 0), value))
        return [_by_line_values(text, f) for text, f in zip(texts, found)]

    scan_many.many = True  # type: ignore[attr-defined]
    return scan_many


def _json_items(out: str) -> list[dict]:
    out = out.strip()
    if not out:
        return []
    try:
        data = json.loads(out)
    except ValueError:
        data = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    items = []
    for d in data if isinstance(data, list) else [data]:
        if isinstance(d, dict) and isinstance(d.get("findings"), list):
            items += [f for f in d["findings"] if isinstance(f, dict)]
    return items


SCANNERS: dict[str, Callable[[], Callable[[str], Spans]]] = {
    "seedline-1": lambda: seedline(None if not _has_rulesets() else 1),
    "seedline-2": lambda: seedline(2),
    "detect-secrets": detect_secrets_all,
    "bc-detect-secrets": detect_secrets_all,
    "detect-secrets-plus": detect_secrets_all,
    "betterleaks": betterleaks,
    "kingfisher-sdk": kingfisher_sdk,
    "kingfisher-bin": kingfisher_bin,
}


def _has_rulesets() -> bool:
    import inspect

    from seedline_core import redaction

    return "ruleset" in inspect.signature(redaction.find_secrets).parameters


def main(name: str, corpus_path: str, briefs_path: str) -> None:
    scan = SCANNERS[name]()
    with open(corpus_path) as file:
        cases = json.load(file)
    with open(briefs_path) as file:
        briefs = json.load(file)
    many = getattr(scan, "many", False)
    texts = [case["text"] for case in cases]
    found = scan(texts) if many else [scan(text) for text in texts]  # type: ignore[arg-type]
    spans = [sorted(set(f)) for f in found]
    timings = []
    for brief in briefs:
        started = time.perf_counter()
        if many:
            scan(brief)  # type: ignore[arg-type]
        else:
            for entry in brief:
                scan(entry)
        timings.append(time.perf_counter() - started)
    json.dump({"spans": spans, "seconds_per_brief": timings}, sys.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:4])
