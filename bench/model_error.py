"""The cost model's own error on a speedup, measured on the emulated testbed.

For each network, ``rankopt testbed run --fidelity N`` times N random orders
(Open MPI ring allreduce, 16 MiB) and prices them on the network its probe
measured (the default model: contention). For every pair of orders ``a, b``
the model's error on the speedup between them is
``log(measured_a / measured_b) - log(modelled_a / modelled_b)``; the root mean
square over all pairs of all networks is what
:data:`rankopt.models.robust.MODEL_ERROR` holds. Needs root (network
namespaces); writes only under a temporary folder it removes.

    python bench/model_error.py                  # the two default networks
    python bench/model_error.py --orders 16 --network 4,4 1gbit,300mbit 3
    python bench/model_error.py --from run1.json run2.json   # reports already made
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

#: Networks no test uses: racks (hosts each), host and rack-uplink rates, launch seed.
NETWORKS = (("3,3,2", "1gbit,250mbit", 11), ("2,2,2,2", "1gbit,200mbit", 13))


def pair_errors(report: dict) -> tuple[np.ndarray, dict]:
    """The log errors on the speedup of every pair of timed orders, and a summary."""
    fid = report["fidelity"]
    measured = np.asarray(fid["measured"], dtype=float)
    model = np.asarray(fid["probe"]["contention"]["model"], dtype=float)
    e = np.log(measured / model)
    d = np.array([e[a] - e[b] for a, b in itertools.combinations(range(e.size), 2)])
    return d, {"orders": int(e.size), "spearman": fid["probe"]["contention"]["spearman"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--orders", type=int, default=12, help="random orders per network")
    p.add_argument("--network", nargs=3, action="append", metavar=("RACKS", "RATES", "SEED"))
    p.add_argument("--from", dest="reports", nargs="+", help="testbed reports already made")
    args = p.parse_args()
    nets = [tuple(n) for n in args.network] if args.network else NETWORKS
    reports: list[tuple[str, dict]] = []
    if args.reports:
        reports = [(r, json.loads(Path(r).read_text())) for r in args.reports]
    else:
        with tempfile.TemporaryDirectory(prefix="rankopt-model-error-") as tmp:
            for racks, rates, seed in nets:
                out = Path(tmp) / f"{racks}.json"
                cmd = [sys.executable, "-m", "rankopt", "testbed", "-q", "run", "--racks",
                       str(racks), "--rates", str(rates), "--launch", "random", "--seed",
                       str(seed), "--engines", "mpi-ring", "--sizes", "16M", "--random", "0",
                       "--repeats", "3", "--fidelity", str(args.orders), "--fidelity-size",
                       "16M", "-o", str(out)]  # fmt: skip
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                reports.append((f"{racks}, {rates}, seed {seed}", json.loads(out.read_text())))
    print("| network | orders | Spearman | rms error | largest |")
    print("|---|---|---|---|---|")
    pooled = []
    for name, report in reports:
        d, info = pair_errors(report)
        pooled.append(d)
        rms = float(np.sqrt(np.mean(d**2)))
        print(
            f"| {name} | {info['orders']} | {info['spearman']:+.2f} | {rms:.3f} | "
            f"{float(np.abs(d).max()):.3f} |"
        )
    allp = np.concatenate(pooled)
    print(f"\npooled rms of the log error on a speedup: {float(np.sqrt(np.mean(allp**2))):.3f}")


if __name__ == "__main__":
    main()
