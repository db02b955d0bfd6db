"""Full testbed benchmark: rankopt's own order on real Open MPI and Gloo allreduce.

Needs root, ``ip netns``, mpi4py + Open MPI and torch.  For each topology it
builds the testbed, checks its rates, launches the ranks interleaved, runs
rankopt's probe, solves, and times allreduce (Open MPI ring forced, Open MPI
default, torch Gloo) at 1, 16 and 64 MB in launch order, rankopt's order, the
topology's ideal order and random orders; then the model-fidelity study and a
DDP loop.  Prints the tables and writes one JSON file per topology.

    python bench/testbed_allreduce.py                       # full run (~30-40 min)
    python bench/testbed_allreduce.py --topology 2level --engines mpi-ring --sizes 64
    python bench/testbed_allreduce.py --quick               # ~3 min smoke run

The CI version of this run is ``tests/test_testbed.py::test_experiment_ci``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from rankopt.testbed import Testbed, Topology, check
from rankopt.testbed.experiment import ENGINES, ExperimentConfig, run_experiment
from rankopt.testbed.report import format_report

MB = 1 << 20

#: The two topologies of the issue: 8 hosts in 2 racks; 2 pods x 2 racks x 2 hosts.
#: The 3-level one has distinct rack and pod uplink rates, so that a pairwise
#: bandwidth probe can tell racks from pods, and a rack uplink below twice the
#: pod uplink: with 400/200 Mbit/s an order that splits a rack in two shares
#: its uplink at 2 x 200 Mbit/s, which the contention model (fair shares, max
#: per step) rates equal to the ideal order, while tbf's unfair sharing makes
#: it ~25% slower in practice.
TOPOLOGIES = {
    "2level": Topology(hosts_per_rack=4, racks_per_pod=2, pods=1, rates=("1gbit", "200mbit")),
    "3level": Topology(
        hosts_per_rack=2, racks_per_pod=2, pods=2, rates=("1gbit", "350mbit", "200mbit")
    ),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topology", choices=[*TOPOLOGIES, "all"], default="all")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--sizes", default="1,16,64", help="MB")
    p.add_argument("--random", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--objective", default=None, help="passed to rankopt.solve")
    p.add_argument("--fidelity", type=int, default=12, help="random orders (0: skip)")
    p.add_argument("--no-ddp", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--quick",
        action="store_true",
        help="one topology, mpi-ring, 16 MB, 2 repeats, no fidelity, no DDP",
    )
    p.add_argument("--prefix", default="rkb")
    p.add_argument("--out", default="bench/results", help="directory for the JSON reports")
    a = p.parse_args(argv)
    if a.quick:
        a.topology, a.engines, a.sizes, a.repeats = "2level", "mpi-ring", "16", 2
        a.fidelity, a.no_ddp, a.random = 0, True, 1
    names = list(TOPOLOGIES) if a.topology == "all" else [a.topology]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        topo = TOPOLOGIES[name]
        cfg = ExperimentConfig(
            seed=a.seed,
            engines=tuple(a.engines.split(",")),
            n_random=a.random,
            sizes=tuple(int(float(s) * MB) for s in a.sizes.split(",")),
            repeats=a.repeats,
            solve_kwargs={"objective": a.objective} if a.objective else {},
            fidelity_orders=a.fidelity if name == "2level" else 0,
            ddp=not a.no_ddp and name == "2level",
        )
        t0 = time.time()
        with Testbed(topo, prefix=a.prefix) as tb:
            checks = check(tb)
            for c in checks:
                print(f"  {c}  {'ok' if c.ok() else 'OUT OF 15%'}", flush=True)
            report = run_experiment(tb, cfg, callback=lambda m: print(m, flush=True))
        report["check"] = [dataclasses.asdict(c) for c in checks]
        report["wall_s"] = time.time() - t0
        report["command"] = " ".join(["python", *sys.argv])
        print(format_report(report), flush=True)
        path = out / f"testbed_{name}.json"
        path.write_text(json.dumps(report, indent=1))
        print(f"wrote {path} ({report['wall_s']:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
