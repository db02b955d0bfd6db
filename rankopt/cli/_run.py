"""``rankopt run [options] -- PROGRAM ARGS`` (and ``python -m rankopt.run``): renumber a
torch.distributed job with :func:`rankopt.adapters._launch.launch`, then exec the program."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from rankopt._validation import RankoptInputError
from rankopt.adapters._env import detect
from rankopt.adapters._launch import LaunchError, LaunchOptions, add_arguments, child_env, launch

__all__ = ["register", "run", "run_args", "main"]


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


def run_args(args: argparse.Namespace, *, prog: str = "rankopt run") -> int:
    """Run the launcher for parsed options; execs the program (returns only on error)."""
    command = list(args.program)
    if command and command[0] == "--":
        command = command[1:]
    if not command and not args.dry_run:
        raise RankoptInputError(f"missing program: {prog} [options] -- PROGRAM ARGS")
    if command and command[0].endswith(".py") and not os.access(command[0], os.X_OK):
        command = [sys.executable, *command]  # "-- train.py" as torchrun would run it
    info = detect(os.environ, master_addr=args.master_addr, master_port=args.master_port)
    decision = launch(LaunchOptions.from_args(args))
    if decision.error:
        print(f"{prog}: {decision.error}; running with the launch order", file=sys.stderr)
    if info.rank == 0 and not getattr(args, "quiet", False):
        print(f"{prog}: {info.world_size} ranks\n{decision.summary}", file=sys.stderr)
    env = child_env(os.environ, info, decision)
    if args.dry_run:
        print(
            f"RANK {info.rank} -> {decision.new_rank} host {decision.hosts[info.rank]}", flush=True
        )
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        raise RankoptInputError(f"cannot run {command[0]!r}: {exc}") from exc
    return 127  # not reached


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rankopt.run [options] -- program args``."""
    p = argparse.ArgumentParser(
        prog="python -m rankopt.run",
        description="Renumber the ranks of a torch.distributed job to follow the measured "
        "network, then run the program with its new RANK. Start it with torchrun, "
        "mpiexec or srun in place of the program.",
    )
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run_args(args, prog="rankopt.run")
    except (RankoptInputError, LaunchError) as exc:
        print(f"rankopt.run: error: {exc}", file=sys.stderr)
        return 1
