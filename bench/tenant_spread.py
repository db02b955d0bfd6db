"""The same order timed twice: how far a "95% of the best" criterion can see.

    python bench/tenant_spread.py KEEP_DIR [KEEP_DIR ...]

Reads the launch reports that ``python bench/testbed_tenants.py --solo user-replay
--keep KEEP_DIR`` keeps (one JSON per launch, every call's time) and, per tenant
case, sets the user path's own job (``user``) against the same order timed in a
job of its own (``user-replay/solo``) and in visits beside the other orders
(``user-replay``), each the median of its calls: the median and range of
``user / alone``, the launches where the order falls below 95% of itself alone
and in visits, and the spread of one order's calls (max / min, the median over the
launches, for each way it was timed), and in how many launches the user path
was at least 95% of the best order timed (every order but the launch order).
Launches without an order timed alone are skipped.

``--statistic mean`` compares each order's mean call, that is its total time,
instead of its median call: beside a neighbour that is on for 2 s and off for 2 s
one order's calls fall into two groups (0.9 and 1.6 s, say), and which group
holds the median of twelve calls is a matter of where the calls fell; the total
is what a job running the calls pays.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

#: The criterion of the tenant campaigns: the user path at least this fraction of the best.
OF_BEST = 0.95


def case_of(path: Path) -> str:
    """The tenant case of a kept report, from its name ``RACKS-CASE-LAUNCH.json``."""
    stem = path.stem
    case = stem.split("-", 1)[1].rsplit("-", 1)[0] if stem.count("-") >= 2 else stem
    return "none" if case == "None" else case.replace("__", ", ").replace("_", " ")


#: The statistics of one order's calls that ``--statistic`` offers.
STATISTICS = {"median": statistics.median, "mean": statistics.fmean}


def launch(report: dict[str, Any], statistic: str = "median") -> dict[str, Any] | None:
    """The ratios and spreads of one launch's report (each order's calls summed up by
    ``statistic``), or ``None`` without an order alone."""
    stat = STATISTICS[statistic]
    med: dict[str, float] = {}
    spread: dict[str, float] = {}
    for r in report.get("results", []):
        times = [float(t) for t in r.get("times", []) if isinstance(t, (int, float)) and t > 0]
        if not times:
            continue
        med[str(r["label"])] = stat(times)
        spread[str(r["label"])] = max(times) / min(times)
    if "user" not in med or "user-replay/solo" not in med:
        return None
    best = min(v for k, v in med.items() if k not in ("user", "launch"))
    return {
        "alone": med["user"] / med["user-replay/solo"],
        "visits": med["user"] / med["user-replay"] if "user-replay" in med else None,
        "of_best": min(best, med["user"]) / med["user"],
        "spread": spread,
    }


def collect(
    dirs: Iterable[str | Path], statistic: str = "median"
) -> dict[str, list[dict[str, Any]]]:
    """Every kept launch with an order timed alone, by tenant case."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in dirs:
        for path in sorted(Path(d).glob("*.json")):
            try:
                report = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            row = launch(report, statistic) if isinstance(report, dict) else None
            if row is not None:
                out[case_of(path)].append(row)
    return dict(out)


def table(cases: dict[str, list[dict[str, Any]]]) -> str:
    """The Markdown table of :func:`collect`'s launches."""
    lines = [
        "| tenant | launches | user / same order alone: median (range) | below 95% of "
        "itself alone | ... in visits | one order's calls, max / min | user path >= 95% "
        "of the best |",
        "|---|---|---|---|---|---|---|",
    ]
    low = 1.0 / OF_BEST
    for case, rows in sorted(cases.items()):
        alone = [r["alone"] for r in rows]
        visits = [r["visits"] for r in rows if r["visits"] is not None]
        labels = sorted({k for r in rows for k in r["spread"]})
        spreads = [
            statistics.median(r["spread"][k] for r in rows if k in r["spread"]) for k in labels
        ]
        lines.append(
            f"| {case} | {len(rows)} | {statistics.median(alone):.3f} "
            f"({min(alone):.2f}-{max(alone):.2f}) | {sum(a > low for a in alone)} | "
            f"{sum(v > low for v in visits)} of {len(visits)} | "
            f"{min(spreads):.2f}-{max(spreads):.2f} | "
            f"{sum(r['of_best'] >= OF_BEST for r in rows)} of {len(rows)} |"
        )
    total = sum(len(r) for r in cases.values())
    below = sum(r["alone"] > low for rows in cases.values() for r in rows)
    lines.append("")
    lines.append(f"{below} of {total} launches: the order below 95% of itself timed alone")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", help="folders kept by testbed_tenants.py --keep")
    ap.add_argument(
        "--statistic",
        choices=sorted(STATISTICS),
        default="median",
        help="one order's calls summed up by their median (default) or mean (total time)",
    )
    args = ap.parse_args(argv)
    cases = collect(args.dirs, args.statistic)
    if not cases:
        ap.error(
            "no kept launch with an order timed alone (--solo user-replay) in "
            + ", ".join(args.dirs)
        )
    print(table(cases))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
