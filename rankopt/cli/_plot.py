"""``rankopt plot MATRIX``: the hierarchy, heatmaps, the ring over the hierarchy, convergence.

The order drawn is the one ``rankopt solve`` prints for the same file and
flags: the network is read the same way (hosts, bandwidth, inferred
hierarchy) and solved with the same defaults, so the pictures and the
report agree on the hierarchy and the gain.
"""

from __future__ import annotations

import argparse
import os
from functools import partial
from pathlib import Path
from typing import Any

from rankopt._files import atomic_write, check_output_path
from rankopt._limits import MAX_DPI, check_bound
from rankopt.cli import CLIError
from rankopt.cli._common import add_matrix_args, read_network, solve_as_asked

__all__ = ["register", "run"]

KINDS = ("hierarchy", "heatmap", "ring", "convergence")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plot",
        help="draw the inferred hierarchy, the matrix before/after, the ring over the "
        "hierarchy, the convergence",
        description="Solve MATRIX as `rankopt solve` does with the same flags and draw "
        "pictures (PNG or SVG, by extension): the matrix ordered and boxed by the hierarchy "
        "solve() uses, the matrix in launch and new order, the ring over the hierarchy, and "
        "the cost against solve time. With --kind all, OUTPUT is a stem: OUTPUT-hierarchy.png, "
        "OUTPUT-heatmap.png, OUTPUT-ring.png, OUTPUT-convergence.png.",
    )
    from rankopt._model_args import add_model_arguments
    from rankopt.network.core import DEFAULT_NBYTES

    add_matrix_args(p)
    add_model_arguments(p, default_nbytes=DEFAULT_NBYTES)
    p.add_argument(
        "-o", "--output", required=True, help="image file (.png/.svg) or stem with --kind all"
    )
    p.add_argument("--kind", default="all", choices=KINDS + ("all",), help="which picture to draw")
    p.add_argument("--dpi", type=int, default=110, help="resolution of PNG output (dots per inch)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankopt import plot

    if not args.output or args.output.endswith(os.sep):  # Path() would make them '.', a stem
        check_output_path(args.output, what="--output")  # raises: empty, or names a directory
    out = Path(args.output)
    kinds = KINDS if args.kind == "all" else (args.kind,)
    if args.kind != "all" and out.suffix not in (".png", ".svg"):
        raise CLIError(f"--output must end in .png or .svg; got {args.output!r}")
    suffix = out.suffix if out.suffix in (".png", ".svg") else ".png"
    check_bound(args.dpi, "--dpi", MAX_DPI, minimum=1, integer=True)
    paths = {
        kind: (
            out
            if len(kinds) == 1
            else out.with_name(f"{out.stem if out.suffix else out.name}-{kind}{suffix}")
        )
        for kind in kinds
    }
    for path in paths.values():  # a bad target fails before the solve, not after it
        check_output_path(path, what="--output")
    net, _ = read_network(args)
    res = None
    if kinds != ("hierarchy",):
        res = solve_as_asked(args, net)
    written = []
    for kind in kinds:
        if kind == "hierarchy":
            fig = plot.hierarchy(net)
        elif res is None:  # only the hierarchy is drawn without a solve
            continue
        elif kind == "heatmap":
            fig = plot.heatmap(net, res.order)
        elif kind == "ring":
            fig = plot.ring(net, res.order)
        else:
            fig = plot.convergence(res)
        path = paths[kind]
        fmt = path.suffix.lstrip(".") if path.suffix in (".png", ".svg") else "png"
        atomic_write(path, partial(_save, fig, dpi=args.dpi, fmt=fmt), what="--output")
        written.append(str(path))
    if not args.quiet:
        head = f"speedup {res.speedup:.3f}x ({res.method}); " if res is not None else ""
        print(head + "wrote " + ", ".join(written))
    return 0


def _save(fig: Any, fh: Any, *, dpi: float, fmt: str) -> None:
    fig.savefig(fh, dpi=dpi, format=fmt)
