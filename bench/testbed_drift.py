"""``rankopt check`` in the testbed: a quiet network holds, a halved rack uplink is seen.

Builds a testbed (root, network namespaces), probes it through the user's
commands (``rankopt probe`` under mpirun, ``rankopt solve --order-out``),
waits, and runs ``rankopt check`` on the stored order: the network should
hold. Then it halves one rack's uplink (both directions) and checks again:
the change should be reported, with what re-ordering would gain now. The
launch order's network file is checked too (``rankopt check net.npz``).

Run (root)::

    python bench/testbed_drift.py --racks 3,3,3 --launch random --seed 2 --wait 120
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from _testbed_common import rankopt as _rankopt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--racks", default="3,3,3")
    p.add_argument("--rates", default="1gbit,200mbit")
    p.add_argument("--launch", default="random")
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--wait", type=float, default=120.0, help="seconds between probe and check")
    p.add_argument("--rack", type=int, default=0, help="rack whose uplink is halved")
    p.add_argument("--prefix", default="rkd")
    p.add_argument("-o", "--output", default=None)
    args = p.parse_args(argv)

    from rankopt.testbed import Testbed
    from rankopt.testbed.topology import parse_rate

    where = ["--prefix", args.prefix]
    _rankopt("testbed", "up", *where, "--racks", args.racks, "--rates", args.rates)
    launch = ["--hosts", args.launch, "--seed", str(args.seed)]
    out: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="rankopt-drift-") as d:
            net, order = Path(d) / "net.npz", Path(d) / "order.json"
            t0 = time.perf_counter()
            _rankopt("testbed", "exec", "--attach", *where, *launch, "--",
                     sys.executable, "-m", "rankopt", "probe", "--backend", "mpi", "-o", str(net))  # fmt: skip
            print(_rankopt("solve", str(net), "--order-out", str(order)).strip())
            time.sleep(max(0.0, args.wait - (time.perf_counter() - t0)))

            def check(name: str, target: Path) -> None:
                res = Path(d) / f"{name}.json"
                text = _rankopt("testbed", "exec", "--attach", *where, *launch, "--",
                                sys.executable, "-m", "rankopt", "check", str(target),
                                "--json", str(res))  # fmt: skip
                out[name] = json.loads(res.read_text())
                print(f"--- rankopt check {target.name} ({name})\n{text.strip()}")

            check("quiet, order", order)
            check("quiet, launch", net)
            rate = parse_rate(args.rates.split(",")[1]) / 2
            Testbed.attach(args.prefix).set_uplink_rate(f"r{args.rack}", rate)
            print(f"=== rack {args.rack} uplink halved to {rate * 8 / 1e6:.0f} Mbit/s")
            check("halved, order", order)
            check("halved, launch", net)
    finally:
        _rankopt("testbed", "down", *where)
    print("\n| check | verdict | sampled pairs moved | re-ordering pays | gain of re-ordering |")
    print("|---|---|---|---|---|")
    for name, r in out.items():
        moved = sum(1 for q in r["pairs"] if q["moved"])
        lo, hi = r["resolved_interval"]
        print(
            f"| {name} | {r['verdict']} | {moved} of {len(r['pairs'])} | {r['pays']} | "
            f"{r['resolved_speedup']:.2f}x ({lo:.2f}-{hi:.2f}) |"
        )
    if args.output:
        Path(args.output).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
