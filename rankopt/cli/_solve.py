"""``rankopt solve MATRIX``: find the best rank order for a measured matrix."""

from __future__ import annotations

import argparse
import json
import sys

from rankopt._model_args import add_json_option, check_json_destination, write_json
from rankopt.cli import CLIError
from rankopt.cli._common import add_matrix_args, progress, read_network, solve_as_asked

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "solve",
        help="find the rank order that minimises a collective's modelled time",
        description="Read a network (a probe, cloud or network .npz: hosts, bandwidth and "
        "hierarchy) or a latency matrix (.npy, .csv, .json), solve, and print what was "
        "modelled, the modelled speedup and the order (order[k] = original rank of the "
        "process that gets new rank k). With no options, a network with bandwidth is priced "
        "with the contention model at 16 MiB with its inferred uplinks; a bare latency "
        "matrix with the ring's latency sum.",
    )
    from rankopt._model_args import add_model_arguments
    from rankopt.network.core import DEFAULT_NBYTES

    add_matrix_args(p)
    add_model_arguments(p, default_nbytes=DEFAULT_NBYTES)
    p.add_argument(
        "--max-iter",
        type=int,
        default=None,
        help="iteration budget (reproducible; default: the method's)",
    )
    p.add_argument("--keep-rank0", action="store_true", help="keep original rank 0 at new rank 0")
    add_json_option(p, "the result (printed in place of the report when no FILE is given)")
    p.add_argument(
        "--display-map",
        action="store_true",
        help="print the new rank -> launch rank/host table also for more than 64 processes",
    )
    p.add_argument(
        "--order-out",
        metavar="FILE",
        help="write the order (.txt one per line, .npy, or .json: with the network it was "
        "solved on, so that applying it to other hosts or another size is refused)",
    )
    p.add_argument(
        "--rankfile", metavar="FILE", help="write an Open MPI rankfile (needs host names)"
    )
    p.add_argument(
        "--hostfile", metavar="FILE", help="write a sequential hostfile (needs host names)"
    )
    p.add_argument(
        "--slurm-hostfile", metavar="FILE", help="write a Slurm arbitrary-distribution hostfile"
    )
    p.add_argument(
        "--topology",
        metavar="FILE",
        help="groups from the provider or scheduler (Slurm, AWS, GCP, Kubernetes, `host rack "
        "pod` text; see rankopt.probe.topology_sources); uplinks from the file's bandwidth",
    )
    p.add_argument(
        "--topology-aliases",
        metavar="FILE",
        help="`aws ec2 describe-instances` JSON: matches the hosts' DNS names and addresses "
        "to the instance IDs of an AWS --topology",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankopt._model_args import topology_option

    topology = topology_option(args)  # the launchers' and the probe's reader and messages
    net, hosts = read_network(args)
    if topology is not None:  # the provider's groups, the probe's capacities
        from rankopt.probe.topology_sources import apply_topology

        net = apply_topology(net, topology)
        for line in net.provenance["topology"]["disagreements"]:
            print(f"rankopt solve: topology disagrees with bandwidth: {line}", file=sys.stderr)
    _check_outputs(args, hosts, net.n)  # a bad target fails now, not after the solve
    with progress("rankopt solve", not args.quiet and args.json != "-") as cb:
        res = solve_as_asked(
            args, net, max_iter=args.max_iter, keep_rank0=args.keep_rank0, callback=cb
        )
    _write_outputs(args, res.order, hosts, net, res)
    if args.json:
        write_json(args.json, json.dumps(res.to_dict()))
    if args.json == "-":
        pass
    elif args.quiet:
        print(" ".join(str(int(x)) for x in res.order))
    else:
        from rankopt._model_args import report

        print(report(res, hosts, table_max=len(res.order) if args.display_map else 64))
        print(" ".join(str(int(x)) for x in res.order))
    return 0


_OUTPUTS = (
    ("order_out", "--order-out"),
    ("rankfile", "--rankfile"),
    ("hostfile", "--hostfile"),
    ("slurm_hostfile", "--slurm-hostfile"),
)


_INPUTS = (
    ("topology", "--topology"),
    ("topology_aliases", "--topology-aliases"),
)


def _check_outputs(args: argparse.Namespace, hosts: list[str] | None, n: int) -> None:
    """Every output path writable and the host names writable, before any work starts."""
    from rankopt._files import check_output_path, outputs_problem
    from rankopt.adapters._common import check_hosts

    check_json_destination(args.json)
    targets = [(flag, getattr(args, dest, None)) for dest, flag in _OUTPUTS]
    outputs = [*targets, ("--json", None if args.json == "-" else args.json)]
    for flag, path in outputs:
        if path is not None:
            check_output_path(path, what=flag)
    problem = outputs_problem(outputs, _inputs(args))
    if problem:
        raise CLIError(problem)
    if any(path is not None for _, path in targets[1:]):
        if hosts is None:
            raise CLIError(
                f"{args.matrix!r} holds no host names; --rankfile/--hostfile/--slurm-hostfile "
                "need a measurement .npz or a matrix file with a header of host names."
            )
        check_hosts(hosts, n)


def _inputs(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The files the command reads: the matrix, the workload, the topology files."""
    from rankopt._model_args import workload_input

    return [
        ("input matrix", args.matrix),
        workload_input(args),
        *((option, getattr(args, dest, None)) for dest, option in _INPUTS),
    ]


def check_not_an_input(args: argparse.Namespace, flag: str, path: str) -> None:
    """Refuse output ``path`` of ``flag`` when it is a file the command reads: the
    matrix, the workload (--workload or $RANKOPT_WORKLOAD), the topology files."""
    from rankopt._files import outputs_problem

    problem = outputs_problem([(flag, path)], _inputs(args))
    if problem:
        raise CLIError(problem)


def _write_outputs(
    args: argparse.Namespace, order, hosts: list[str] | None, network=None, result=None
) -> None:
    from rankopt.adapters._common import save_order

    if args.order_out is not None:
        save_order(args.order_out, order, what="--order-out", network=network, result=result)
    wanted = [
        (f, w)
        for f, w in (
            (args.rankfile, "rankfile"),
            (args.hostfile, "hostfile"),
            (args.slurm_hostfile, "slurm"),
        )
        if f is not None
    ]
    if not wanted:
        return
    if hosts is None:
        raise CLIError(
            f"{args.matrix!r} holds no host names; --rankfile/--hostfile/--slurm-hostfile "
            "need a measurement .npz or a matrix file with a header of host names"
        )
    from rankopt.adapters import writers

    for path, kind in wanted:
        if kind == "rankfile":
            writers.write_rankfile(path, order, hosts, what="--rankfile")
        elif kind == "hostfile":
            writers.write_hostfile(path, order, hosts, what="--hostfile")
        else:
            writers.write_slurm_hostfile(path, order, hosts, what="--slurm-hostfile")
