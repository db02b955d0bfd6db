"""``rankopt run [options] -- PROGRAM ARGS`` (and ``python -m rankopt.run``): renumber a
torch.distributed job with :func:`rankopt.adapters._launch.launch`, then run the program
(a Python program of this interpreter in this process, anything else exec'd)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence

from rankopt._files import check_output_path
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
    if command:
        check_program(command)
    from rankopt._model_args import check_json_destination

    check_json_destination(getattr(args, "json", None))  # bad targets fail before the probe
    if getattr(args, "save", None) is not None:
        check_output_path(args.save, what="--save")
    _check_outputs_apart(args)
    info = detect(os.environ, master_addr=args.master_addr, master_port=args.master_port)
    inline = python_program(command) if not os.environ.get("RANKOPT_RUN_EXEC") else None
    options = LaunchOptions.from_args(args)
    if inline is not None and not args.dry_run:
        options = dataclasses.replace(options, program_store=True)
    decision = launch(options)
    if decision.error:
        print(f"{prog}: {decision.error}; running with the launch order", file=sys.stderr)
    if info.rank == 0 and not getattr(args, "quiet", False):
        print(f"{prog}: {info.world_size} ranks\n{decision.summary}", file=sys.stderr)
    env = child_env(os.environ, info, decision)
    if args.dry_run:  # rank 0 alone prints the whole map, in launch-rank order
        if info.rank == 0:
            new_of = {int(r): k for k, r in enumerate(decision.order)}
            print(
                "\n".join(
                    f"RANK {r} -> {new_of[r]} host {decision.hosts[r]}"
                    for r in range(info.world_size)
                ),
                flush=True,
            )
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    if inline is not None:
        run_inline(inline, env)  # raises SystemExit with the program's status
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        raise RankoptInputError(f"cannot run {command[0]!r}: {exc}") from exc
    return 127  # not reached


def _check_outputs_apart(args: argparse.Namespace) -> None:
    """Refuse --save or --json naming a file the launcher reads (--order, --latency, the
    workload, the topology files) or the other output: rank 0 would overwrite it."""
    from rankopt._files import outputs_problem
    from rankopt._model_args import workload_input

    outputs = [("--save", getattr(args, "save", None)), ("--json", getattr(args, "json", None))]
    inputs = [workload_input(args)] + [
        (flag, getattr(args, dest, None))
        for dest, flag in (
            ("order", "--order"),
            ("latency", "--latency"),
            ("topology", "--topology"),
            ("topology_aliases", "--topology-aliases"),
        )
    ]
    problem = outputs_problem(outputs, inputs)
    if problem:
        raise RankoptInputError(problem)


def python_program(command: Sequence[str]) -> tuple[str, str, list[str]] | None:
    """``("path", SCRIPT, ARGS)`` or ``("module", NAME, ARGS)`` for a program this interpreter runs.

    Only ``python SCRIPT ...`` and ``python -m MODULE ...`` with this very
    interpreter and no interpreter flags: those run in this process, where
    the probe already imported torch, instead of a new one that imports it
    again (seconds at every start). Anything else is exec'd.

    Examples
    --------
    >>> import sys
    >>> python_program([sys.executable, "train.py", "--lr", "0.1"])
    ('path', 'train.py', ['--lr', '0.1'])
    >>> python_program([sys.executable, "-u", "train.py"]) is None
    True
    """
    import shutil

    if len(command) < 2:
        return None
    exe = shutil.which(command[0]) if os.sep not in command[0] else command[0]
    if exe is None or os.path.realpath(exe) != os.path.realpath(sys.executable):
        return None
    if command[1] == "-m" and len(command) > 2:
        return ("module", command[2], list(command[3:]))
    if command[1].startswith("-"):
        return None
    return ("path", command[1], list(command[2:]))


def run_inline(program: tuple[str, str, list[str]], env: dict[str, str]) -> None:
    """Run ``program`` as ``python`` would, in this process, with ``env``; never returns.

    ``sys.argv``, ``sys.path[0]`` and ``__main__`` are what ``python SCRIPT``
    or ``python -m MODULE`` give; an uncaught exception prints its traceback
    and exits with status 1, ``SystemExit`` keeps its status. Set
    ``RANKOPT_RUN_EXEC=1`` to exec a new interpreter instead.
    """
    import logging
    import runpy
    import traceback

    kind, target, rest = program
    root = logging.getLogger()  # the program's logging.basicConfig must take effect
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [target, *rest]
    if kind == "path":
        sys.path[0] = os.path.dirname(os.path.abspath(target))
    else:
        sys.path[0] = os.getcwd()
    try:
        if kind == "path":
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        traceback.print_exc()
        raise SystemExit(130) from None
    except BaseException:  # noqa: BLE001 - what the interpreter does with it
        traceback.print_exc()
        sys.stderr.flush()
        raise SystemExit(1) from None
    raise SystemExit(0)


def check_program(command: Sequence[str]) -> None:
    """Refuse a program that cannot be run, before any probe or solve.

    The first word must be an executable file (a path) or a command found on
    ``PATH``; for ``python SCRIPT`` and ``python -m MODULE`` the script must
    be a readable file and the module importable by this interpreter.
    """
    import importlib.util
    import shutil
    from importlib.machinery import PathFinder

    exe = command[0]
    found = shutil.which(exe) if os.sep not in exe else (exe if os.access(exe, os.X_OK) else None)
    if found is None or not os.path.isfile(found):
        raise RankoptInputError(f"program {exe!r} not found or not executable.")
    if os.path.basename(found).startswith("python") and len(command) > 1:
        arg = command[1]
        same = os.path.realpath(found) == os.path.realpath(sys.executable)
        if arg == "-m" and len(command) > 2 and same:  # another interpreter has its own path
            top = command[2].split(".")[0]
            spec = None
            if top in sys.builtin_module_names:
                return
            try:  # what `python -m` searches: the current folder first, then sys.path
                spec = PathFinder.find_spec(top, [os.getcwd(), *sys.path])
                spec = spec or importlib.util.find_spec(top)
            except (ImportError, ValueError):
                spec = None
            if spec is None:
                raise RankoptInputError(f"no module named {top!r} (the program's `-m` module).")
        elif arg != "-m" and not arg.startswith("-") and not os.path.isfile(arg):
            raise RankoptInputError(f"script {arg!r} does not exist.")


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
