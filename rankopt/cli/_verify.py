"""``rankopt verify``: measure the real gain of an order on the job's own network."""

from __future__ import annotations

import argparse
import os
from typing import Any

from rankopt.cli._common import report_job_error, require_ranks

__all__ = ["register", "run", "add_verify_arguments", "backend_of"]

_EPILOG = """\
examples:
  mpiexec -n 16 rankopt verify                       # solve on the spot, then time both
  mpiexec -n 16 rankopt verify --order order.json --json verify.json
  torchrun --nproc-per-node 4 --no-python rankopt verify --backend gloo --sizes 1M,16M

verdict: apply (the order's 90% interval lies above 1 and it gains at least
--min-gain, 2% by default),
worse (the interval lies below 1), no measurable gain (otherwise).
"""


def add_verify_arguments(p: argparse.ArgumentParser) -> None:
    """The timing options shared by ``rankopt verify`` and the launchers' ``--verify``."""
    from rankopt.adapters.verify_stats import BLOCK, MIN_GAIN

    g = p.add_argument_group("verify")
    g.add_argument(
        "--sizes",
        default=None,
        metavar="S[,S...]",
        help="bytes per call, K/M/G suffixes (default: the workload's sizes, else "
        "4K,16K,...,64M in powers of 4)",
    )
    g.add_argument(
        "--repeats",
        type=int,
        default=None,
        metavar="N",
        help="timed pairs per size (default: 6 to 40, until --budget seconds per size)",
    )
    g.add_argument(
        "--budget",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="timed seconds per size when --repeats is not given",
    )
    g.add_argument(
        "--min-gain",
        type=float,
        default=MIN_GAIN,
        metavar="FRACTION",
        help=f"smallest measured gain that applies the order (default {MIN_GAIN:g}: "
        f"{MIN_GAIN * 100:g}%% faster)",
    )
    g.add_argument(
        "--block",
        type=int,
        default=BLOCK,
        metavar="N",
        help=f"timed calls of an order back to back at each visit, after one untimed call "
        f"(default {BLOCK}): a job runs its collective back to back, and beside a TCP "
        f"neighbour a call right after the other order's traffic reads another gain",
    )
    g.add_argument(
        "--verify-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="deadline of every step of verify: a peer silent for longer is an error",
    )


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "verify",
        help="time the collective in the launch order and in rankopt's order (mpiexec/torchrun)",
        description="Run under mpiexec/srun (MPI) or torchrun (Gloo), one process per rank. "
        "Times the real collective at a range of sizes in the launch order and in the "
        "candidate order (--order FILE, or solved on the spot with the default path), "
        "visited in turn (A B B A ..., each visit one untimed call and then "
        "--block timed calls back to back), and prints an nccl-tests-style table with the measured "
        "speedup, its 90% interval and a verdict.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from rankopt._model_args import add_json_option, add_model_arguments
    from rankopt.network.core import DEFAULT_NBYTES

    add_model_arguments(p, default_nbytes=DEFAULT_NBYTES, default_engine="mpi")
    p.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "mpi", "gloo"),
        help="engine to time on (auto: gloo under torchrun's environment, else mpi)",
    )
    p.add_argument(
        "--order",
        metavar="FILE",
        default=None,
        help="candidate order (.json/.npy/text; default: probe and solve on the spot)",
    )
    add_json_option(p, "rank 0 writes the measurements")
    p.add_argument(
        "--probe-option",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="extra keyword for the probe (repeatable)",
    )
    add_verify_arguments(p)
    p.set_defaults(func=run)


def backend_of(choice: str, env: Any = None) -> str:
    """``auto`` -> ``gloo`` under torchrun's environment (``TORCHELASTIC_RUN_ID`` or
    ``RANK`` with ``MASTER_ADDR`` and no MPI launcher variables), else ``mpi``.

    Examples
    --------
    >>> backend_of("auto", {"RANK": "0", "MASTER_ADDR": "h", "WORLD_SIZE": "2"})
    'gloo'
    >>> backend_of("auto", {"OMPI_COMM_WORLD_RANK": "0"})
    'mpi'
    """
    if choice != "auto":
        return choice
    env = os.environ if env is None else env
    mpi = any(k in env for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"))
    torch = "TORCHELASTIC_RUN_ID" in env or ("RANK" in env and "MASTER_ADDR" in env)
    return "gloo" if torch and not mpi else "mpi"


def run(args: argparse.Namespace) -> int:
    """``rankopt verify``: collective over the job."""
    from rankopt._model_args import check_json_destination, model_options
    from rankopt.adapters._common import parse_options, read_order_file
    from rankopt.adapters.verify_stats import check_timing, parse_sizes

    check_json_destination(args.json)  # rank 0's output, checked before any probe or timing
    sizes = parse_sizes(args.sizes) if args.sizes is not None else None
    check_timing(
        sizes, args.repeats, args.budget, args.verify_timeout, None, flags=True,
        min_gain=args.min_gain, block=args.block,
    )  # fmt: skip
    backend = backend_of(args.backend)
    if backend == "gloo" and args.engine_default == "mpi":
        args.engine_default = "gloo"
    solve_options: dict[str, Any] = model_options(args, None, solver=True)
    workload = solve_options.pop("workload", None)
    probe_options = parse_options(args.probe_option)
    order_file = read_order_file(args.order) if args.order else None
    common: dict[str, Any] = {
        "sizes": sizes,
        "repeats": args.repeats,
        "budget_s": args.budget,
        "timeout": args.verify_timeout,
        "min_gain": args.min_gain,
        "block": args.block,
        "workload": workload,
        "probe_options": probe_options,
        "progress": not getattr(args, "quiet", False),
    }
    if backend == "mpi":
        return _run_mpi(args, order_file, common, solve_options)
    return _run_gloo(args, order_file, common, solve_options)


def _emit(args: argparse.Namespace, result: Any) -> None:
    if not getattr(args, "quiet", False):
        print(result.table(), flush=True)
    else:
        print(f"{result.verdict}: {result.speedup:.3f}x", flush=True)
    if args.json:
        from rankopt._model_args import write_json

        write_json(args.json, result.to_json())


def _run_mpi(
    args: argparse.Namespace, order_file: Any, common: dict[str, Any], solve: dict[str, Any]
) -> int:
    from mpi4py import MPI

    from rankopt._validation import RankoptInputError
    from rankopt.adapters import mpi as adapter
    from rankopt.adapters._common import check_binding
    from rankopt.adapters.verify import verify_mpi
    from rankopt.probe._common import probe_hostname

    world = MPI.COMM_WORLD
    require_ranks(world.Get_size(), "rankopt verify")
    try:
        order = None
        extra: dict[str, Any] = {}
        if order_file is not None:
            hosts = world.allgather(probe_hostname(world.Get_rank()))
            check_binding(order_file, world.Get_size(), hosts)
            order = order_file.order
            extra = {"source": f"file:{order_file.path}"}
        result = verify_mpi(world, order, args.collective, extra=extra, **common, **solve)
    except (RankoptInputError, adapter.RankoptMPIError) as exc:
        return report_job_error(world, exc, "rankopt verify")
    if world.Get_rank() == 0:
        _emit(args, result)
    return 0


def _run_gloo(
    args: argparse.Namespace, order_file: Any, common: dict[str, Any], solve: dict[str, Any]
) -> int:
    import torch.distributed as dist

    from rankopt.adapters._common import check_binding
    from rankopt.adapters._env import init_gloo
    from rankopt.adapters.verify import verify_gloo
    from rankopt.probe._common import probe_hostname

    init_gloo(args.verify_timeout, "--verify-timeout")
    if dist.get_world_size() < 2:
        n = dist.get_world_size()
        dist.destroy_process_group()
        require_ranks(n, "rankopt verify", "torchrun --nproc-per-node N")
    try:
        order = None
        extra: dict[str, Any] = {}
        if order_file is not None:
            hosts: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(hosts, probe_hostname(dist.get_rank()))
            check_binding(order_file, dist.get_world_size(), hosts)
            order = order_file.order
            extra = {"source": f"file:{order_file.path}"}
        result = verify_gloo(order, args.collective, extra=extra, **common, **solve)
        if dist.get_rank() == 0:
            _emit(args, result)
    finally:
        dist.destroy_process_group()
    return 0
