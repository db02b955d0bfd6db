"""``rankopt solve MATRIX``: find the best rank order for a measured matrix."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from rankopt.io import load_matrix
from rankopt.result import SolveResult
from rankopt.solvers import METHODS, solve

__all__ = ["register", "run", "write_order"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "solve",
        help="find the rank order that minimises a collective's modelled time",
        description="Read a latency matrix (.npy, .csv, .json, or a probe .npz), solve, and print "
        "the order (order[k] = original rank of the process that gets new rank k).",
    )
    p.add_argument("matrix", help="latency matrix file")
    p.add_argument("--collective", default="allreduce")
    p.add_argument("--algorithm", default="ring")
    p.add_argument("--objective", default=None, help="default: sum (ring, latency only)")
    p.add_argument("--method", default="auto", choices=sorted(METHODS))
    p.add_argument("--seed", type=int, default=None, help="random seed (recorded in --json)")
    p.add_argument("--time-limit", type=float, default=None, help="seconds (a guard)")
    p.add_argument("--max-iter", type=int, default=None, help="iteration budget (reproducible)")
    p.add_argument("--unit", default=None, help="unit of the matrix values: s, ms, us, ns")
    p.add_argument("--rtt", action="store_true", help="values are round-trip times (halve them)")
    p.add_argument(
        "--nan",
        default="raise",
        choices=["raise", "symmetric", "max", "mean"],
        help="policy for missing entries (default: raise)",
    )
    p.add_argument("--keep-rank0", action="store_true", help="keep original rank 0 at new rank 0")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--order-out", metavar="FILE", help="write the order, one rank per line")
    p.set_defaults(func=run)


def write_order(order, path: str | os.PathLike[str]) -> None:
    """Write an order atomically, one integer per line."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=p.name + ".", dir=p.parent or ".")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write("".join(f"{int(x)}\n" for x in order))
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def run(args: argparse.Namespace) -> int:
    lat = load_matrix(args.matrix, unit=args.unit, nan=args.nan, rtt=args.rtt)
    res: SolveResult = solve(
        lat,
        args.collective,
        args.algorithm,
        objective=args.objective,
        method=args.method,
        rng=args.seed,
        time_limit=args.time_limit,
        max_iter=args.max_iter,
        keep_rank0=args.keep_rank0,
    )
    if args.order_out:
        write_order(res.order, args.order_out)
    if args.json:
        json.dump(res.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    elif args.quiet:
        print(" ".join(str(int(x)) for x in res.order))
    else:
        print(res.summary())
        print(" ".join(str(int(x)) for x in res.order))
    return 0
