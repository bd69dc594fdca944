"""The table of fault kinds against runs that RELIABILITY.md keeps."""

from __future__ import annotations

from collections import defaultdict

from .faults import KINDS

HEADER = ("| fault | runs | operations | acknowledged entries | entries lost | duplicates | "
          "repos live twice | opens without a reply | longest recovery after a heal | seeds |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def table(reports) -> str:
    by_kind = defaultdict(list)
    for report in reports:
        by_kind[report.kind].append(report)
    rows = [HEADER]
    for kind in [k for k in KINDS if k in by_kind]:
        runs = by_kind[kind]
        rows.append(
            f"| {kind} | {len(runs)} | {sum(r.operations for r in runs):,} | "
            f"{sum(r.acknowledged for r in runs):,} | {sum(r.lost for r in runs)} | "
            f"{sum(r.duplicates for r in runs)} | {sum(r.live_twice for r in runs)} | "
            f"{sum(r.opens_without_reply for r in runs)} | "
            f"{max(r.longest_recovery for r in runs):.1f} s | "
            f"{', '.join(str(r.seed) for r in runs)} |")
    linked = [r for r in reports if r.how_links]
    if linked:
        rows.append(f"\n{len(linked)} of {len(reports)} runs also had every link slowed and "
                    f"lossy ({', '.join(sorted({r.how_links for r in linked}))}).")
    return "\n".join(rows)
