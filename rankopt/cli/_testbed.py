"""``rankopt testbed up|down|check|run|exec``: the emulated cloud network (needs root)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator

from rankopt._model_args import seed_value

__all__ = ["register", "run"]

_EPILOG = """\
examples:
  rankopt testbed up --hosts-per-rack 4 --racks-per-pod 2 --rates 1gbit,200mbit --check
  rankopt testbed check
  rankopt testbed down
  rankopt testbed run --engines mpi-ring,gloo --sizes 1M,16M,64M -o report.json
  rankopt testbed run --pods 2 --racks-per-pod 2 --hosts-per-rack 2 --rates 1gbit,400mbit,200mbit
  rankopt testbed run --racks 4,3,2 --launch random --engines mpi-ring,gloo --sizes 16M
  rankopt testbed exec --attach --hosts interleaved -- python -m rankopt.mpi prog.py
  rankopt testbed noise --attach --tenant rack0->rack1 --tenant-rate 50mbit --seconds 60
  rankopt testbed run --racks 3,3,3 --launch random --engines mpi-default --sizes 16M \
      --tenant rack0->rack1 --tenant-count 3
  rankopt testbed exec --racks 3,3,3 --engine gloo -- rankopt run -- python train.py
"""


def _topology_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("topology")
    g.add_argument("--hosts-per-rack", type=int, default=4, metavar="N", help="hosts per rack")
    g.add_argument("--racks-per-pod", type=int, default=2, metavar="N", help="racks per pod")
    g.add_argument("--pods", type=int, default=1, metavar="N", help="pods (1: two levels)")
    g.add_argument(
        "--racks",
        default=None,
        metavar="N,N[,N...]",
        help="hosts of every rack, for racks of unequal sizes (e.g. 4,3,2; replaces "
        "--hosts-per-rack; with --pods > 1 racks fill the pods in order)",
    )
    g.add_argument(
        "--rates",
        default="1gbit,200mbit,200mbit",
        metavar="R,R[,R]",
        help="link rate per level: host, rack uplink, pod uplink (default: %(default)s)",
    )
    g.add_argument(
        "--latency",
        default="0",
        metavar="T,T[,T]",
        help="extra one-way latency per level, e.g. 0,5ms (host level must be 0; "
        "adds a user-space relay on the uplinks)",
    )


def _tenant_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    g = p.add_argument_group("another tenant's traffic")
    g.add_argument(
        "--tenant",
        default=None,
        required=required,
        metavar="A->B[,A->B]",
        help="flows of another tenant between racks or hosts, e.g. rack0->rack1 or h0->h5 "
        "(default: none)",
    )
    g.add_argument("--tenant-count", type=int, default=3, metavar="N", help="flows per A->B")
    g.add_argument(
        "--tenant-rate",
        default=None,
        metavar="RATE",
        help="pace every flow at this rate, e.g. 50mbit (default: TCP as fast as it goes)",
    )
    g.add_argument(
        "--tenant-on-off",
        default=None,
        metavar="ON,OFF",
        help="seconds on and off, for traffic that varies in time (default: always on)",
    )
    g.add_argument(
        "--tenant-proto",
        choices=("tcp", "udp"),
        default="tcp",
        help="TCP shares a full link; UDP (needs --tenant-rate) keeps its rate whatever the "
        "load (default: tcp)",
    )


def _tenant(args: argparse.Namespace, topology):  # type: ignore[no-untyped-def]
    from rankopt.cli import CLIError
    from rankopt.testbed.tenant import parse_tenant

    if not getattr(args, "tenant", None):
        return None
    on = off = 0.0
    try:
        if args.tenant_on_off:
            on, off = (float(x) for x in args.tenant_on_off.split(","))
        return parse_tenant(
            args.tenant,
            topology,
            count=args.tenant_count,
            rate=args.tenant_rate,
            on=on,
            off=off,
            proto=args.tenant_proto,
        )
    except ValueError as exc:
        raise CLIError(f"--tenant: {exc}") from None


def _sizes(text: str, option: str) -> list[int]:
    """Allreduce sizes of a testbed run: ``16M`` etc.; a bare number is bytes.

    Sizes under 1 KiB are refused: the testbed times bandwidth-bound calls,
    and a bare ``16`` is far more likely an old ``--sizes 16`` (MiB) than
    16 bytes.
    """
    from rankopt.cli import CLIError
    from rankopt.units import parse_sizes

    sizes = parse_sizes(text, option)
    small = [s for s in sizes if s < 1024]
    if small:
        raise CLIError(
            f"{option}: {small[0]} is {small[0]} bytes; the testbed times sizes of 1 KiB "
            f"and more (write {small[0]}M for {small[0]} MiB)."
        )
    return sizes


def _prefix_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prefix", default="rkt", help="name prefix of the namespaces (default: %(default)s)"
    )


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``rankopt testbed`` and its actions."""
    p = subparsers.add_parser(
        "testbed",
        help="emulated cloud network in network namespaces (root)",
        description="Build a hierarchical network from Linux network namespaces, check it, "
        "and measure real allreduce speedups of rankopt's orders in it.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(
        dest="action", metavar="ACTION", help="what to do (ACTION -h for its options)"
    )
    sub.required = True
    up = sub.add_parser("up", help="build a topology and leave it up")
    _topology_args(up)
    _prefix_arg(up)
    up.add_argument("--check", action="store_true", help="check the rates after building")
    down = sub.add_parser("down", help="remove a testbed (idempotent)")
    _prefix_arg(down)
    chk = sub.add_parser("check", help="measure each level's bandwidth and round trip")
    _prefix_arg(chk)
    chk.add_argument("--seconds", type=float, default=2.0, help="per test (default: 2)")
    chk.add_argument(
        "--tolerance", type=float, default=0.15, help="allowed relative deviation (default: 0.15)"
    )
    r = sub.add_parser("run", help="probe, solve, apply and time allreduce in a testbed")
    _topology_args(r)
    _prefix_arg(r)
    r.add_argument(
        "--attach",
        action="store_true",
        help="use the testbed that `up` built instead of building one",
    )
    r.add_argument(
        "--launch",
        default="interleaved",
        choices=("interleaved", "random", "contiguous"),
        help="how the launcher places ranks on hosts",
    )
    r.add_argument(
        "--seed", type=seed_value, default=0, help="seed of the random launch and orders"
    )
    r.add_argument(
        "--engines",
        default="mpi-ring,mpi-default,gloo",
        help="comma list of mpi-ring, mpi-default, gloo",
    )
    r.add_argument(
        "--sizes",
        default="1M,16M,64M",
        help="allreduce sizes: bytes, or 16M, 16MiB, 64MB (default: 1M,16M,64M)",
    )
    r.add_argument("--random", type=int, default=3, help="random orders to time")
    r.add_argument("--repeats", type=int, default=3, help="timed runs per order (medians)")
    r.add_argument(
        "--block",
        type=int,
        default=1,
        metavar="N",
        help="timed runs back to back at each visit of an order (the user path's job runs "
        "all its repeats back to back; beside a TCP neighbour an order read right after "
        "another one reads faster)",
    )
    r.add_argument(
        "--solo",
        action="append",
        default=[],
        metavar="ORDER",
        help="also time this order in a job of its own, its repeats back to back as the "
        "user path's job runs them (user-replay, ideal, launch, best, rival: the best "
        "other than the user path's; repeatable)",
    )
    r.add_argument(
        "--solo-rounds",
        type=int,
        default=1,
        metavar="N",
        help="time the --solo orders in N rounds of jobs, the orders in turn, so that a "
        "neighbour whose load comes and goes meets each alike (default: 1)",
    )
    r.add_argument(
        "--probe-engine",
        default="mpi",
        choices=("mpi", "gloo"),
        help="engine of the probe the --fidelity study models from",
    )
    r.add_argument(
        "--objective",
        default=None,
        help="pass --objective to the user's entry point (default: none, its own default)",
    )
    r.add_argument(
        "--user-args",
        default="",
        metavar="ARGS",
        help="more flags for the user's entry point (python -m rankopt.mpi / rankopt run), "
        "one string, e.g. '--nbytes 67108864' (default: none)",
    )
    r.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="the user path's probe cache folder (default: a new one per run, so each run's "
        "user path is a first launch; pass the same folder to time cached launches)",
    )
    r.add_argument(
        "--fidelity",
        type=int,
        default=0,
        metavar="N",
        help="also time N random orders and correlate with the cost models",
    )
    r.add_argument(
        "--fidelity-size",
        default="16M",
        metavar="SIZE",
        help="allreduce size of the study (default: 16M)",
    )
    r.add_argument("--ddp", action="store_true", help="also run a DDP loop (torch, Gloo)")
    r.add_argument("--ddp-grad-mb", type=float, default=24, help="DDP gradient size, MB")
    r.add_argument("--ddp-steps", type=int, default=5, help="timed DDP steps")
    r.add_argument("--check", action="store_true", help="check the rates before the run")
    r.add_argument("-o", "--output", help="write the JSON report here")
    _tenant_args(r)
    r.add_argument("--tenant-only", action="store_true", help="time only with the tenant running")
    nz = sub.add_parser(
        "noise",
        help="run another tenant's traffic in a testbed (until --seconds or Ctrl-C)",
        description="Start flows of another tenant between the testbed's hosts: TCP as fast "
        "as it goes (unfair, bursty) or paced at a fixed rate (reproducible), optionally on "
        "and off in time. Stops at --seconds or on Ctrl-C, and removes every flow.",
    )
    _topology_args(nz)
    _prefix_arg(nz)
    nz.add_argument(
        "--attach", action="store_true", help="use the testbed that `up` built (default: build one)"
    )
    nz.add_argument("--seconds", type=float, default=None, help="how long (default: until Ctrl-C)")
    _tenant_args(nz, required=True)
    ex = sub.add_parser(
        "exec",
        help="run a command under mpirun (or one process per rank for torch) in a testbed",
        description="Run CMD with one rank per host of the testbed: under mpirun with the "
        "testbed's hostfile, rsh agent, UTS namespaces and MCA settings (--engine mpi), or "
        "one process per rank with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, "
        "MASTER_PORT, LOCAL_RANK=0; --engine gloo). Exits with the command's status.",
    )
    _topology_args(ex)
    _prefix_arg(ex)
    ex.add_argument(
        "--attach", action="store_true", help="use the testbed that `up` built (default: build one)"
    )
    ex.add_argument(
        "--engine", default="mpi", choices=("mpi", "gloo"), help="launcher: mpirun or torchrun env"
    )
    ex.add_argument(
        "--hosts",
        default="interleaved",
        metavar="ORDER",
        help="host of every launch rank: interleaved, random, contiguous, or a comma list "
        "of host indices (default: %(default)s)",
    )
    ex.add_argument("--seed", type=seed_value, default=0, help="seed of --hosts random")
    ex.add_argument(
        "--mpi",
        default="auto",
        choices=("auto", "openmpi", "mpich"),
        help="MPI launcher of --engine mpi: Open MPI's mpirun or MPICH's hydra (default: "
        "MPICH when the mpiexec beside this python or on PATH is hydra)",
    )
    ex.add_argument("--ring", action="store_true", help="force the ring allreduce (--engine mpi)")
    ex.add_argument(
        "--mca", action="append", default=[], metavar="KEY=VALUE", help="extra MCA parameter"
    )
    ex.add_argument("--timeout", type=float, default=3600.0, help="seconds (default: 3600)")
    # not dest "command": that is the subcommand's name, which error messages read
    ex.add_argument("program", nargs=argparse.REMAINDER, metavar="command", help="-- CMD [ARG ...]")
    p.set_defaults(func=run)


def _topology(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from rankopt.testbed import Topology

    racks: tuple[int, ...] = ()
    if getattr(args, "racks", None):
        try:
            racks = tuple(int(x) for x in args.racks.split(","))
        except ValueError:
            from rankopt.cli import CLIError

            raise CLIError(
                f"--racks must be a comma list of integers; got {args.racks!r}."
            ) from None
    return Topology(
        args.hosts_per_rack,
        args.racks_per_pod,
        args.pods,
        rates=tuple(args.rates.split(",")),
        latency=tuple(args.latency.split(",")),
        racks=racks,
    )


def _print_checks(results, tolerance: float) -> bool:  # type: ignore[no-untyped-def]
    ok = True
    for res in results:
        flag = "ok" if res.ok(tolerance) else f"OUT OF ±{tolerance:.0%}"
        print(f"  {res}  {flag}")
        ok &= res.ok(tolerance)
    return ok


@contextlib.contextmanager
def _testbed(args: argparse.Namespace) -> Iterator:  # type: ignore[type-arg]
    from rankopt.testbed import Testbed

    if args.attach:
        # not built here, not taken down here; but asked to stop, its jobs stop
        with Testbed.attach(args.prefix).interruptible() as tb:
            yield tb
        return
    with Testbed(_topology(args), prefix=args.prefix) as tb:
        yield tb


def run(args: argparse.Namespace) -> int:
    """Dispatch ``rankopt testbed ACTION``."""
    from rankopt.cli import CLIError
    from rankopt.testbed import Testbed, check, teardown
    from rankopt.testbed.netns import require_namespaces

    quiet = getattr(args, "quiet", False)
    if args.action == "down":
        removed = teardown(args.prefix)
        if not quiet:
            print(
                f"removed {len(removed)} namespaces"
                if removed
                else f"no testbed with prefix {args.prefix!r}"
            )
        return 0
    require_namespaces(args.prefix)
    if args.action == "up":
        tb = Testbed(_topology(args), prefix=args.prefix).up()
        print(
            f"up: {tb.topology.describe()} (namespaces {tb.prefix}-h0..h"
            f"{tb.topology.n_hosts - 1}, {tb.fabric})"
        )
        if args.check and not _print_checks(check(tb), 0.15):
            raise CLIError("measured rates are off by more than 15%; see above.")
        return 0
    if args.action == "check":
        tb = Testbed.attach(args.prefix)
        print(tb.topology.describe())
        if not _print_checks(check(tb, seconds=args.seconds), args.tolerance):
            raise CLIError(f"measured rates are off by more than {args.tolerance:.0%}.")
        return 0
    if args.action == "exec":
        return _exec(args)
    if args.action == "noise":
        return _noise(args, quiet)
    return _run_experiment(args, quiet)


def _exec(args: argparse.Namespace) -> int:
    from rankopt.cli import CLIError
    from rankopt.testbed.launch import RING_MCA, hosts_option, run_gloo, run_mpi

    command = list(args.program)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CLIError("missing command: rankopt testbed exec [options] -- CMD [ARG ...]")
    mca = dict(RING_MCA) if args.ring else {}
    for item in args.mca:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CLIError(f"--mca must look like KEY=VALUE; got {item!r}.")
        mca[key] = value
    with _testbed(args) as tb:
        hosts = hosts_option(tb.topology, args.hosts, seed=args.seed)
        print(
            f"rankopt testbed exec: {tb.topology.describe()}; host of launch rank r = "
            f"{hosts.tolist()}",
            file=sys.stderr,
            flush=True,
        )
        if args.engine == "gloo":
            done = run_gloo(tb, hosts, command, timeout=args.timeout, capture=False, check=False)
            return max(p.returncode for p in done)
        return run_mpi(
            tb,
            hosts,
            command,
            mca=mca,
            timeout=args.timeout,
            capture=False,
            check=False,
            mpi=args.mpi,
        ).returncode


def _noise(args: argparse.Namespace, quiet: bool) -> int:
    import time

    from rankopt.testbed.tenant import Tenant

    with _testbed(args) as tb:
        spec = _tenant(args, tb.topology)
        with Tenant(tb, spec, seed=getattr(args, "seed", 0)) as tenant:
            if not quiet:
                print(
                    f"rankopt testbed noise: {spec.describe()} (pids {list(tenant.pids)})",
                    file=sys.stderr,
                    flush=True,
                )
            try:
                if args.seconds is None:
                    while True:
                        time.sleep(3600)
                time.sleep(args.seconds)
            except KeyboardInterrupt:
                pass
    return 0


def _user_args(args: argparse.Namespace) -> tuple[str, ...]:
    import shlex

    extra = ("--objective", args.objective) if args.objective else ()
    return (*extra, *shlex.split(args.user_args))


def _run_experiment(args: argparse.Namespace, quiet: bool) -> int:
    from rankopt.cli import CLIError
    from rankopt.testbed import check
    from rankopt.testbed.experiment import ExperimentConfig, run_experiment
    from rankopt.testbed.report import format_report

    cfg = ExperimentConfig(
        launch=args.launch,
        seed=args.seed,
        engines=tuple(args.engines.split(",")),
        sizes=tuple(_sizes(args.sizes, "--sizes")),
        n_random=args.random,
        repeats=args.repeats,
        block=args.block,
        solo=tuple(args.solo),
        solo_rounds=args.solo_rounds,
        probe_engine=args.probe_engine,
        user_args=_user_args(args),
        cache_dir=args.cache_dir,
        fidelity_orders=args.fidelity,
        fidelity_size=_sizes(args.fidelity_size, "--fidelity-size")[0],
        ddp=args.ddp,
        ddp_kwargs={"grad_mb": args.ddp_grad_mb, "steps": args.ddp_steps},
    )
    say = (lambda m: None) if quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    if args.tenant_only and not args.tenant:
        raise CLIError("--tenant-only needs --tenant.")
    with _testbed(args) as tb:
        cfg.tenant = _tenant(args, tb.topology)
        cfg.tenant_only = bool(args.tenant_only)
        if args.check and not _print_checks(check(tb), 0.15):
            raise CLIError("measured rates are off by more than 15%; see above.")
        report = run_experiment(tb, cfg, callback=say)
    print(format_report(report))
    if args.output:
        from rankopt._files import atomic_write_text

        atomic_write_text(args.output, json.dumps(report, indent=1), what="--output")
    return 0
