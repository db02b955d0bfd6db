"""Testbed matrix: what the user's path delivers on real Open MPI and Gloo allreduce.

Needs root, ``ip netns``, mpi4py + Open MPI and torch.  For every network and
launch of the matrix it builds the testbed, launches the ranks, runs the user's
entry point with default flags (``python -m rankopt.mpi`` under mpirun for the
Open MPI ring, forced; ``rankopt run`` for Gloo), and times allreduce in its
order next to the launch order, the rack-contiguous (ideal) order, random
orders and the user's order replayed (medians of ``--repeats``).  Prints one
markdown table (launch / user path / ideal / best / fraction of best / modelled
vs measured speedup / probe + solve overhead) and writes one JSON file per case.

    python bench/testbed_allreduce.py                                   # full matrix
    python bench/testbed_allreduce.py --cases 2x4:interleaved,3x3:random --sizes 16M
    python bench/testbed_allreduce.py --quick                           # ~2 min smoke run

The CI version of this run is ``tests/test_testbed.py::test_experiment_ci``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rankopt.testbed import Testbed, Topology
from rankopt.testbed.experiment import ExperimentConfig, run_experiment
from rankopt.testbed.report import format_report, summary_table
from rankopt.units import parse_sizes

MB = 1 << 20
_RATES = ("1gbit", "200mbit")

#: Networks of the matrix: 2-level with 2, 3 and 4 racks, equal and unequal
#: sizes, and a 3-level one (2 pods x 2 racks x 2 hosts).  The 3-level one has
#: distinct rack and pod uplink rates so that the probe's bandwidth tells racks
#: from pods, and a rack uplink below twice the pod uplink (with 400/200 Mbit/s
#: an order that splits a rack shares its uplink at 2 x 200 Mbit/s, which fair
#: sharing rates equal to the ideal order while tbf's unfair sharing makes it
#: ~25% slower).
NETWORKS = {
    "2x4": Topology(4, 2, rates=_RATES),
    "3x3": Topology(3, 3, rates=_RATES),
    "4x2": Topology(2, 4, rates=_RATES),
    "4-3-2": Topology(racks=(4, 3, 2), rates=_RATES),
    "5-3": Topology(racks=(5, 3), rates=_RATES),
    "3level": Topology(2, 2, 2, rates=("1gbit", "350mbit", "200mbit")),
}
LAUNCHES = ("interleaved", "random")


def _cases(spec: str) -> list[tuple[str, str]]:
    if spec == "all":
        return [(n, lc) for n in NETWORKS for lc in LAUNCHES]
    out = []
    for item in spec.split(","):
        name, _, launch = item.partition(":")
        if name not in NETWORKS or launch not in LAUNCHES:
            raise SystemExit(
                f"--cases: {item!r} is not NETWORK:LAUNCH with NETWORK in "
                f"{', '.join(NETWORKS)} and LAUNCH in {', '.join(LAUNCHES)}"
            )
        out.append((name, launch))
    return out


def markdown(results: list[tuple[str, str, dict]]) -> str:
    """One table over every case: network, launch, then :func:`summary_table`'s columns."""
    lines: list[str] = []
    for name, launch, report in results:
        rows = summary_table(report["summary"], markdown=True)
        if not lines:
            lines = ["| network | launch " + rows[0], "|---|---" + rows[1]]
        lines += [f"| {name} | {launch} " + r for r in rows[2:]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--cases",
        default="all",
        help="comma list of NETWORK:LAUNCH (networks: " + ", ".join(NETWORKS) + "; launches: "
        "interleaved, random), or all (default)",
    )
    p.add_argument("--engines", default="mpi-ring,gloo")
    p.add_argument("--sizes", default="16M,64M", help="sizes (default: %(default)s)")
    p.add_argument("--random", type=int, default=2, help="random orders timed per case")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0, help="seed of random launches and orders")
    p.add_argument("--ddp", action="store_true", help="also DDP steps/s (Gloo) per case")
    p.add_argument("--quick", action="store_true", help="2x4 interleaved, mpi-ring, 16 MB")
    p.add_argument("--prefix", default="rkb")
    p.add_argument("--out", default="bench/results", help="directory for the JSON reports")
    a = p.parse_args(argv)
    if a.quick:
        a.cases, a.engines, a.sizes, a.random = "2x4:interleaved", "mpi-ring", "16M", 1
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name, launch in _cases(a.cases):
        cfg = ExperimentConfig(
            launch=launch,
            seed=a.seed,
            engines=tuple(a.engines.split(",")),
            n_random=a.random,
            sizes=tuple(parse_sizes(a.sizes, "--sizes")),
            repeats=a.repeats,
            ddp=a.ddp,
        )
        t0 = time.time()
        with Testbed(NETWORKS[name], prefix=a.prefix) as tb:
            report = run_experiment(tb, cfg, callback=lambda m: print(m, flush=True))
        report["wall_s"] = time.time() - t0
        report["command"] = " ".join(["python", *sys.argv])
        print(format_report(report), flush=True)
        path = out / f"testbed_{name}_{launch}.json"
        path.write_text(json.dumps(report, indent=1))
        print(f"wrote {path} ({report['wall_s']:.0f} s)\n", flush=True)
        results.append((name, launch, report))
        print(markdown(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
