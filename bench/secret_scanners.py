"""Secret scanners compared on one labelled corpus (bench.secret_corpus): recall, false
positives, characters taken outside a secret, and time per brief.

    python -m bench.secret_scanners [--python NAME=INTERPRETER ...] [--out FILE]

Each scanner runs in the interpreter named for it (one virtual environment per scanner:
detect-secrets and its forks install the same module), `seedline-*` in this one. A
scanner whose interpreter is not given is left out of the table. Recall counts a secret
found only when every character of it is replaced; a false positive is a span that
touches no secret; "over" counts spans that take a character outside the secret they
touch. Time per brief scans 60 entries of about 200 characters each, drawn from the
corpus, one entry at a time (as a brief scans them).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.secret_corpus import Case, corpus

ADAPTERS = Path(__file__).with_name("secret_scanner_adapters.py")
BRIEFS = 20
ENTRIES_PER_BRIEF = 60


@dataclass
class Score:
    name: str
    secrets: int = 0
    found: int = 0
    false_positives: int = 0
    over: int = 0
    ms_per_brief: float = 0.0
    missed: tuple[str, ...] = ()
    false_forms: tuple[str, ...] = ()

    @property
    def recall(self) -> float:
        return self.found / self.secrets if self.secrets else 0.0


def _secret_spans(case: Case) -> list[tuple[int, int]]:
    spans = []
    for secret in case.secrets:
        at = case.text.find(secret)
        spans.append((at, at + len(secret)))
    return spans


def score(name: str, cases: list[Case], found: list[list[list[int]]], seconds: list[float]) -> Score:
    result = Score(name, ms_per_brief=statistics.median(seconds) * 1000 if seconds else 0.0)
    missed, false_forms = [], []
    for case, spans in zip(cases, found):
        secrets = _secret_spans(case)
        taken = [tuple(span) for span in spans]
        for lo, hi in secrets:
            result.secrets += 1
            covered = set()
            for start, end in taken:
                covered.update(range(max(lo, start), min(hi, end)))
            if len(covered) == hi - lo:
                result.found += 1
            else:
                missed.append(case.form)
        for start, end in taken:
            touching = [(lo, hi) for lo, hi in secrets if start < hi and lo < end]
            if not touching:
                result.false_positives += 1
                false_forms.append(case.form)
            elif any(start < lo or end > hi for lo, hi in touching) and not any(
                    lo <= start and end <= hi for lo, hi in touching):
                result.over += 1
    result.missed = tuple(missed)
    result.false_forms = tuple(false_forms)
    return result


def brief_entries(cases: list[Case]) -> list[list[str]]:
    """Briefs of entries cut from the corpus (positives and negatives alike)."""
    pieces = [case.text[i:i + 200] for case in cases for i in range(0, len(case.text), 200)]
    draw = random.Random(5)
    return [[draw.choice(pieces) for _ in range(ENTRIES_PER_BRIEF)] for _ in range(BRIEFS)]


def run(name: str, python: str, corpus_file: str, briefs_file: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([python, str(ADAPTERS), name, corpus_file, briefs_file],
                          capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def table(scores: list[Score]) -> str:
    lines = ["| scanner | recall | secrets missed | false positives | over-taken spans | ms per brief |",
             "|---|---|---|---|---|---|"]
    for s in scores:
        lines.append(f"| {s.name} | {s.recall:.0%} ({s.found}/{s.secrets}) | "
                     f"{s.secrets - s.found} | {s.false_positives} | {s.over} | "
                     f"{s.ms_per_brief:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", default=[],
                        help="NAME=INTERPRETER for a scanner installed elsewhere")
    parser.add_argument("--out", type=Path, help="write the table and details as JSON here")
    parser.add_argument("--details", action="store_true", help="list what each missed")
    args = parser.parse_args(argv)
    pythons = {"seedline-1": sys.executable, "seedline-2": sys.executable}
    pythons.update(dict(spec.split("=", 1) for spec in args.python))
    cases = corpus()
    scores = []
    with tempfile.TemporaryDirectory() as folder:
        corpus_file, briefs_file = Path(folder, "corpus.json"), Path(folder, "briefs.json")
        corpus_file.write_text(json.dumps([{"text": c.text} for c in cases]))
        briefs_file.write_text(json.dumps(brief_entries(cases)))
        for name, python in pythons.items():
            try:
                out = run(name, python, str(corpus_file), str(briefs_file))
            except RuntimeError as error:
                print(f"left out: {error}", file=sys.stderr)
                continue
            scores.append(score(name, cases, out["spans"], out["seconds_per_brief"]))
    print(table(scores))
    if args.details:
        for s in scores:
            print(f"\n{s.name} missed: {sorted(set(s.missed))}\n  false: {sorted(set(s.false_forms))}")
    if args.out:
        args.out.write_text(json.dumps([s.__dict__ | {"recall": s.recall} for s in scores],
                                       indent=1, default=list))


if __name__ == "__main__":
    main()
