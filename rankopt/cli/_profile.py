"""``rankopt profile -- COMMAND``: record a program's collective calls as a workload file."""

from __future__ import annotations

import argparse
import sys

from rankopt._model_args import add_json_option, check_json_destination, write_json
from rankopt.cli import CLIError

__all__ = ["register", "run"]

_EPILOG = """\
examples:
  rankopt profile -o app.json -- mpiexec -n 8 ./app
  rankopt profile -o train.json -- torchrun --nproc-per-node 4 train.py
  rankopt solve net.npz --workload app.json --order-out order.txt
  rankopt run-mpi --order order.txt -- mpiexec -n 8 ./app

The launchers read the profile with --workload FILE, or from RANKOPT_WORKLOAD=FILE
when --workload is not given; its engine prices the calls unless --engine or
--algorithm says otherwise.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile",
        help="run a program once and record its collective calls as a workload file",
        description="Run COMMAND as launched (ranks unchanged) with rankopt's recorders: the "
        "PMPI shim for MPI programs (mpiexec/mpirun/srun), a hook on torch.distributed for "
        "torch programs (DDP buckets are recorded as allreduce calls). Identical calls "
        "(collective, bytes, communicator size) are counted; the per-process records are "
        "merged into one JSON workload file for --workload.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-o",
        "--output",
        default="rankopt-profile.json",
        metavar="FILE",
        help="profile to write (default: rankopt-profile.json)",
    )
    p.add_argument(
        "--kind",
        choices=("auto", "mpi", "torch"),
        default="auto",
        help="recorders: mpi = the shim and the torch hook, torch = the hook only "
        "(default: auto, mpi for an MPI launcher)",
    )
    p.add_argument("--keep", metavar="DIR", help="keep the per-process files in DIR")
    p.add_argument("--shim", help="shim library to use (default: build or reuse the cached one)")
    p.add_argument("--mpicc", help="MPI C compiler wrapper used to build the shim")
    add_json_option(p, "the profile (printed in place of the summary when no FILE is given)")
    p.add_argument(
        "launch",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="launch command, after --: mpiexec -n N ./app ...",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``rankopt profile``."""
    import json

    from rankopt.adapters import shim
    from rankopt.adapters.profile import run_profile

    check_json_destination(args.json)
    command = list(args.launch)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise CLIError("no command given; usage: rankopt profile -o FILE -- mpiexec -n N ./app")
    try:
        status, prof = run_profile(
            command, args.output, kind=args.kind, shim=args.shim, mpicc=args.mpicc, keep=args.keep
        )
    except shim.ShimBuildError as exc:
        raise CLIError(str(exc).splitlines()[0]) from exc
    if prof is None:
        print(f"rankopt profile: the command failed (exit {status}); no profile", file=sys.stderr)
        return status or 1
    if args.json:
        write_json(args.json, json.dumps(prof.to_dict()))
    if args.json != "-" and not args.quiet:
        print(prof.summary())
        print(f"wrote {args.output}")
    if status != 0:
        print(f"rankopt profile: the command exited with status {status}", file=sys.stderr)
    return status
