"""``rankopt plot MATRIX``: heatmaps, the ring over the hierarchy, convergence."""

from __future__ import annotations

import argparse
from pathlib import Path

from rankopt.cli import CLIError
from rankopt.cli._common import add_matrix_args, read_inputs
from rankopt.solvers import solve

__all__ = ["register", "run"]

KINDS = ("heatmap", "ring", "convergence")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plot",
        help="draw the matrix before/after, the ring over the hierarchy, the convergence",
        description="Solve ring allreduce on MATRIX and draw pictures (PNG or SVG, by extension). "
        "With --kind all, OUTPUT is a stem: OUTPUT-heatmap.png, OUTPUT-ring.png, OUTPUT-convergence.png.",
    )
    add_matrix_args(p)
    p.add_argument(
        "-o", "--output", required=True, help="image file (.png/.svg) or stem with --kind all"
    )
    p.add_argument("--kind", default="all", choices=KINDS + ("all",), help="which picture to draw")
    p.add_argument(
        "--objective",
        default=None,
        choices=("sum", "bottleneck", "time", "contention"),
        help="objective of the solve drawn (default: the ring's latency sum)",
    )
    p.add_argument("--method", default="ils", help="solver method of the order drawn")
    p.add_argument("--seed", type=int, default=0, help="solver seed")
    p.add_argument("--dpi", type=int, default=110, help="resolution of PNG output (dots per inch)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankopt import plot

    lat, _, groups, _ = read_inputs(args)
    res = solve(lat, objective=args.objective, method=args.method, rng=args.seed)
    out = Path(args.output)
    kinds = KINDS if args.kind == "all" else (args.kind,)
    suffix = out.suffix if out.suffix in (".png", ".svg") else ".png"
    if args.kind != "all" and out.suffix not in (".png", ".svg"):
        raise CLIError(f"--output must end in .png or .svg; got {str(out)!r}")
    written = []
    for kind in kinds:
        if kind == "heatmap":
            fig = plot.heatmap(lat, res.order)
        elif kind == "ring":
            fig = plot.ring(lat, res.order, groups)
        else:
            fig = plot.convergence(res)
        path = (
            out
            if len(kinds) == 1
            else out.with_name(f"{out.stem if out.suffix else out.name}-{kind}{suffix}")
        )
        fig.savefig(path, dpi=args.dpi)
        written.append(str(path))
    if not args.quiet:
        print(f"speedup {res.speedup:.3f}x ({res.method}); wrote " + ", ".join(written))
    return 0
