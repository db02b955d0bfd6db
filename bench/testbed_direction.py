"""A ring's direction beside another tenant: every cyclic order of the racks, timed side by side.

Builds a testbed (root, network namespaces), launches one rank per host in host
order, and times a ring allreduce (Open MPI's, or Gloo's with ``--engine gloo``) for each ring that visits every rack
in one block (rack 0 first, the others in every order; with three racks
0 -> 1 -> 2 -> 0 and 0 -> 2 -> 1 -> 0), the runs of all orders alternated in one
job, once quiet and once beside each tenant given. The model prices these rings
alike; beside TCP flows from one rack to another the ring whose hop runs the
flows' own way was 1.6-2.2x slower on the emulated racks.

Run (root)::

    python bench/testbed_direction.py --racks 4,3,2 --rates 1gbit,200mbit \\
        --tenant "tcp:rack0->rack1:3:50mbit" --tenant "udp:rack0->rack1:2:40mbit"
    python bench/testbed_direction.py --engine gloo --size 4 --size 16 \\
        --tenant "tcp:rack0->rack1:3:50mbit"

A tenant is ``proto:flows:count:rate`` (rate ``-``: unpaced), flows as
``rankopt testbed run --tenant`` takes them.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import tempfile
from pathlib import Path

import numpy as np


def rack_rings(racks: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Rank orders (host indices) of every ring with rack 0 first and one block per rack.

    >>> {k: v.tolist() for k, v in rack_rings((2, 1, 1)).items()}
    {'0-1-2': [0, 1, 2, 3], '0-2-1': [0, 1, 3, 2]}
    """
    start = np.cumsum((0, *racks))
    blocks = [list(range(int(start[r]), int(start[r + 1]))) for r in range(len(racks))]
    out = {}
    for perm in itertools.permutations(range(1, len(racks))):
        key = "-".join(map(str, (0, *perm)))
        out[key] = np.array(blocks[0] + [h for p in perm for h in blocks[p]])
    return out


def tenant_case(text: str) -> tuple[str, str, int, str | None]:
    """``proto:flows:count:rate`` as ``(proto, flows, count, rate)``; ``rate`` ``-``: None.

    >>> tenant_case("tcp:rack0->rack1:3:50mbit")
    ('tcp', 'rack0->rack1', 3, '50mbit')
    >>> tenant_case("udp:rack0->rack1:x:-")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: `--tenant` must be proto:flows:count:rate ...
    """
    parts = text.split(":")
    ok = len(parts) == 4 and parts[0] in ("tcp", "udp") and parts[2].isdigit()
    if not ok or int(parts[2]) < 1:
        raise argparse.ArgumentTypeError(
            "`--tenant` must be proto:flows:count:rate (proto tcp or udp, count a positive "
            f"integer, rate e.g. 50mbit or - for unpaced), e.g. tcp:rack0->rack1:3:50mbit; "
            f"got {text!r}."
        )
    proto, flows, count, rate = parts
    return proto, flows, int(count), None if rate == "-" else rate


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}.")
    return int(text)


def _racks(text: str) -> tuple[int, ...]:
    parts = text.split(",")
    if len(parts) < 3 or not all(x.isdigit() and int(x) >= 1 for x in parts):
        raise argparse.ArgumentTypeError(
            f"must be the hosts of three or more racks, e.g. 4,3,2; got {text!r}."
        )
    return tuple(int(x) for x in parts)


def main(argv: list[str] | None = None) -> int:
    from rankopt.testbed import Testbed, Topology
    from rankopt.testbed.experiment import time_orders
    from rankopt.testbed.tenant import Tenant, parse_tenant

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--racks", type=_racks, default=(4, 3, 2), help="hosts of every rack")
    p.add_argument("--rates", default="1gbit,200mbit", help="host and rack-uplink rates")
    p.add_argument(
        "--tenant", action="append", default=[], type=tenant_case, help="proto:flows:count:rate"
    )
    p.add_argument(
        "--size",
        type=_positive,
        action="append",
        default=None,
        help="allreduce MB (2^20 bytes); repeat the flag for several sizes (default: 16)",
    )
    p.add_argument(
        "--engine", choices=("mpi-ring", "gloo"), default="mpi-ring", help="whose ring is timed"
    )
    p.add_argument("--repeats", type=_positive, default=6)
    p.add_argument("--prefix", default="rkd")
    p.add_argument("-o", "--output", default=None, help="also write the times as JSON here")
    args = p.parse_args(argv)

    racks = args.racks
    topo = Topology(racks=racks, rates=tuple(args.rates.split(",")))
    hosts = np.arange(topo.n_hosts)
    rings = rack_rings(racks)
    sizes = args.size or [16]
    names = [f"{k} {mb} MiB" if len(sizes) > 1 else k for mb in sizes for k in rings]
    jobs = [(i, mb << 20) for mb in sizes for i in range(len(rings))]
    out: dict[str, dict[str, list[float]]] = {}
    print("| beside | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    with Testbed(topo, prefix=args.prefix) as tb, tempfile.TemporaryDirectory() as d:
        for tenant in [None, *args.tenant]:
            case, spec = "none", None
            if tenant is not None:
                proto, flows, count, rate = tenant
                case = f"{proto}:{flows}:{count}:{rate or '-'}"
                spec = parse_tenant(flows, topo, count=count, rate=rate, proto=proto)
            orders = list(rings.values())
            with Tenant(tb, spec, seed=1) if spec is not None else contextlib.nullcontext():
                times = time_orders(
                    tb, hosts, args.engine, orders, jobs, repeats=args.repeats, workdir=Path(d)
                )
            out[case] = {k: [float(x) for x in t] for k, t in zip(names, times, strict=True)}
            cells = [f"{np.median(t):.2f} s" for t in times]
            print(f"| {case} | " + " | ".join(cells) + " |", flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
