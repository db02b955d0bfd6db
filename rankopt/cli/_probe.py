"""``rankopt probe``: measure the job's latency and bandwidth matrices and save them.

Run under the job's launcher, one process per rank::

    mpiexec -n 8 rankopt probe --backend mpi -o net.npz
    torchrun --nproc-per-node 8 -m rankopt probe --backend gloo -o net.npz

Rank 0 prints a progress line per round to stderr and writes the file
atomically; ``rankopt solve net.npz`` reads it.

``rankopt probe --plan -n 1024 --ranks-per-host 4 --link-rate 3.125e9`` needs no
engine: it prints the schedule the probe would run (latency rounds, bandwidth
slots by stage, transfers, bytes) and its estimated duration; ``--json`` prints
one JSON object instead.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rankopt._limits import MAX_N, check_bound, check_probe_settings
from rankopt._model_args import add_json_option, check_json_destination, write_json
from rankopt.cli import CLIError
from rankopt.cli._common import require_ranks
from rankopt.probe._common import ProbeTimeoutError, check_params

__all__ = ["register", "run"]

_TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe",
        help="measure latency and bandwidth between all ranks of the job (run under the launcher)",
        description="Measure the one-way latency and point-to-point bandwidth between every pair "
        "of processes of the job and save them as an .npz measurement. Start one process per "
        "rank with the job's launcher: `mpiexec -n N rankopt probe --backend mpi -o net.npz` or "
        "`torchrun --nproc-per-node N -m rankopt probe --backend gloo -o net.npz`.",
    )
    p.add_argument(
        "--backend",
        choices=("mpi", "gloo"),
        help="engine to probe over: MPI (mpi4py) or torch.distributed Gloo (required unless "
        "--plan)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="measurement file written by rank 0 (.npz; required unless --plan)",
    )
    p.add_argument(
        "--bandwidth-mode",
        choices=("auto", "all-pairs", "sampled", "linear"),
        default="auto",
        help="bandwidth schedule: every pair; sampled (stars find the groups the "
        "bandwidth shows, then every pair inside a group and at least 8 of each block "
        "between two groups, every host in one, the rest of a block filled from it; every "
        "pair where no groups show); or the linear one (hierarchy, uplinks and "
        "representative pairs measured, the rest filled from the groups); auto: sampled "
        "up to 32 hosts, linear beyond (default)",
    )
    p.add_argument(
        "--latency-mode",
        choices=("auto", "all-pairs", "linear"),
        default="auto",
        help="latency schedule: every pair in n - 1 lockstep rounds, or the linear one (each "
        "process to its host, hosts to pivots of their groups, sampled pairs per block, no "
        "barrier between pairs; the rest filled from the blocks, congested hosts reported); "
        "auto: every pair up to 64 processes, linear beyond (default)",
    )
    p.add_argument(
        "--uplink-flows",
        type=int,
        default=4,
        help="concurrent flows per uplink capacity test of the linear mode (default: 4)",
    )
    p.add_argument(
        "--topology",
        type=Path,
        metavar="FILE",
        help="groups from the provider or scheduler (Slurm topology.conf/.yaml, scontrol show "
        "topology, SLURM_TOPOLOGY_ADDR lines, AWS DescribeInstanceTopology, GCP instances, "
        "kubectl get nodes -o json, `host rack pod` text): nothing is discovered, the "
        "bandwidth phase joins the hosts of each group and the groups and tests their "
        "uplinks (with --plan: planned so), disagreements with the bandwidth are printed",
    )
    p.add_argument(
        "--topology-aliases",
        type=Path,
        metavar="FILE",
        help="`aws ec2 describe-instances` JSON: matches the hosts' DNS names and addresses "
        "to the instance IDs of an AWS --topology",
    )
    plan = p.add_argument_group("dry run (--plan: no engine, nothing measured)")
    plan.add_argument(
        "--plan",
        action="store_true",
        help="print the schedule and its estimated duration instead of probing",
    )
    plan.add_argument("-n", type=int, help="number of processes of the planned job")
    plan.add_argument(
        "--hosts",
        type=Path,
        metavar="FILE",
        help="host name of every process, one a line (with -n: the lines are hosts, "
        "processes are spread over them in blocks)",
    )
    plan.add_argument(
        "--ranks-per-host",
        type=int,
        default=1,
        help="processes per host when no --hosts file is given (default: 1)",
    )
    plan.add_argument(
        "--latency",
        type=Path,
        metavar="FILE",
        help="latency matrix (n x n, seconds unless --unit) to plan with; default: "
        "30 us between hosts, 2 us within one",
    )
    plan.add_argument(
        "--unit", help="unit of the --latency file's values (s, ms, us, ns; default: s)"
    )
    plan.add_argument(
        "--bandwidth-matrix",
        type=Path,
        metavar="FILE",
        help="rates (bytes/s, n x n: .npy/.csv/.json, or a probe or network .npz) to plan "
        "with: the linear schedule reacts to their tiers as it would to measured ones "
        "(default: --link-rate everywhere)",
    )
    plan.add_argument(
        "--link-rate",
        type=float,
        default=25e9 / 8,
        metavar="BYTES_PER_S",
        help="pair rate assumed for every transfer, bytes/s (default: 3.125e9, 25 Gbit/s)",
    )
    plan.add_argument(
        "--step-overhead",
        type=float,
        metavar="SECONDS",
        help="seconds of the processes' own work per round or slot (default: 1.5e-4, "
        "one core per process; see --calibrate)",
    )
    plan.add_argument(
        "--calibrate",
        type=Path,
        metavar="FILE",
        help="a probe's measurement (.npz) from the same kind of machines: plan with the "
        "per-step overhead it showed",
    )
    add_json_option(plan, "the plan (printed in place of the text when no FILE is given)")
    p.add_argument(
        "--repeats",
        type=int,
        default=10,
        help="timed ping-pongs per direction of each pair (default: 10)",
    )
    p.add_argument(
        "--bandwidth-repeats",
        type=int,
        default=3,
        help="most timed transfers per direction of each pair; two that agree within 2%% "
        "end it, or one that agrees as closely with a rate its sender read before (default: 3)",
    )
    p.add_argument(
        "--warmup", type=int, default=1, help="untimed exchanges before the timed ones (default: 1)"
    )
    p.add_argument(
        "--latency-bytes", type=int, default=8, help="ping-pong message size in bytes (default: 8)"
    )
    p.add_argument(
        "--bandwidth-bytes",
        type=int,
        default=1 << 20,
        help="largest bandwidth transfer in bytes; timed ones carry about 15 ms at the link's rate (default: 1048576)",
    )
    p.add_argument(
        "--bw-concurrency",
        type=int,
        default=1,
        help="transfers allowed to share one suspected link (default: 1)",
    )
    p.add_argument("--no-bandwidth", action="store_true", help="measure latency only")
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds allowed per round before every rank gives up (default: 30)",
    )
    p.set_defaults(func=run)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "latency_bytes": args.latency_bytes,
        "bandwidth_bytes": args.bandwidth_bytes,
        "repeats": args.repeats,
        "bandwidth_repeats": args.bandwidth_repeats,
        "warmup": args.warmup,
        "timeout": args.timeout,
        "bandwidth": not args.no_bandwidth,
        "bw_concurrency": args.bw_concurrency,
        "bandwidth_mode": args.bandwidth_mode,
        "uplink_flows": args.uplink_flows,
        "latency_mode": args.latency_mode,
    }


def _output_problem(path: Path) -> str:
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"cannot write {path}: directory {parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"cannot write {path}: directory {parent} is not writable"
    from rankopt._files import RankoptFileError, check_output_path

    try:  # a FIFO, link or directory there is refused before the probe, not after it
        check_output_path(path, what="--output")
    except RankoptFileError as exc:
        return str(exc)
    return ""


def _summary(m: Any, path: Path) -> str:
    n = m.n
    off = ~np.eye(n, dtype=bool)
    line = (
        f"wrote {path}: {n} ranks on {len(m.ranks_per_host())} host(s), "
        f"median latency {np.median(m.latency[off]) * 1e6:.3g} us"
    )
    if m.bandwidth is not None:
        from rankopt.units import format_rate

        line += f", median bandwidth {format_rate(float(np.median(m.bandwidth[off])))}"
    return line + f", {m.duration:.2f} s"


def _probe_and_save(
    args: argparse.Namespace,
    rank: int,
    n: int,
    measure: Callable[..., Any],
    options: dict[str, Any],
    abort: Callable[[], Any],
) -> int:
    """Run ``measure`` on every rank; rank 0 shows progress and writes the file.

    On a timeout the lowest live rank prints the error once and the job ends
    through ``abort``, without waiting for the dead peer.
    """
    from rankopt._progress import Progress

    shown = Progress("rankopt probe", enabled=rank == 0 and not args.quiet)
    try:
        m = measure(callback=shown.probe_callback(), **options)
        shown.finish()
    except ProbeTimeoutError as exc:
        shown.finish("timed out")
        live = sorted(set(range(n)) - set(exc.ranks))
        if not live or rank == live[0]:
            print(f"rankopt probe: error: {exc}", file=sys.stderr, flush=True)
        else:
            time.sleep(1.0)  # let the reporting rank print before the job is torn down
        sys.stdout.flush()
        abort()
        return 1
    status = 0
    if rank == 0:
        from rankopt._validation import RankoptInputError
        from rankopt.adapters.cache import network_of

        net = network_of(m)
        if args.topology_labels is not None:
            from rankopt.probe.topology_sources import apply_topology

            try:
                net = apply_topology(net, args.topology_labels)
            except RankoptInputError as exc:  # the hosts do not match: keep the measurement
                print(
                    f"rankopt probe: error: --topology {args.topology}: {exc} "
                    "(saved without the topology)",
                    file=sys.stderr,
                )
                status = 1
            else:
                for line in net.provenance["topology"]["disagreements"]:
                    print(f"topology disagrees with the probe: {line}", file=sys.stderr)
        m.save(args.output, network=net)
        print(_summary(m, args.output))
        print(f"network: {net.describe()}")
    return status


def _run_mpi(args: argparse.Namespace, options: dict[str, Any]) -> int:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise CLIError(f"--backend mpi needs mpi4py ({exc})") from None
    from rankopt.probe.mpi import measure_at_root

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    require_ranks(n, "rankopt probe")
    problem = comm.bcast(_output_problem(args.output) if rank == 0 else None, root=0)
    if problem:
        raise CLIError(problem)
    measure = functools.partial(measure_at_root, comm, 0, topology=args.topology_labels)
    return _probe_and_save(args, rank, n, measure, options, lambda: comm.Abort(1))


def _run_gloo(args: argparse.Namespace, options: dict[str, Any]) -> int:
    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise CLIError(f"--backend gloo needs torch ({exc})") from None
    from rankopt.probe.torch import measure_at_root

    created = False
    if not dist.is_initialized():
        missing = [v for v in _TORCHRUN_ENV if v not in os.environ]
        if missing:
            raise CLIError(
                f"--backend gloo must run under torchrun (missing {', '.join(missing)}): "
                "`torchrun --nproc-per-node N -m rankopt probe --backend gloo -o net.npz`"
            )
        from rankopt.adapters._env import init_gloo

        init_gloo(args.timeout, "--timeout")
        created = True
    rank, n = dist.get_rank(), dist.get_world_size()
    require_ranks(n, "rankopt probe", "torchrun --nproc-per-node N")
    box = [_output_problem(args.output) if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    if box[0]:
        raise CLIError(box[0])
    # rank 0 writes the file
    measure = functools.partial(measure_at_root, None, 0, topology=args.topology_labels)
    status = _probe_and_save(args, rank, n, measure, options, lambda: os._exit(1))
    if created:
        dist.destroy_process_group()
    return status


def _plan_hosts(args: argparse.Namespace) -> list[str]:
    """Host of every planned process, from -n, --hosts and --ranks-per-host."""
    if args.n is not None:  # before any list of n names is made
        check_bound(args.n, "-n", MAX_N, minimum=2, integer=True)
    if args.hosts is not None:
        from rankopt.probe.topology_sources import read_text

        lines = [ln.strip() for ln in read_text(args.hosts, "--hosts").splitlines()]
        names = [ln for ln in lines if ln and not ln.startswith("#")]
        if not names:
            raise CLIError(f"--hosts {args.hosts}: no host names")
        from rankopt._validation import check_host_names

        check_host_names(names, name="hosts", where=f"the lines of {str(args.hosts)!r}")
        if args.n is None and len(names) < 2:
            raise CLIError(
                f"--hosts {args.hosts}: 1 host name, 1 process; the probe needs at least 2 "
                "(give -n N to spread N processes over its hosts)"
            )
        if args.n is None or args.n == len(names):
            return names
        if args.n < len(names):
            raise CLIError(f"-n {args.n} is smaller than the {len(names)} lines of --hosts")
        return [names[i * len(names) // args.n] for i in range(args.n)]
    if args.n is None:
        raise CLIError("--plan needs -n N or --hosts FILE")
    if args.ranks_per_host < 1:
        raise CLIError(f"--ranks-per-host must be at least 1; got {args.ranks_per_host}")
    return [f"h{i // args.ranks_per_host}" for i in range(args.n)]


def _run_plan(args: argparse.Namespace, options: dict[str, Any]) -> int:
    import json

    from rankopt._validation import RankoptInputError
    from rankopt.probe._common import ProbeParams
    from rankopt.probe.plan import STEP_OVERHEAD, calibrate_step_overhead, plan_probe

    check_json_destination(args.json)
    hosts = _plan_hosts(args)
    n = len(hosts)
    if n < 2:
        raise CLIError("the probe needs at least 2 processes; got -n " + str(n))
    if args.latency is not None:
        from rankopt.network.io import load_matrix

        lat = load_matrix(args.latency, unit=args.unit)
        if lat.shape != (n, n):
            raise CLIError(f"--latency {args.latency}: {lat.shape} matrix for {n} processes")
    else:
        # host-level (plan_probe takes an (H, H) model): 2 us in a host, 30 us between
        n_hosts = len(dict.fromkeys(hosts))
        lat = np.full((n_hosts, n_hosts), 30e-6)
        np.fill_diagonal(lat, 2e-6)
        if n_hosts < 2:  # one host: the (n, n) model, as plan_probe takes no (1, 1) one
            lat = np.full((n, n), 2e-6)
    if not (args.link_rate > 0 and np.isfinite(args.link_rate)):
        raise CLIError(f"--link-rate must be a positive number of bytes/s; got {args.link_rate}")
    params = ProbeParams(**options)
    mode = args.bandwidth_mode if params.bandwidth else "none"
    overhead = STEP_OVERHEAD
    if args.step_overhead is not None and args.calibrate is not None:
        raise CLIError("give --step-overhead or --calibrate, not both")
    if args.step_overhead is not None:
        if not (np.isfinite(args.step_overhead) and args.step_overhead >= 0):
            raise CLIError(f"--step-overhead must be seconds >= 0; got {args.step_overhead}")
        overhead = args.step_overhead
    elif args.calibrate is not None:
        from rankopt.probe.measurement import load_measurement

        try:
            overhead = calibrate_step_overhead(load_measurement(args.calibrate))
        except RankoptInputError as exc:
            raise CLIError(f"--calibrate {args.calibrate}: {exc}") from None
    bandwidth = None
    if args.bandwidth_matrix is not None:
        bandwidth = _plan_bandwidth(args.bandwidth_matrix, n)
    groups = None
    if args.topology_labels is not None:  # the provider's groups: no discovery
        try:
            groups = args.topology_labels.groups(hosts)
        except RankoptInputError as exc:
            raise CLIError(f"--topology {args.topology}: {exc}") from None
    plan = plan_probe(
        lat,
        hosts,
        params=params,
        mode=mode,
        link_rate=args.link_rate,
        bandwidth=bandwidth,
        step_overhead=overhead,
        groups=groups,
    )
    if args.json:
        write_json(args.json, json.dumps(plan.to_dict()))
    if args.json != "-":
        print(plan)
    return 0


def _plan_bandwidth(path: Path, n: int) -> Any:
    """``--bandwidth-matrix``: an (n, n) matrix of bytes/s, from a matrix or an .npz."""
    from rankopt._validation import RankoptInputError

    try:
        if str(path).endswith(".npz"):
            from rankopt.network.core import load_network

            bw = load_network(path).bandwidth
            if bw is None:
                raise CLIError(f"--bandwidth-matrix {path}: the file holds no bandwidth")
        else:
            from rankopt.network.io import read_matrix

            bw = read_matrix(path)[0]
    except (RankoptInputError, OSError) as exc:
        raise CLIError(f"--bandwidth-matrix {path}: {exc}") from None
    if bw.shape != (n, n):
        raise CLIError(f"--bandwidth-matrix {path}: {bw.shape} matrix for {n} processes")
    off = ~np.eye(n, dtype=bool)
    bad = np.argwhere(off & ~(np.isfinite(bw) & (bw > 0)))
    if bad.size:
        i, j = (int(x) for x in bad[0])
        raise CLIError(
            f"--bandwidth-matrix {path}: rates must be positive bytes/s; "
            f"[{i}, {j}] is {float(bw[i, j])!r}"
        )
    return bw


def run(args: argparse.Namespace) -> int:
    from rankopt._model_args import topology_option

    # read once, before the probe (the launchers' reader): a bad file fails first
    args.topology_labels = topology_option(args)
    options = _options(args)
    check_probe_settings(options, flags=True)
    check_params(callback=None, **options)  # reject bad settings before starting the engine
    if args.plan:
        return _run_plan(args, options)
    if args.backend is None or args.output is None:
        raise CLIError("--backend and -o/--output are required (or --plan for a dry run)")
    if args.backend == "mpi":
        return _run_mpi(args, options)
    return _run_gloo(args, options)
