"""Helpers shared by subcommands: reading inputs, tables, progress."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from rankopt.network.io import load_matrix_and_labels

__all__ = [
    "add_matrix_args",
    "add_problem_args",
    "problem_kwargs",
    "solve_as_asked",
    "Inputs",
    "read_inputs",
    "table",
    "progress",
    "report_job_error",
    "require_ranks",
]


def add_matrix_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("matrix", help="latency matrix (.npy, .csv, .json) or measurement/cloud .npz")
    p.add_argument(
        "--unit",
        default=None,
        choices=["s", "ms", "us", "ns"],
        help="unit of the matrix values (default: the unit the file states, else seconds)",
    )
    p.add_argument("--rtt", action="store_true", help="values are round-trip times (halve them)")
    p.add_argument(
        "--nan",
        default="raise",
        choices=["raise", "symmetric", "max", "mean"],
        help="policy for missing entries (default: raise)",
    )


def add_problem_args(p: argparse.ArgumentParser) -> None:
    """The matrix arguments plus what defines the problem (the shared model options)."""
    from rankopt._model_args import add_model_arguments
    from rankopt.network.core import DEFAULT_NBYTES

    add_matrix_args(p)
    add_model_arguments(p, default_nbytes=DEFAULT_NBYTES, solver=False)


def solve_as_asked(args: argparse.Namespace, network: Any, **extra: Any) -> Any:
    """``solve()`` as the command line asks: the shared model and solver options.

    ``rankopt solve`` and ``rankopt plot`` call it alike, so the picture is of
    the order ``solve`` gives with the same flags; ``extra`` adds what only one
    of them has (``max_iter``, ``keep_rank0``, ``callback``).
    """
    from rankopt._model_args import model_options
    from rankopt.solvers import solve

    return solve(
        network,
        args.collective,
        args.algorithm,
        nan=args.nan,
        **model_options(args, network, solver=True),
        **extra,
    )


def problem_kwargs(args: argparse.Namespace, network: Any) -> dict[str, Any]:
    """Keyword arguments of ``solve()`` describing the model chosen on the command line."""
    from rankopt._model_args import model_options

    return model_options(args, network)


class Inputs(NamedTuple):
    """What a matrix file holds: latency (s), and where stored, bandwidth (bytes/s),
    hierarchy groups (finest first) and host names."""

    latency: np.ndarray
    bandwidth: np.ndarray | None
    groups: list[np.ndarray] | None
    hosts: list[str] | None


def read_network(args: argparse.Namespace) -> tuple[Any, list[str] | None]:
    """The command's file as a :class:`rankopt.Network`, and the names to write files with.

    ``.npz`` files (probe, cloud, network) carry hosts, bandwidth and the
    hierarchy (inferred when absent); other matrix files are read with
    ``--unit``, ``--nan`` and ``--rtt``, and their header names (if any)
    label the processes in rankfiles.
    """
    from rankopt.network.core import Network, load_network

    if str(args.matrix).endswith(".npz") and args.unit is None and not args.rtt:
        net = load_network(args.matrix)
        if args.nan == "raise":  # a missing entry is refused here, the file named
            from rankopt._validation import RankoptInputError, check_matrix

            try:
                check_matrix(net.latency, "latency", copy=False, dtypes=(net.latency.dtype,))
            except RankoptInputError as exc:
                raise RankoptInputError(f"network file '{args.matrix}': {exc}") from None
        names = list(net.hosts) if net.hosts is not None else None
        return net, names
    lat, labels = load_matrix_and_labels(args.matrix, unit=args.unit, nan=args.nan, rtt=args.rtt)
    lat.setflags(write=False)  # ours alone: the Network keeps it instead of a copy
    net = Network.from_matrices(lat, source=f"file:{args.matrix}")
    return net, labels


def read_inputs(args: argparse.Namespace) -> Inputs:
    """Read the command's matrix file (``args.matrix``, ``--unit``, ``--nan``, ``--rtt``)."""
    net, names = read_network(args)
    groups = list(net.groups) if net.groups else None
    return Inputs(np.array(net.latency), net.bandwidth, groups, names)


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A plain aligned text table (numbers right-aligned)."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(len(header))]
    numeric = [all(_isnum(r[k]) for r in cells[1:]) for k in range(len(header))]
    lines = []
    for i, r in enumerate(cells):
        lines.append(
            "  ".join(
                c.rjust(w) if numeric[k] else c.ljust(w)
                for k, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _isnum(s: str) -> bool:
    try:
        float(s.rstrip("x%"))
        return True
    except ValueError:
        return False


@contextmanager
def progress(label: str, enabled: bool) -> Iterator[Callable[[dict[str, Any]], None] | None]:
    """Progress of a solve, fed by solve()'s callback (:class:`rankopt._progress.Progress`).

    A bar on a terminal; elsewhere a line every few seconds of a long solve.
    Yields ``None`` (no callback) when disabled.
    """
    if not enabled:
        yield None
        return
    from rankopt._progress import Progress

    shown = Progress(label, enabled=True)
    shown.start("solving", 0, "iterations")

    def update(info: dict[str, Any]) -> None:
        shown.update(int(info["iteration"]), f"best {info['cost']:.6g}")

    try:
        yield update
    finally:
        shown.finish()


def require_ranks(n: int, prog: str, launcher: str = "mpiexec -n N") -> None:
    """The one message for a command that needs a job and was started alone.

    Examples
    --------
    >>> require_ranks(1, "rankopt check")
    Traceback (most recent call last):
    ...
    rankopt.cli.CLIError: rankopt check needs at least 2 processes and runs as 1; start it with `mpiexec -n N`.
    """
    if n < 2:
        from rankopt.cli import CLIError

        raise CLIError(
            f"{prog} needs at least 2 processes and runs as {n}; start it with `{launcher}`."
        )


def report_job_error(world: Any, exc: BaseException, prog: str) -> int:
    """Print ``exc`` once for the whole job (``python -m rankopt.mpi``); the exit status.

    The lowest rank that answered prints. When a rank was silent, the job then ends
    through ``MPI_Abort`` at exit (see :class:`rankopt.adapters.mpi.RankoptMPIError`), so the other ranks
    first wait up to :data:`rankopt.adapters.mpi.FAREWELL` seconds for the printing
    rank to end the job.
    """
    import time

    from rankopt.adapters.mpi import FAREWELL

    silent = set(getattr(exc, "silent", ()))
    printer = next((r for r in range(world.Get_size()) if r not in silent), 0)
    if world.Get_rank() == printer:
        print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
    elif silent:
        time.sleep(FAREWELL)
    return 1
