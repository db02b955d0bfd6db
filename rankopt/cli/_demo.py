"""``rankopt demo``: solve ring allreduce on the bundled example cloud."""

from __future__ import annotations

import argparse

import numpy as np

from rankopt._model_args import seed_value
from rankopt.network.cloud import example_path, load_cloud
from rankopt.solvers import solve

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="optimise ring allreduce on the bundled 48-VM example cloud",
        description="Load the example cloud shipped with rankopt (48 VMs in 2 pods x 3 racks, "
        "launched in scheduler order), solve ring allreduce as every entry point does with no "
        "flags (the contention model at 16 MiB with the cloud's uplinks) and compare with the "
        "launch order.",
    )
    p.add_argument(
        "--objective",
        default=None,
        choices=("sum", "bottleneck", "time", "contention"),
        help="objective (default: the network's, contention at 16 MiB)",
    )
    p.add_argument("--seed", type=seed_value, default=0, help="random seed (default: 0)")
    p.set_defaults(func=run)


def _racks_line(hosts: tuple[str, ...], order: np.ndarray) -> str:
    racks = [h.rsplit("-", 1)[0] for h in hosts]
    seq = [racks[i] for i in order]
    runs = [seq[0]]
    for r in seq[1:]:
        if r != runs[-1]:
            runs.append(r)
    return " ".join(runs)


def run(args: argparse.Namespace) -> int:
    cloud = load_cloud(example_path())
    res = solve(cloud, objective=args.objective, rng=args.seed)
    n = cloud.n
    print(
        f"example cloud: {n} VMs, {len(set(cloud.groups[1]))} racks in "
        f"{len(set(cloud.groups[2]))} pods ({example_path().name})"
    )
    print(res.summary())
    print(f"  racks along the launch-order ring   : {_racks_line(cloud.hosts, np.arange(n))}"[:110])
    print(f"  racks along the optimised ring      : {_racks_line(cloud.hosts, res.order)}")
    print(f"  full order: {' '.join(str(int(x)) for x in res.order)}")
    return 0
