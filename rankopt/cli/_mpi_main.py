"""Command line of ``python -m rankopt.mpi``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from rankopt.cli._common import report_job_error

__all__ = ["main", "build_parser", "split_argv"]

_USAGE = "python -m rankopt.mpi [options] (pyfile | -m mod | -c cmd) [arg ...]"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m rankopt.mpi",
        usage=_USAGE,
        description="Run an unmodified mpi4py program with MPI.COMM_WORLD replaced by a "
        "communicator whose ranks follow the measured network (probe, solve on rank 0, "
        "MPI_Comm_split). Launch it under mpiexec like the program itself.",
    )
    from rankopt._model_args import add_model_arguments
    from rankopt.network.core import DEFAULT_NBYTES

    add_model_arguments(
        p, default_nbytes=DEFAULT_NBYTES, nbytes_note=", a large allreduce of an MPI program"
    )
    p.add_argument("--keep-rank0", action="store_true", help="keep rank 0 in place")
    p.add_argument(
        "--order",
        metavar="FILE",
        default=None,
        help="apply this order (.npy, .json or text) instead of measuring",
    )
    p.add_argument(
        "--save",
        metavar="FILE",
        default=None,
        help="rank 0 writes the order used (.npy, .json or text)",
    )
    p.add_argument(
        "--rankfile",
        metavar="FILE",
        default=None,
        help="rank 0 writes an Open MPI rankfile for the next launch",
    )
    p.add_argument(
        "--hostfile",
        metavar="FILE",
        default=None,
        help="rank 0 writes a sequential hostfile for the next launch",
    )
    p.add_argument(
        "--probe-option",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="extra keyword for rankopt.probe.mpi.measure (repeatable)",
    )
    from rankopt._model_args import add_entry_outputs

    add_entry_outputs(p, engine="MPI")
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="rank 0 does not print the report (what was modelled, the modelled speedup, the "
        "new rank table) to stderr",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="rank 0 logs to stderr")
    return p


def _flags() -> set[str]:
    """The options of :func:`build_parser` that take no value."""
    return {
        opt
        for action in build_parser()._actions
        if action.nargs == 0
        for opt in action.option_strings
    }


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``argv`` into rankopt options and the program command line.

    The program starts at ``--`` (dropped), ``-m``, ``-c``, ``-`` or the first
    word that is not an option.

    Examples
    --------
    >>> split_argv(["--seed", "3", "prog.py", "--seed", "4"])
    (['--seed', '3'], ['prog.py', '--seed', '4'])
    >>> split_argv(["-v", "-m", "pkg.mod", "x"])
    (['-v'], ['-m', 'pkg.mod', 'x'])
    """
    argv = list(argv)
    flags = _flags()
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            return argv[:i], argv[i + 1 :]
        if tok in ("-m", "-c", "-") or not tok.startswith("-"):
            return argv[:i], argv[i:]
        i += 1 if (tok in flags or "=" in tok) else 2
    return argv, []


def _cpu_list(cpus: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"`` (Open MPI's slot list syntax)."""
    parts, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            parts.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(parts)


def real_bindings(placed: Sequence[tuple[str, Sequence[int], int]]) -> list[str] | None:
    """The slot of every rank when each is bound to its own cores, else ``None``.

    ``placed[r]`` is ``(host, cpus rank r may run on, cpus of its host)``. A
    rank that may run on every cpu of its host is not bound; two ranks of one
    host that share a cpu are not bound to their own cores either. Only then
    is a slot the rank's real binding, and worth writing into a rankfile.

    Examples
    --------
    >>> real_bindings([("a", [0], 2), ("a", [1], 2)])
    ['0', '1']
    >>> real_bindings([("a", [0, 1], 2), ("a", [0, 1], 2)]) is None
    True
    """
    seen: dict[str, set[int]] = {}
    for host, cpus, total in placed:
        if not cpus or len(cpus) >= total or seen.setdefault(host, set()) & set(cpus):
            return None
        seen[host] |= set(cpus)
    return [_cpu_list(sorted(cpus)) for _, cpus, _ in placed]


#: Options that do not shape the result: where rank 0 writes, and how much it says.
_PRIVATE_OPTIONS = ("save", "json", "rankfile", "hostfile", "quiet", "verbose")


def shaping_options(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed options every rank must agree on (all but outputs and verbosity)."""
    return {k: v for k, v in sorted(vars(args).items()) if k not in _PRIVATE_OPTIONS}


def _output_problem(args: argparse.Namespace) -> str | None:
    """Why rank 0 could not write one of its output files, or None (checked before any work)."""
    from rankopt._files import RankoptFileError, check_writable, outputs_problem
    from rankopt._model_args import check_json_destination, workload_input

    try:
        check_json_destination(args.json)
    except (RankoptFileError, ValueError) as exc:
        return str(exc)
    dests = ("save", "rankfile", "hostfile", "json")
    outputs = [(f"--{dest}", getattr(args, dest, None)) for dest in dests]
    for flag, path in outputs[:-1]:  # --json was checked above
        if path is not None and path != "-":
            try:
                check_writable(path, what=flag)
            except RankoptFileError as exc:
                return str(exc)
    # files the job reads: an output over one would destroy it
    inputs = [("--order", getattr(args, "order", None)), workload_input(args)]
    return outputs_problem(outputs, inputs)


def check_program(program: Sequence[str]) -> str | None:
    """Why ``program`` (``pyfile | -m mod | -c cmd``) cannot run, or None.

    A script must be a readable file; a module must be found where ``python -m``
    looks (the current folder, then ``sys.path``).
    """
    from importlib.machinery import PathFinder
    from importlib.util import find_spec

    head = program[0]
    if head in ("-c", "-"):
        return None if head == "-" or len(program) > 1 else "-c needs a command"
    if head == "-m":
        if len(program) < 2:
            return "-m needs a module name"
        top = program[1].split(".")[0]
        if top in sys.builtin_module_names:
            return None
        try:
            spec = PathFinder.find_spec(top, [os.getcwd(), *sys.path]) or find_spec(top)
        except (ImportError, ValueError):
            spec = None
        return None if spec is not None else f"no module named {top!r} (the program's -m module)"
    if not os.path.isfile(head):
        return f"program {head!r} does not exist"
    if not os.access(head, os.R_OK):
        return f"program {head!r} is not readable"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (the program's own on SystemExit)."""
    parser = build_parser()
    opts, program = split_argv(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(opts)
    if not program:
        parser.error("missing program: pyfile | -m mod | -c cmd")
    from rankopt._model_args import cache_option, topology_option
    from rankopt._validation import RankoptInputError
    from rankopt.adapters import mpi as adapter
    from rankopt.adapters._common import parse_options

    problem = check_program(program)  # before any probe or solve, on every rank alike
    if problem:
        parser.exit(1, f"rankopt.mpi: error: {problem}\n")

    try:
        probe_options = parse_options(args.probe_option)
        probe_options.setdefault("cache", cache_option(args))
        topology = topology_option(args)
        if topology is not None:
            probe_options["topology"] = topology
    except RankoptInputError as exc:
        parser.error(str(exc))

    order = order_file = None
    if args.order is not None:
        from rankopt.adapters._common import read_order_file

        try:
            order_file = read_order_file(args.order)
            order = order_file.order
        except RankoptInputError as exc:
            parser.exit(1, f"rankopt.mpi: error: {exc}\n")

    from mpi4py import MPI

    world = MPI.COMM_WORLD
    try:  # the same options on every rank, and outputs rank 0 can write, before any work
        adapter.agree_options(world, shaping_options(args), flags=True)
        problem = world.bcast(_output_problem(args) if world.Get_rank() == 0 else None, root=0)
        if problem:
            raise RankoptInputError(problem)
    except (RankoptInputError, adapter.RankoptMPIError) as exc:
        return report_job_error(world, exc, "rankopt.mpi")
    if args.verbose and world.Get_rank() == 0:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logging.getLogger("rankopt").addHandler(handler)
        logging.getLogger("rankopt").setLevel(logging.INFO)

    from rankopt._model_args import launcher_model_options

    try:
        solve_options: dict[str, Any] = launcher_model_options(args)
    except RankoptInputError as exc:
        parser.exit(1, f"rankopt.mpi: error: {exc}\n")
    if args.keep_rank0:
        solve_options["keep_rank0"] = True
    if not args.direction_trial:
        solve_options["direction_trial"] = False

    hosts = bindings = None
    if args.rankfile or args.hostfile:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        placed = world.allgather((MPI.Get_processor_name(), cpus, os.cpu_count() or 0))
        hosts = [h for h, _, _ in placed]
        bindings = real_bindings(placed)

    if order_file is not None:  # an order solved on other hosts or another size is refused
        from rankopt.adapters._common import check_binding

        here = world.allgather(MPI.Get_processor_name())
        try:
            check_binding(order_file, world.Get_size(), here, what="--order")
        except RankoptInputError as exc:  # the same data on every rank: the same error
            return report_job_error(world, exc, "rankopt.mpi")

    state: dict[str, Any] = {}

    def after_reorder(comm: Any, result: Any = None) -> None:
        state["result"] = result
        if world.Get_rank() != 0:
            return
        from rankopt.adapters._common import save_order
        from rankopt.adapters.writers import write_hostfile, write_rankfile

        # order[k] = rank in the world of the process with new rank k
        order_used = comm.Get_group().Translate_ranks(
            list(range(comm.Get_size())), world.Get_group()
        )
        result = state.get("result")
        if result is not None and not args.quiet:
            from rankopt._model_args import report

            print(report(result), file=sys.stderr, flush=True)
        elif result is None and not args.quiet:
            moved = sum(int(r) != k for k, r in enumerate(order_used))
            source = f"--order {args.order}" if args.order else "rankopt verify's choice"
            print(
                f"rankopt.mpi: applied the order of {source}: {comm.Get_size()} processes, "
                f"{moved} renumbered",
                file=sys.stderr,
                flush=True,
            )
        if result is not None and args.json:
            import json

            from rankopt._model_args import write_json

            write_json(args.json, json.dumps(result.to_dict()))
        if args.save:
            network = None if result is None else result.extra.get("network_object")
            save_order(args.save, order_used, what="--save", network=network, result=result)
        if args.rankfile:
            write_rankfile(args.rankfile, order_used, hosts, slots=bindings, what="--rankfile")
        if args.hostfile:
            write_hostfile(args.hostfile, order_used, hosts, what="--hostfile")

    if args.verify:  # rankopt verify first: the launch order unless the order wins
        from rankopt.adapters.verify import verify_mpi

        try:
            checked = verify_mpi(
                world,
                order,
                args.collective,
                probe_options=probe_options,
                progress=not args.quiet,
                **solve_options,
            )
        except (RankoptInputError, adapter.RankoptMPIError) as exc:
            return report_job_error(world, exc, "rankopt.mpi")
        if world.Get_rank() == 0 and not args.quiet:
            print(checked.table(), file=sys.stderr, flush=True)
        import numpy as np

        chosen = checked.order if checked.applies else range(world.Get_size())
        order = np.asarray(chosen, dtype=np.int64)

    try:
        adapter.run_program(
            program,
            order,
            args.collective,
            args.algorithm,
            probe_options=probe_options,
            on_reorder=after_reorder,
            progress=not args.quiet,
            share_result=False,  # rank 0 alone reads it (after_reorder)
            **solve_options,
        )
    except (RankoptInputError, adapter.RankoptMPIError) as exc:
        # raised alike on every rank: one message, from the lowest rank that answered
        return report_job_error(world, exc, "rankopt.mpi")
    return 0
