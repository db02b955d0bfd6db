"""Open MPI's Rabenseifner under contention at n = 1,024 and 4,096: solve time and modelled cost.

    python bench/bench_solve_scale.py                  # n = 1024 and 4096 (minutes: old anneal)
    python bench/bench_solve_scale.py --sizes 1024 --repeats 5
    python bench/bench_solve_scale.py --no-old         # without today's anneal (seconds)

For every network: the ring ``sum`` solve of its latency (``solve(latency)``,
the reference time), the default solve of ``rabenseifner_ompi`` -- the
algorithm Open MPI's ``tuned`` runs for a 16 MiB allreduce at these sizes --
under the default model of the network (``"contention"``, 16 MiB, its
uplinks; ``solve(network, "allreduce", "rabenseifner_ompi")``, method
``auto``), and ``method="anneal"``, what ``auto`` ran for it before
``layout`` (one run: it is slow). Times are wall-clock medians over
``--repeats`` runs, ring and new solve interleaved in one process (CPU time
beside them: the machine may be shared). ``x ring`` is the new solve's time
over the ring solve's (target <= 2 at n = 1,024); ``new/old`` the new
solve's modelled cost over the anneal's (<= 1: as good or better).

Networks (launch order random in all):

* ``cloud P,R,H,K``: :func:`rankopt.synthetic_cloud` (P pods x R racks x H
  hosts x K ranks per host, every group the same size), its hierarchy given
  and uplinks inferred from its bandwidth (:meth:`rankopt.Network.from_cloud`);
* ``uneven L/K``: ``tests/_scale_networks.py`` -- racks of 5-24 hosts in pods
  of 2-6 racks (L = 3 levels) or racks only (L = 2), K ranks per host, some
  uplinks loaded by another tenant.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import rankopt
from rankopt.network.core import Network

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _scale_networks import uneven_network  # noqa: E402

ALGORITHM = "rabenseifner_ompi"


def networks(n: int) -> dict[str, Network]:
    """The benchmark's networks of ``n`` processes."""
    if n == 1024:
        return {
            "cloud 4,8,32,1": Network.from_cloud(rankopt.synthetic_cloud(4, 8, 32, 1, rng=1)),
            "cloud 4,8,8,4": Network.from_cloud(rankopt.synthetic_cloud(4, 8, 8, 4, rng=1)),
            "uneven 3/1": uneven_network(1024, levels=3, per_host=1, seed=0),
            "uneven 3/2 (n=1000)": uneven_network(1000, levels=3, per_host=2, seed=1),
            "uneven 2/4": uneven_network(1024, levels=2, per_host=4, seed=2),
        }
    if n == 4096:
        return {
            "cloud 4,8,16,8": Network.from_cloud(rankopt.synthetic_cloud(4, 8, 16, 8, rng=1)),
            "uneven 3/4": uneven_network(4096, levels=3, per_host=4, seed=0),
        }
    return {f"uneven 3/2 (n={n})": uneven_network(n, levels=3, per_host=2, seed=0)}


def timed(fn, *args, **kw):
    """``(result, wall seconds, CPU seconds)`` of one call."""
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kw)
    return out, time.perf_counter() - w, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-old", action="store_true", help="skip today's anneal")
    args = ap.parse_args()
    rankopt.solve(uneven_network(96, seed=0), "allreduce", ALGORITHM)  # imports, first calls
    head = (
        f"{'n':>5} {'network':<20} {'ring s':>7} {'new s':>7} {'x ring':>6} {'cpu x':>6} "
        f"{'method':<7} {'new cost':>10} {'old cost':>10} {'new/old':>7} {'old s':>7}"
    )
    print(f"rankopt {rankopt.__version__}: {ALGORITHM}, contention, 16 MiB; medians of "
          f"{args.repeats}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for n in args.sizes:
        for name, net in networks(n).items():
            ring_w, ring_c, new_w, new_c = [], [], [], []
            for _ in range(args.repeats):
                _, w, c = timed(rankopt.solve, net.latency, rng=0)
                ring_w.append(w)
                ring_c.append(c)
                new, w, c = timed(rankopt.solve, net, "allreduce", ALGORITHM, rng=0)
                new_w.append(w)
                new_c.append(c)
            rw, rc = statistics.median(ring_w), statistics.median(ring_c)
            nw, nc = statistics.median(new_w), statistics.median(new_c)
            old_cost = old_w = float("nan")
            if not args.no_old:
                old, old_w, _ = timed(
                    rankopt.solve, net, "allreduce", ALGORITHM, method="anneal", rng=0
                )
                old_cost = old.cost
            print(
                f"{net.n:>5} {name:<20} {rw:>7.2f} {nw:>7.2f} {nw / rw:>6.2f} {nc / rc:>6.2f} "
                f"{new.method:<7} {new.cost:>10.5g} {old_cost:>10.5g} "
                f"{new.cost / old_cost:>7.3f} {old_w:>7.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
