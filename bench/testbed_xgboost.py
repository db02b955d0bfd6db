"""Distributed XGBoost in the emulated testbed: launch order vs rankopt's order, iterations/s.

Builds a testbed (root, network namespaces), probes it over MPI, runs
XGBoost's workers with ``rankopt testbed exec --engine gloo`` (one process per
host, torchrun-style environment; the same placement as the probe), solves rankopt's
order for XGBoost's ring allreduce at the histogram size, and trains the same
model in launch order and in rankopt's order, rounds interleaved. The order
reaches XGBoost only through its own mechanism: launch rank 0 starts a
``RabitTracker(sortby="task")`` and every worker passes the task id of its new
rank (:mod:`rankopt.adapters.xgboost`).

Run (root, ``pip install xgboost-cpu``)::

    python bench/testbed_xgboost.py --racks 3,3,3 --launch random --seed 1 -o xgb.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
from _testbed_common import testbed_down, testbed_exec

WORKER = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    import xgboost as xgb
    from xgboost import collective as coll
    from rankopt.adapters.xgboost import start_tracker, worker_args

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    addr = os.environ["MASTER_ADDR"]
    rows, feats, rounds, depth, port = (int(x) for x in sys.argv[2:7])
    order = [int(x) for x in open(sys.argv[1]).read().split()]
    tracker = start_tracker(n, addr, port, timeout=300) if rank == 0 else None
    if tracker is None:
        time.sleep(5.0)
    args = worker_args({"dmlc_tracker_uri": addr, "dmlc_tracker_port": port}, rank, order)
    args["dmlc_retry"] = 30
    rng = np.random.default_rng(rank)
    X = rng.standard_normal((rows, feats)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.standard_normal(rows) > 0.5).astype(np.float32)

    class Clock(xgb.callback.TrainingCallback):
        def __init__(self):
            self.t = []

        def after_iteration(self, model, epoch, evals_log):
            self.t.append(time.perf_counter())
            return False

    with coll.CommunicatorContext(**args):
        clock = Clock()
        params = {"tree_method": "hist", "max_depth": depth, "max_bin": 256, "nthread": 1,
                  "objective": "binary:logistic", "eta": 0.1}
        xgb.train(params, xgb.DMatrix(X, label=y), num_boost_round=rounds, callbacks=[clock])
        if coll.get_rank() == 0:
            its = (len(clock.t) - 2) / (clock.t[-1] - clock.t[1])
            print(f"xgb_its {its:.4f} launch_rank {rank}", flush=True)
    if tracker is not None:
        tracker.wait_for(120)
    """
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--racks", default="3,3,3")
    p.add_argument("--rates", default="1gbit,200mbit")
    p.add_argument("--launch", default="random")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prefix", default="rkx")
    p.add_argument("--rounds", type=int, default=3, help="interleaved runs per order")
    p.add_argument("--rows", type=int, default=20000, help="rows per worker")
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--trees", type=int, default=12, help="boosting rounds per run")
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("-o", "--output", default=None)
    args = p.parse_args(argv)

    import rankopt
    from rankopt.adapters._common import save_order
    from rankopt.adapters.xgboost import HISTOGRAM_ALGORITHM
    from rankopt.network import load_network

    work = Path(tempfile.mkdtemp(prefix="rankopt-xgb-"))
    os.chmod(work, 0o755)
    worker = work / "worker.py"
    worker.write_text(WORKER)
    up = [sys.executable, "-m", "rankopt", "testbed", "up", "--prefix", args.prefix]
    up += ["--racks", args.racks, "--rates", args.rates]
    subprocess.run(up, check=True)
    try:
        net_file = work / "net.npz"
        # the network, probed over MPI on the same placement (the workers' launcher
        # places rank i on the same host)
        probe = [sys.executable, "-m", "rankopt", "probe", "--backend", "mpi", "-o", str(net_file)]
        testbed_exec(args.prefix, args.launch, args.seed, probe, engine="mpi")
        net = load_network(net_file)
        # a histogram: features x bins x (gradient, hessian) doubles
        hist = args.features * 256 * 16
        res = rankopt.solve(net, "allreduce", HISTOGRAM_ALGORITHM, nbytes=hist, rng=0)
        print(res.summary())
        orders = {"launch": np.arange(net.n), "rankopt": np.asarray(res.order)}
        files = {}
        for k, o in orders.items():
            files[k] = work / f"order-{k}.txt"
            save_order(files[k], o)
        its: dict[str, list[float]] = {k: [] for k in orders}
        sizes = [str(args.rows), str(args.features), str(args.trees), str(args.depth)]
        run = 0
        for _ in range(args.rounds):
            for k in orders:
                run += 1  # a fresh tracker port per run: the last one may be in TIME_WAIT
                port = str(30100 + 7 * run)
                out = testbed_exec(
                    args.prefix,
                    args.launch,
                    args.seed,
                    [sys.executable, str(worker), str(files[k]), *sizes, port],
                    engine="gloo",
                )
                vals = [float(ln.split()[1]) for ln in out.splitlines() if "xgb_its" in ln]
                its[k].append(vals[0])
                print(f"{k}: {vals[0]:.3f} it/s", flush=True)
        base = statistics.median(its["launch"])
        rows = []
        for k, o in orders.items():
            med = statistics.median(its[k])
            rows.append(
                {
                    "order": k,
                    "median_its": med,
                    "its": its[k],
                    "speedup": med / base,
                    "permutation": [int(x) for x in o],
                }
            )
            print(f"{k:<10} {med:8.3f} it/s  x{med / base:5.2f}  {its[k]}")
        if args.output:
            report = {"args": vars(args), "modelled_speedup": res.speedup, "rows": rows}
            Path(args.output).write_text(json.dumps(report, indent=1))
    finally:
        testbed_down(args.prefix)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
