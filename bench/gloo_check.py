"""What torch's Gloo runs for broadcast, reduce and alltoall, told by timing signatures.

    python bench/gloo_check.py                      # 2 racks of 4 hosts, 16 MiB
    python bench/gloo_check.py --racks 4,4 --mib 16 --repeats 5 --json out.json

Gloo prints nothing about its algorithms, and it connects every pair of
processes when the group starts, so neither its log nor its connections say
which peers a collective talks to. The order does: on two racks behind one
slow uplink, each candidate algorithm makes a different order the fast one.
MPICH's binomial broadcast (largest distance first) crosses the uplink once
with the racks contiguous and four times at once with them interleaved;
Gloo's binomial (distance 1 first, ``gloo/broadcast.cc``) is the other way
round. The script builds that testbed (network namespaces, ``tbf``-shaped
links: it needs root), times each collective in torch.distributed with the
Gloo backend under a few orders, one job per collective, repeats interleaved
over the orders, and prints the measured time of every order next to every
candidate model's time on the testbed's configured network. The model that
rankopt's Gloo engine picks (:mod:`rankopt.engines.gloo`) should be the one
whose ranking of the orders the measurement shows: ``agrees`` is whether the
model ranks every pair of orders that the measurement tells apart (by more
than ``--margin``) the same way. Allreduce (a ring in every model) is the
control.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import rankopt
from rankopt._files import atomic_write_text
from rankopt.engines import gloo
from rankopt.testbed import Topology
from rankopt.testbed.experiment import time_orders
from rankopt.testbed.fidelity import truth_network
from rankopt.testbed.netns import Testbed

MIB = 1 << 20

#: Candidate rankopt models per collective (the engine's choice among them).
CANDIDATES = {
    "allreduce": ("ring", "rabenseifner_mpich"),
    "broadcast": ("binomial_gloo", "binomial", "chain"),
    "reduce": ("ring_gather", "binomial", "reduce_scatter_gather"),
    "alltoall": ("linear", "pairwise"),
}


def orders_for(racks: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Launch (racks contiguous), interleaved (rack by rack in turn) and one random order."""
    n = len(racks)
    by_rack = [np.flatnonzero(racks == g).tolist() for g in np.unique(racks)]
    inter = [r[i] for i in range(max(map(len, by_rack))) for r in by_rack if i < len(r)]
    return {
        "contiguous": np.arange(n),
        "interleaved": np.asarray(inter),
        "random": np.random.default_rng(seed).permutation(n),
    }


def modelled(net: dict[str, Any], collective: str, algorithm: str, order: np.ndarray, nbytes: int):
    kw = dict(net)
    lat = kw.pop("latency")
    return float(rankopt.cost(lat, order, collective, algorithm, nbytes=nbytes, **kw))


def agrees(measured: dict[str, float], model: dict[str, float], margin: float) -> bool | None:
    """Whether the model orders every pair the measurement separates by ``margin`` alike."""
    names = list(measured)
    told = False
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            lo, hi = sorted((measured[a], measured[b]))
            if hi < lo * (1 + margin):
                continue
            told = True
            if (measured[a] < measured[b]) != (model[a] < model[b]):
                return False
    return True if told else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--racks", default="4,4", help="hosts of every rack (default: 4,4)")
    p.add_argument("--rates", default="1gbit,200mbit", help="host link, rack uplink")
    p.add_argument("--mib", type=float, default=16, help="message size, MiB (default: 16)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0, help="seed of the random order")
    p.add_argument("--margin", type=float, default=0.15, help="measured gap that counts")
    p.add_argument("--collectives", default="allreduce,broadcast,reduce,alltoall")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)

    sizes = tuple(int(x) for x in args.racks.split(","))
    topo = Topology(racks=sizes, rates=tuple(args.rates.split(",")))
    n = topo.n_hosts
    nbytes = int(args.mib * MIB) // (4 * n) * 4 * n  # float32 blocks that split evenly
    hosts = np.arange(n)
    net = truth_network(topo, hosts)
    orders = orders_for(net["groups"][0], args.seed)
    out: dict[str, Any] = {"topology": topo.describe(), "nbytes": nbytes, "cases": []}
    ok = True
    with Testbed(topo) as tb, tempfile.TemporaryDirectory(prefix="rankopt-gloo-check-") as d:
        for coll in args.collectives.split(","):
            times = time_orders(
                tb,
                hosts,
                "gloo",
                list(orders.values()),
                [(k, nbytes) for k in range(len(orders))],
                repeats=args.repeats,
                workdir=Path(d),
                collective=coll,
            )
            measured = {name: statistics.median(ts) for name, ts in zip(orders, times, strict=True)}
            chosen = gloo.algorithm(coll, nbytes, n)[0]
            print(f"\n{coll}, {nbytes / MIB:g} MiB, {topo.describe()}; rankopt's Gloo: {chosen}")
            print(
                f"  {'order':<12} {'measured':>9}  "
                + "  ".join(f"{a:>21}" for a in CANDIDATES[coll])
            )
            models = {
                a: {k: modelled(net, coll, a, o, nbytes) for k, o in orders.items()}
                for a in CANDIDATES[coll]
            }
            for k in orders:
                row = "  ".join(f"{models[a][k]:>20.3f}s" for a in CANDIDATES[coll])
                print(f"  {k:<12} {measured[k]:>8.3f}s  {row}")
            verdict = {a: agrees(measured, models[a], args.margin) for a in CANDIDATES[coll]}
            print(
                "  agrees      " + " " * 11 + "  ".join(f"{str(v):>21}" for v in verdict.values())
            )
            if verdict[chosen] is False:
                ok = False
            out["cases"].append(
                {
                    "collective": coll,
                    "engine_choice": chosen,
                    "measured": measured,
                    "models": models,
                    "agrees": verdict,
                    "orders": {k: o.tolist() for k, o in orders.items()},
                }
            )
    if args.json:
        atomic_write_text(args.json, json.dumps(out, indent=1) + "\n", what="--json")
    print("\nrankopt's Gloo choice agrees with the measurement" if ok else "\nMISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
