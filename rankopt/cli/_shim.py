"""``rankopt shim build`` and ``rankopt run-mpi``: reorder unmodified compiled MPI programs."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

from rankopt.adapters import shim
from rankopt.cli import CLIError

__all__ = ["register", "run", "run_mpi"]

_RUN_MPI_EPILOG = """\
example:
  rankopt solve latency.npy --order-out order.txt
  rankopt run-mpi --order order.txt -- mpiexec -n 8 ./app

Solving here, for the job's own mix of calls (rankopt profile):
  rankopt profile -o app.json -- mpiexec -n 8 ./app
  rankopt run-mpi --network net.npz --workload app.json -- mpiexec -n 8 ./app

The same by hand (Open MPI):
  mpiexec -n 8 -x LD_PRELOAD=$(rankopt shim build) -x RANKOPT_ORDER=$PWD/order.txt ./app
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "shim",
        help="build the LD_PRELOAD shim that reorders unmodified MPI programs",
        description="Build librankopt_shim.so with the MPI's compiler wrapper and print its "
        f"path. Built libraries are cached in {shim.cache_dir()} (set RANKOPT_CACHE_DIR to "
        "move it), one per MPI library and version.",
    )
    actions = p.add_subparsers(
        dest="shim_action", metavar="ACTION", help="what to do (ACTION -h for its options)"
    )
    actions.required = True
    b = actions.add_parser("build", help="build (or find in the cache) the shim; print its path")
    b.add_argument(
        "--mpicc",
        help="MPI C compiler wrapper (default: $MPICC, mpicc on PATH, "
        "mpicc next to mpiexec or python)",
    )
    b.add_argument("-o", "--outdir", help="write the library here instead of the cache")
    b.add_argument("--force", action="store_true", help="rebuild a cached library")
    b.set_defaults(func=run)

    r = sub.add_parser(
        "run-mpi",
        help="run an unmodified MPI program with its ranks reordered",
        description="Run COMMAND (an mpiexec/mpirun/srun line) with the rankopt shim preloaded,\n"
        "so that the program's MPI_COMM_WORLD is renumbered by the order file:\n"
        "new rank k is the process launched as rank order[k]. The program is not changed.",
        epilog=_RUN_MPI_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument(
        "--order",
        help="order file (text, .npy or .json) as written by "
        "`rankopt solve --order-out`; default $RANKOPT_ORDER, else no reordering",
    )
    r.add_argument(
        "--network",
        metavar="FILE",
        help="solve the order here instead of reading one: a probe, cloud or network .npz, "
        "priced with the model options below (--workload: a `rankopt profile` file; default "
        "engine: the shim's MPI library)",
    )
    r.add_argument("--shim", help="shim library to use (default: build or reuse the cached one)")
    r.add_argument("--mpicc", help="MPI C compiler wrapper used to build the shim")
    r.add_argument(
        "--propagate",
        choices=("auto", "x", "env"),
        default="auto",
        help="pass the variables with Open MPI's -x (x), through the launcher's "
        "environment (env), or pick by launcher (auto, default)",
    )
    r.add_argument(
        "--verify",
        action="store_true",
        help="first time the collective in the launch order and in the order with `rankopt "
        "verify` (the same launcher and options, mpi4py), and run the program in the order "
        "only if it measurably wins; else in the launch order",
    )
    from rankopt._model_args import add_direction_trial_option

    add_direction_trial_option(r)
    r.add_argument("-v", "--verbose", action="store_true", help="rank 0 reports what the shim did")
    r.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    r.add_argument(
        "launch",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="launch command, after --: mpiexec -n N ./app ...",
    )
    from rankopt._model_args import add_model_arguments
    from rankopt.network.core import DEFAULT_NBYTES

    add_model_arguments(r, default_nbytes=DEFAULT_NBYTES, default_engine="mpi")
    from rankopt.cli._verify import add_verify_arguments

    add_verify_arguments(r)
    r.set_defaults(func=run_mpi)


def _say(prog: str, args: argparse.Namespace) -> Any:
    from rankopt._progress import Progress

    return Progress(prog, enabled=not getattr(args, "quiet", False)).say


def run(args: argparse.Namespace) -> int:
    """``rankopt shim build``."""
    try:
        lib = shim.build(
            mpicc=args.mpicc, outdir=args.outdir, force=args.force, say=_say("rankopt shim", args)
        )
    except shim.ShimBuildError as exc:
        raise CLIError(str(exc).splitlines()[0]) from exc
    print(lib)
    return 0


def run_mpi(args: argparse.Namespace) -> int:
    """``rankopt run-mpi``."""
    command = list(args.launch)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise CLIError(
            "no command given; usage: rankopt run-mpi --order FILE -- mpiexec -n N ./app"
        )
    try:
        lib = args.shim or shim.build(mpicc=args.mpicc, say=_say("rankopt run-mpi", args))
    except shim.ShimBuildError as exc:
        raise CLIError(str(exc).splitlines()[0]) from exc
    if args.shim and not os.path.isfile(args.shim):  # --dry-run too: none that preloads nothing
        shim.check_library(args.shim)  # raises, naming it: missing, a folder
    if args.network is not None:
        if args.order:
            raise CLIError("give --order or --network (to solve one), not both")
        order: str | None = _solve_order(args, lib, command)
    elif args.workload is not None:
        raise CLIError("--workload needs --network: the network to solve the order on")
    else:
        order = args.order or os.environ.get("RANKOPT_ORDER") or None
    if order is None and not args.quiet:
        print(
            "rankopt run-mpi: no --order and no RANKOPT_ORDER: MPI_COMM_WORLD is left as launched",
            file=sys.stderr,
        )
    if args.verify:
        if order is None:
            raise CLIError("--verify needs an order to time: give --order or --network")
        if not args.dry_run:
            order = _verified(args, command, order)
    if args.dry_run:
        path = None if order is None else shim.order_text_file(order)
        argv, env = shim.launch_command(
            command, path, shim=lib, propagate=args.propagate, verbose=args.verbose
        )
        extra = {
            k: env[k]
            for k in ("LD_PRELOAD", "RANKOPT_ORDER", "RANKOPT_SHIM_VERBOSE")
            if k in env and env.get(k) != os.environ.get(k)
        }
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in extra.items())
        print((prefix + " " if prefix else "") + shlex.join(argv))
        return 0
    return shim.run_mpi(command, order, shim=lib, propagate=args.propagate, verbose=args.verbose)


def _shim_engine(lib: str | os.PathLike[str]) -> str:
    """``openmpi`` or ``mpich``: the MPI library the shim was built for (its build.json)."""
    import json
    from pathlib import Path

    try:
        label = json.loads((Path(lib).parent / "build.json").read_text()).get("mpi", "")
    except (OSError, ValueError):
        label = ""
    from rankopt.engines import from_library

    return from_library(label).name


def _solve_order(args: argparse.Namespace, lib: str | os.PathLike[str], command: list[str]) -> str:
    """``run-mpi --network``: solve with the model options, time the ring's direction
    where the solve left it open (:func:`_direction_trial`), write the order, return
    its path."""
    from rankopt._model_args import model_options, report
    from rankopt.adapters._common import order_digest, save_order
    from rankopt.network.core import load_network
    from rankopt.solvers import solve

    net = load_network(args.network)
    if args.engine == "mpi" or (args.engine is None and not args.algorithm_given):
        args.engine = _shim_engine(lib)
    opts = model_options(args, net, solver=True)
    res = solve(net, args.collective, args.algorithm, **opts)
    if args.direction_trial and not args.dry_run:
        res = _direction_trial(args, command, res)
    if not args.quiet:
        print(report(res, list(net.hosts) if net.hosts is not None else None), file=sys.stderr)
    name = f"order-{len(res.order)}-{order_digest(res.order)}.txt"
    path = shim.cache_dir().parent / "orders" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    save_order(path, res.order, what="order")
    return os.fspath(path)


def _direction_trial(args: argparse.Namespace, command: list[str], res: Any) -> Any:
    """``res`` after the ring-direction trial (:mod:`rankopt.adapters.direction`), where
    the solve recorded the other way round: a job of its own
    (:mod:`rankopt.cli._direction_job`) under the program's launcher and launcher
    options times both orders with the MPI collective; the other way round is applied
    when it wins. ``res`` as it is when there is nothing to time; with a note and a
    warning when the trial job fails (the order found is then applied untimed)."""
    import json

    import numpy as np

    from rankopt._validation import RankoptInputError
    from rankopt.adapters import direction
    from rankopt.adapters.mpi import DEFAULT_TIMEOUT

    plan = direction.plan(res)
    if plan is None:
        return res
    try:
        launcher, _ = shim.split_launch(command)
    except RankoptInputError as exc:
        raise CLIError(str(exc)) from exc

    def argv_of(work: Path, out: Path) -> list[str]:
        spec = work / "trial.json"
        body = {"order": [int(x) for x in res.order], "trial": plan, "timeout": DEFAULT_TIMEOUT}
        spec.write_text(json.dumps(body))
        return [*launcher, sys.executable, "-m", "rankopt.cli._direction_job", str(spec), str(out)]

    # each of its calls (per visit of each order, one untimed and TRIAL_BLOCK timed)
    # has DEFAULT_TIMEOUT
    calls = direction.TRIAL_VISITS * 2 * (direction.TRIAL_BLOCK + 1)
    wall = HELPER_JOB_START_S + calls * DEFAULT_TIMEOUT
    argv, what, text, verdict = _launcher_job(argv_of, "rankopt-direction-", wall)
    if verdict is None:
        # a trial that could not run leaves the order found, as --no-direction-trial
        # does; the program's own launch then meets whatever stopped it
        line = (
            f"ring direction not timed: the trial job failed ({what}: {_last_words(text)}); "
            "the order found applied"
        )
        print(f"rankopt run-mpi: warning: {line}; it ran: {shlex.join(argv)}", file=sys.stderr)
        return direction.noted(res, line)
    line = str(verdict["line"])
    if verdict["alternative_wins"]:
        alt = np.asarray(plan["alternative"], dtype=np.int64)
        return direction.applied(res, alt, float(plan["cost"]), line)
    return direction.noted(res, line)


#: Seconds a helper job of ``run-mpi`` (the direction trial, ``--verify``) may take
#: to start under the program's launcher, on top of its own steps' deadlines: past
#: both, the launcher is stopped (it hangs, e.g. on a host that never answers) and
#: the job counts as failed, never as a hang of ``run-mpi``.
HELPER_JOB_START_S = 120.0
#: Seconds given to a stopped launcher to end its processes after SIGTERM (then SIGKILL).
HELPER_JOB_GRACE_S = 5.0


def _launcher_job(
    argv_of: Callable[[Path, Path], list[str]], prefix: str, wall_s: float
) -> tuple[list[str], str | None, str, Any]:
    """Run a helper job under the program's launcher, in a temporary folder removed
    after: ``argv_of(folder, out)`` is its command line, which writes JSON to ``out``.

    The job has ``wall_s`` seconds; past them its whole process group (the launcher
    and what it started here) gets SIGTERM, then SIGKILL after
    :data:`HELPER_JOB_GRACE_S`. Returns ``(argv, what went wrong (None when it
    succeeded: "exit N", "not started", "stopped after S s"), its stderr or else
    stdout, the JSON written with the job's stdout under "stdout", or None when it
    failed)``."""
    import json
    import os
    import signal
    import subprocess
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix=prefix) as work:
        out = Path(work) / "out.json"
        argv = argv_of(Path(work), out)
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        except OSError as exc:  # the launcher itself could not start
            return argv, "not started", str(exc), None
        try:
            stdout, stderr = proc.communicate(timeout=wall_s)
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, HELPER_JOB_GRACE_S), (signal.SIGKILL, None)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    stdout, stderr = proc.communicate(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            else:
                stdout, stderr = proc.communicate()
            text = (stderr or "").strip() or (stdout or "").strip()
            return argv, f"stopped after {wall_s:g} s", text, None
        text = stderr.strip() or stdout.strip()
        if proc.returncode != 0 or not out.is_file():
            return argv, f"exit {proc.returncode}", text, None
        doc = json.loads(out.read_text())
    return argv, None, text, {**doc, "stdout": stdout}


def _last_words(text: str) -> str:
    """The line of a failed job's output that says most: the last one from rankopt,
    else the last naming an error, else the last non-empty one (a launcher's own
    messages on an abort come after the reason)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for pattern in (r"rankopt", r"error|timed out|abort"):
        for ln in reversed(lines):
            if re.search(pattern, ln, re.I):
                return ln
    return lines[-1] if lines else "no output"


def _verified(args: argparse.Namespace, command: list[str], order: str) -> str | None:
    """``run-mpi --verify``: the order if ``rankopt verify`` says it wins, else None.

    The timing job runs under the same launcher and launcher options as the
    program (:func:`rankopt.adapters.shim.split_launch`), with this Python and
    mpi4py in place of the program, so it sees the same placement.
    """

    from rankopt._validation import RankoptInputError
    from rankopt.adapters.verify_stats import check_timing, parse_sizes

    try:
        sizes = parse_sizes(args.sizes) if args.sizes is not None else None
        check_timing(
            sizes, args.repeats, args.budget, args.verify_timeout, None, flags=True,
            min_gain=args.min_gain, block=args.block,
        )  # fmt: skip
        launcher, _ = shim.split_launch(command)
    except RankoptInputError as exc:
        raise CLIError(str(exc)) from exc

    def argv_of(work: Path, out: Path) -> list[str]:
        argv = [*launcher, sys.executable, "-m", "rankopt", "verify", "--order", str(order)]
        argv += ["--collective", args.collective, "--json", str(out)]
        argv += ["--budget", f"{args.budget:g}", "--verify-timeout", f"{args.verify_timeout:g}"]
        argv += ["--min-gain", f"{args.min_gain:g}", "--block", str(args.block)]
        argv += ["--sizes", args.sizes] if args.sizes else []
        argv += ["--repeats", str(args.repeats)] if args.repeats else []
        argv += ["--workload", str(args.workload)] if args.workload else []
        return argv

    # its timing has --budget seconds, and each of its steps --verify-timeout
    wall = HELPER_JOB_START_S + args.budget + 4 * args.verify_timeout
    argv, what, text, doc = _launcher_job(argv_of, "rankopt-verify-", wall)
    if doc is None:
        tail = text.strip().splitlines()[-1:] or ["no output"]
        raise CLIError(
            f"--verify: the timing job failed ({what}: {tail[0]}); it ran: {shlex.join(argv)}"
        )
    verdict = doc["verdict"]
    if not args.quiet:
        print(doc["stdout"].rstrip(), file=sys.stderr)
    if verdict == "apply":
        if not args.quiet:
            print("rankopt run-mpi: verified: applied", file=sys.stderr)
        return order
    print(f"rankopt run-mpi: verified: {verdict}: the launch order is kept", file=sys.stderr)
    return None
