"""What the probe reads beside each kind of tenant: load that came and went, or steady.

For every network and tenant case of ``bench/testbed_tenants.py`` (and the quiet
network), builds the emulated testbed (root, network namespaces), starts the
tenant's flows (``rankopt testbed noise``), runs the user's probe ``--probes``
times under a random launch (``rankopt probe --backend mpi`` through ``rankopt
testbed exec``, default flags) and reads each measurement as ``rankopt solve``
does: the largest slowdown of a recheck on a way the bandwidth phase read unloaded
(``measured_variability``), the uneven blocks, whether the load came and went
(and so the costs are averaged over time and the robust objective is the
default), the ways already loaded and how near the unloaded rate their fastest
recheck came, and the modelled speedup of the default solve with its 90% interval.
Writes only under a temporary folder it removes.

    python bench/testbed_recheck.py                    # every case, 2 probes each
    python bench/testbed_recheck.py --case "one way" --network 4,3,2
"""

from __future__ import annotations

import argparse
import math
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _testbed_common import testbed_down, testbed_exec, testbed_up
from testbed_tenants import NETWORKS, TENANTS

#: The tenant cases of ``testbed_tenants.py`` as options of ``rankopt testbed noise`` (the
#: same flags as ``rankopt testbed run``'s), and the quiet network (None).
CASES = tuple((label, ["--tenant", flows, *opts]) for label, flows, opts in TENANTS) + (
    ("none", None),
)
PREFIX = "rkr"


def read(path: Path, nbytes: float) -> dict:
    """What ``rankopt solve`` reads of the measurement at ``path``."""
    import rankopt
    from rankopt.network.core import (
        load_came_and_went,
        loaded_ways,
        measured_variability,
        uneven_blocks,
    )

    net = rankopt.Network.from_measurement(rankopt.load_measurement(path))
    res = rankopt.solve(net, nbytes=nbytes, rng=0)
    loaded = loaded_ways(net)
    return {
        "lifted": lifted(net, loaded),
        "slower": measured_variability(net),
        "uneven": uneven_blocks(net),
        "varied": load_came_and_went(net),
        "loaded": len(loaded),
        "robust": res.extra.get("robust") is not None,
        "speedup": res.speedup,
        "interval": res.speedup_interval,
    }


def lifted(net, loaded) -> float:
    """The fastest recheck of a way the bandwidth phase read loaded, over the fastest
    way between two groups of its level (the testbed's racks share one pod; nan where
    no loaded way was rechecked): near 1 where the load had gone by the recheck."""
    import numpy as np

    from rankopt.network.core import recheck_ways
    from rankopt.probe.hierarchy import block_runner_up

    best = float("nan")
    top: dict[int, float] = {}  # the fastest way between two groups, per level
    for (level, g, h), (before, slower) in recheck_ways(net).items():
        if (level, g, h) not in loaded:
            continue
        if level not in top:
            est = block_runner_up(net.bandwidth, np.asarray(net.groups[level]))
            top[level] = float(np.nanmax(np.where(np.eye(len(est), dtype=bool), np.nan, est)))
        got = before / min(slower) / top[level]
        best = got if math.isnan(best) else max(best, got)
    return best


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--probes", type=int, default=2, help="probes per case (default: 2)")
    p.add_argument("--case", help="only the cases whose label holds this text")
    p.add_argument("--network", help="only the networks whose racks are this, e.g. 3,3,3")
    p.add_argument("--size", type=int, default=16, help="allreduce MB priced (default: 16)")
    p.add_argument("--keep", metavar="DIR", help="keep every measurement in DIR")
    args = p.parse_args()
    if args.probes < 1:
        p.error(f"--probes must be at least 1; got {args.probes}")
    nets = [n for n in NETWORKS if args.network in (None, n[0])]
    cases = [c for c in CASES if args.case is None or args.case in c[0]]
    if not nets or not cases:
        p.error(f"no case or network matches --case {args.case!r} --network {args.network!r}")
    print("| tenant | racks, uplink | probe | recheck slower | uneven | came and went | "
          "loaded ways | loaded rechecked, of fastest | robust | modelled (90%) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="rankopt-recheck-") as tmp:
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            tmp = args.keep
        for racks, rates, seed in nets:
            for label, noise in cases:
                testbed_up(PREFIX, racks, rates)
                tenant = None
                try:
                    if noise is not None:
                        tenant = subprocess.Popen(
                            [sys.executable, "-m", "rankopt", "testbed", "-q", "noise",
                             "--attach", "--prefix", PREFIX, *noise, "--seconds", "3600"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        )  # fmt: skip
                        time.sleep(5)  # the flows up to their rate
                    for k in range(1, args.probes + 1):
                        tag = "".join(c if c.isalnum() else "_" for c in label)
                        out = Path(tmp) / f"{racks.replace(',', '')}-{tag}-{k}.npz"
                        cmd = [sys.executable, "-m", "rankopt", "probe", "--backend", "mpi",
                               "-o", str(out), "-q"]  # fmt: skip
                        testbed_exec(PREFIX, "random", seed, cmd)
                        r = read(out, args.size * 2**20)
                        lo, hi = r["interval"] or (float("nan"),) * 2
                        print(f"| {label} | {racks}, {rates.split(',')[1]} | {k} | "
                              f"{r['slower']:.2f} | {r['uneven']:.3f} | "
                              f"{'yes' if r['varied'] else 'no'} | {r['loaded']} | {r['lifted']:.2f} | "
                              f"{'yes' if r['robust'] else 'no'} | "
                              f"{r['speedup']:.2f}x ({lo:.2f}-{hi:.2f}) |", flush=True)  # fmt: skip
                finally:
                    if tenant is not None:  # Ctrl-C: the command removes every flow
                        tenant.send_signal(signal.SIGINT)
                        tenant.wait(timeout=60)
                    testbed_down(PREFIX)
    return 0


if __name__ == "__main__":
    sys.exit(main())
