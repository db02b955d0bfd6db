"""``rankopt compare MATRIX``: every applicable method side by side."""

from __future__ import annotations

import argparse
import json

from rankopt._model_args import (
    add_json_option,
    check_json_destination,
    seconds_value,
    seed_value,
    write_json,
)
from rankopt._validation import RankoptInputError
from rankopt.cli._common import add_problem_args, problem_kwargs, read_network, table
from rankopt.solvers import METHODS, solve

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="run every applicable method on a matrix: cost, speedup, time",
        description="Solve the same problem with every registered method that applies and print "
        "a table (methods that do not apply, e.g. exact ones for large n, are listed as skipped).",
    )
    add_problem_args(p)
    p.add_argument("--seed", type=seed_value, default=0, help="solver seed of every method")
    p.add_argument(
        "--time-limit",
        type=seconds_value,
        default=10.0,
        help="wall-clock guard per method, seconds",
    )
    p.add_argument("--methods", default=None, help="comma-separated subset of methods")
    add_json_option(p, "the rows (printed in place of the table when no FILE is given)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankopt.cli._solve import check_not_an_input

    check_json_destination(args.json)
    if args.json and args.json != "-":
        check_not_an_input(args, "--json", args.json)
    net, _ = read_network(args)
    lat = net.latency
    if args.methods is not None and not args.methods.strip():
        raise RankoptInputError(
            f"--methods names no method; the methods are {', '.join(sorted(METHODS))} "
            "(leave --methods out to compare them all)."
        )
    names = (
        [m.strip() for m in args.methods.split(",")]
        if args.methods
        else [m for m in sorted(METHODS) if m != "auto"] + ["auto"]
    )
    unknown = [m for m in names if m not in METHODS]
    if unknown:  # before any solve: the flag named, every method listed
        raise RankoptInputError(
            f"--methods: unknown method {unknown[0]!r}; the methods are "
            f"{', '.join(sorted(METHODS))}."
        )
    extra = problem_kwargs(args, net)
    rows, skipped, errors = [], [], []
    for name in names:
        try:
            res = solve(
                net,
                args.collective,
                args.algorithm,
                method=name,
                rng=args.seed,
                time_limit=args.time_limit,
                **extra,
            )
        except RankoptInputError as exc:
            if args.methods:
                raise
            skipped.append((name, str(exc).split(";")[0]))
            errors.append(exc)
            continue
        rows.append(res)
    if not rows and len({str(e) for e in errors}) == 1:
        raise errors[0]  # every method refused the same option or input: say it once
    if not rows:
        raise RankoptInputError(
            "no method applies to this problem: " + "; ".join(s for _, s in skipped)
        )
    best = min(r.cost for r in rows)
    if args.json:
        write_json(args.json, json.dumps([{**r.to_dict(), "vs_best": r.cost / best} for r in rows]))
        if args.json == "-":
            return 0
    print(
        f"n={len(lat)}, {rows[0].collective}/{rows[0].algorithm}, objective={rows[0].objective}, "
        f"launch-order cost {rows[0].baseline_cost:.6g}"
    )
    body = [
        (
            r.method if r.method == name else f"{name} ({r.method})",
            f"{r.cost:.6g}",
            f"{r.speedup:.3f}x",
            f"{r.cost / best:.4f}",
            f"{r.runtime_s * 1e3:.1f}",
            r.stop_reason,
        )
        for name, r in zip([n for n in names if n not in dict(skipped)], rows, strict=True)
    ]
    print(table(body, ["method", "cost", "speedup", "vs best", "time (ms)", "stop"]))
    if skipped and not args.quiet:
        for name, why in skipped:
            print(f"skipped {name}: {why}")
    return 0
