"""``rankopt simulate``: write a synthetic cloud (latency + bandwidth) to a file."""

from __future__ import annotations

import argparse

import numpy as np

from rankopt._files import MAX_N, atomic_write, check_output_path
from rankopt._model_args import seed_value
from rankopt.cli import CLIError
from rankopt.network.cloud import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, synthetic_cloud
from rankopt.units import format_rate, format_size, parse_rates

__all__ = ["register", "run"]


def _four(text: str) -> tuple[float, float, float, float]:
    parts = [float(x) for x in text.split(",")]
    if len(parts) != 4:
        raise argparse.ArgumentTypeError(f"expected 4 comma-separated numbers, got {text!r}")
    return (parts[0], parts[1], parts[2], parts[3])


def _four_rates(text: str) -> tuple[float, float, float, float]:
    try:
        parts = parse_rates(text, "--bandwidth")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if len(parts) != 4:
        raise argparse.ArgumentTypeError(f"expected 4 comma-separated rates, got {text!r}")
    return (parts[0], parts[1], parts[2], parts[3])


def _four_gbit(text: str) -> tuple[float, float, float, float]:
    return tuple(x * 1e9 / 8 for x in _four(text))  # type: ignore[return-value]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="generate a synthetic cloud matrix (hosts in racks in pods)",
        description="Write a synthetic cloud as .npz (latency, bandwidth, hosts, groups; readable by "
        "`rankopt solve`) or the latency alone as .npy/.csv.",
    )
    p.add_argument("-o", "--output", required=True, help="output file (.npz, .npy or .csv)")
    p.add_argument("--pods", type=int, default=2, help="pods")
    p.add_argument("--racks", type=int, default=4, help="racks per pod")
    p.add_argument("--hosts", type=int, default=4, help="hosts per rack")
    p.add_argument("--ranks-per-host", type=int, default=1, help="processes per host")
    p.add_argument(
        "--latency-us",
        type=_four,
        default=tuple(x * 1e6 for x in DEFAULT_LATENCY),
        metavar="HOST,RACK,POD,CROSS",
        help="one-way latency per shared level (µs)",
    )
    default_bw = ",".join(format_rate(x, bits=True).replace(" ", "") for x in DEFAULT_BANDWIDTH)
    p.add_argument(
        "--bandwidth",
        type=_four_rates,
        default=tuple(DEFAULT_BANDWIDTH),
        metavar="HOST,RACK,POD,CROSS",
        help="bandwidth per shared level: bytes/s, or rates such as 25Gbit/s or 3GB/s "
        f"(default: {default_bw})",
    )
    # the former spelling, in Gbit/s
    p.add_argument("--bandwidth-gbit", dest="bandwidth", type=_four_gbit, help=argparse.SUPPRESS)
    p.add_argument(
        "--noise",
        type=float,
        default=0.05,
        help="standard deviation of the log-normal noise on every entry",
    )
    p.add_argument("--congested", type=float, default=0.05, help="fraction of congested VMs")
    p.add_argument("--no-shuffle", action="store_true", help="keep hosts in topology order")
    p.add_argument(
        "--seed", type=seed_value, default=None, help="random seed (default: a fresh one, printed)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = args.output
    if not out.endswith((".npz", ".npy", ".csv")):
        raise CLIError(f"--output must end in .npz, .npy or .csv; got {out!r}")
    sizes = (args.pods, args.racks, args.hosts, args.ranks_per_host)
    for flag, size in zip(("--pods", "--racks", "--hosts", "--ranks-per-host"), sizes, strict=True):
        if size < 1:  # named as typed, not as synthetic_cloud's parameter
            raise CLIError(f"{flag} must be at least 1; got {size}.")
    n = int(np.prod(sizes, dtype=object)) if min(sizes) > 0 else 0
    if n > MAX_N:  # before anything is allocated
        raise CLIError(
            f"--pods {args.pods} x --racks {args.racks} x --hosts {args.hosts} x "
            f"--ranks-per-host {args.ranks_per_host} = {n} processes; rankopt takes at most "
            f"{MAX_N} (each n x n matrix would take {format_size(8.0 * n * n)})"
        )
    check_output_path(out, what="--output")
    cloud = synthetic_cloud(
        args.pods,
        args.racks,
        args.hosts,
        args.ranks_per_host,
        latency=tuple(x * 1e-6 for x in args.latency_us),  # type: ignore[arg-type]
        bandwidth=tuple(args.bandwidth),  # type: ignore[arg-type]
        noise=args.noise,
        congested=args.congested,
        shuffle=not args.no_shuffle,
        rng=args.seed,
    )
    if out.endswith(".npz"):
        cloud.save(out, what="--output")
    elif out.endswith(".npy"):
        atomic_write(out, lambda fh: np.save(fh, cloud.latency), what="--output")
    else:

        def write_csv(fh) -> None:
            fh.write(("host," + ",".join(cloud.hosts) + "\n").encode())
            for h, row in zip(cloud.hosts, cloud.latency, strict=True):
                fh.write((h + "," + ",".join(f"{v:.9g}" for v in row) + "\n").encode())

        atomic_write(out, write_csv, what="--output")
    if not args.quiet:
        print(
            f"wrote {out}: {cloud.n} processes, {args.pods} pods x {args.racks} racks x "
            f"{args.hosts} hosts x {args.ranks_per_host} ranks, seed {cloud.seed}"
        )
    return 0
