"""``rankopt run [options] -- PROGRAM ARGS``: renumber a torch.distributed job, then run it."""

from __future__ import annotations

import argparse

from rankopt.adapters._launch import LaunchError, add_arguments, run_args

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="probe, pick a rank order (rank 0 stays 0) and exec a torch.distributed program "
        "with its new RANK",
        description="Start under torchrun, mpiexec or srun in place of the program: every "
        "process probes the network over a temporary Gloo group, rank 0 solves with rank 0 "
        "pinned, and each process execs PROGRAM with RANK renumbered (LOCAL_RANK and device "
        "binding untouched). Example: torchrun --nproc-per-node 8 --no-python rankopt run -- "
        "python train.py (or: torchrun ... -m rankopt.run -- python train.py)",
    )
    add_arguments(p, quiet=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankopt.cli import CLIError

    try:
        return run_args(args, prog="rankopt run")
    except LaunchError as exc:
        raise CLIError(str(exc)) from exc
