"""Runs of the fault harness from the command line (`make test-cluster`).

    python tests/hosts/campaign.py --seed 1234 --seconds 60    # one run; the seed replays it
    python tests/hosts/campaign.py --runs 20 --seconds 60      # fresh seeds, every fault kind

With --runs, run i draws a fresh seed whose fault kind is the i-th in turn (the kind is the
seed modulo the number of kinds), so 20 runs cover each of the nine kinds at least twice.
Prints each run's verdict and, at the end, the table RELIABILITY.md keeps (--table FILE
writes it there too). Exit code 1 when any run found a problem.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hosts.faults import KINDS  # noqa: E402
from hosts.network import why_not  # noqa: E402
from hosts.run import Report, run_once  # noqa: E402
from hosts.table import table  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, help="one run, with this seed")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--table", type=Path, help="also write the table to this file")
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()),
                        help="where each run's history and logs are kept")
    args = parser.parse_args()
    reason = why_not()
    if reason:
        print(f"skipped: {reason}")
        return 0
    if args.seed is not None:
        seeds = [args.seed]
    else:
        kinds = len(KINDS)
        base = secrets.randbits(24) * kinds
        seeds = [base + i % kinds + kinds * (i // kinds) * 7919 for i in range(args.runs)]
    reports: list[Report] = []
    for seed in seeds:
        report = run_once(seed, args.seconds, args.keep)
        print(report.verdict(), flush=True)
        reports.append(report)
    text = table(reports)
    print("\n" + text)
    if args.table:
        args.table.write_text(text)
        (args.table.with_suffix(".json")).write_text(
            json.dumps([r.__dict__ for r in reports], indent=1, default=str))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
