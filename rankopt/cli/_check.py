"""``rankopt check FILE``: does the network an order was solved on still hold?"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rankopt._model_args import add_json_option, check_json_destination, write_json
from rankopt.cli._common import report_job_error, require_ranks

__all__ = ["register", "run", "load_stored", "solved_call"]

_EPILOG = """\
examples:
  mpiexec -n 16 rankopt check order.json      # an order saved with --save x.json
  mpiexec -n 16 rankopt check network.npz     # a saved network (launch order as the order)

exit status (as diff): 0 the network holds, 1 it changed, 2 an error.

verdicts: holds / changed (sampled bandwidth or median latency moved beyond 25% and
their noise); re-ordering would pay when the order solved now beats the stored one
by the lower end of its 90% interval.
"""


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "check",
        help="re-probe cheaply under mpiexec: does a stored network/order still hold?",
        description="Run under mpiexec/srun, one process per rank. Re-probes cheaply "
        "(all-pairs latency rounds and a few bandwidth pairs chosen from the stored "
        "network, one per block of alike pairs) and says whether the stored network still "
        "holds and whether re-ordering would pay, with numbers.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="an order file with its network (.json) or a network (.npz)")
    p.add_argument("--timeout", type=float, default=60.0, help="deadline of every step (s)")
    p.add_argument("--max-pairs", type=int, default=24, help="bandwidth pairs to sample")
    add_json_option(p, "rank 0 writes the result")
    p.add_argument(
        "--force",
        action="store_true",
        help="compare even when the job runs on other hosts than the stored network",
    )
    p.set_defaults(func=run)


def load_stored(path: str) -> tuple[Any, Any, Any]:
    """``(network, order or None, order file or None)`` from an order file or a network file."""
    from rankopt._validation import RankoptInputError
    from rankopt.adapters._common import read_order_file
    from rankopt.network.core import load_network, network_from_record

    if path.endswith(".json"):
        f = read_order_file(path)
        if f.network is None:
            raise RankoptInputError(
                f"order file {path!r} carries no network; save orders with --save x.json "
                "(python -m rankopt.mpi, rankopt run) or rankopt solve --order-out x.json."
            )
        return network_from_record(f.network), f.order, f
    return load_network(path), None, None


def solved_call(f: Any) -> dict[str, Any] | None:
    """What an order file says the order was solved for: one call's collective,
    algorithm and message size (the engine's algorithm as the solve resolved it),
    so that the check prices and re-solves that call; None for a network file, an
    order file without the record, or a workload of several calls (then priced as
    a ring allreduce).

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> solved_call(NS(solved={"collective": "allreduce", "algorithm": "rabenseifner_ompi",
    ...                        "nbytes": 16777216.0, "objective": "time"}))
    {'collective': 'allreduce', 'algorithm': 'rabenseifner_ompi', 'nbytes': 16777216.0}
    >>> solved_call(NS(solved={"collective": "workload", "algorithm": "ring+ring_gloo"}))
    """
    from rankopt.models import ALGORITHMS

    solved = getattr(f, "solved", None) or {}
    collective, algorithm = solved.get("collective"), solved.get("algorithm")
    if not isinstance(collective, str) or algorithm not in ALGORITHMS.get(collective, ()):
        return None
    out: dict[str, Any] = {"collective": collective, "algorithm": algorithm}
    if isinstance(solved.get("nbytes"), (int, float)):
        out["nbytes"] = float(solved["nbytes"])
    return out


def run(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from rankopt._validation import RankoptInputError
    from rankopt.adapters import mpi as adapter
    from rankopt.adapters._common import OrderFile, check_binding
    from rankopt.adapters.drift import CHANGED
    from rankopt.adapters.verify import check_mpi
    from rankopt.probe._common import probe_hostname

    world = MPI.COMM_WORLD
    require_ranks(world.Get_size(), "rankopt check")
    try:
        if not (args.timeout > 0 and args.timeout < float("inf")):  # nan fails both
            raise RankoptInputError(f"--timeout must be positive seconds; got {args.timeout}.")
        if args.max_pairs < 0:
            raise RankoptInputError(f"--max-pairs must be at least 0; got {args.max_pairs}.")
        check_json_destination(args.json)  # rank 0's output, checked before any measurement
        network, order, f = load_stored(args.file)
        hosts = world.allgather(probe_hostname(world.Get_rank()))
        if not args.force:
            binding = f or OrderFile(
                order=__import__("numpy").arange(network.n),
                network={"n": network.n, "hosts": list(network.hosts or []), "date": "?"},
                solved=None,
                path=args.file,
            )
            check_binding(binding, world.Get_size(), hosts, what="rankopt check")
        result = check_mpi(
            world,
            network,
            order,
            timeout=args.timeout,
            max_pairs=args.max_pairs,
            solve_options=solved_call(f),
        )
    except (RankoptInputError, adapter.RankoptMPIError) as exc:
        report_job_error(world, exc, "rankopt check")
        return 2
    if world.Get_rank() == 0:
        print(result.text(network.hosts), flush=True)
        if args.json:
            write_json(args.json, json.dumps(result.to_dict()))
    # as diff does: 0 the network holds, 1 it changed, 2 trouble (on every rank)
    return 1 if result.verdict == CHANGED else 0
