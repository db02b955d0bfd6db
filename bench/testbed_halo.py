"""A 2-D stencil's halo exchange in the emulated testbed: profiled traffic, then the user path.

Builds a testbed (root, network namespaces) and launches
``tests/mpi_scripts/halo2d.py`` (mpi4py, ``Sendrecv`` with up to four grid
neighbours per iteration, row-major ranks) in a random placement, so that
grid neighbours sit in different racks. Then:

1. profiles it once with ``rankopt profile``'s recorder (the PMPI shim with
   ``RANKOPT_PROFILE``, set on every rank) and merges the profile: its
   ``"traffic"`` is the program's point-to-point bytes per pair;
2. runs it, rounds interleaved, as launched; under the hand-placed block
   layout (ranks in row-major order filled into the racks one after the
   other, ``python -m rankopt.mpi --order``); and through the user path,
   ``python -m rankopt.mpi --workload profile.json`` with default flags,
   which probes, solves for the traffic and runs the program reordered.

Prints per order the median iteration time the program measured, its
speedup over the launch order, and for the user path the modelled speedup
and interval it printed. Writes only under a temporary folder it removes.

    python bench/testbed_halo.py
    python bench/testbed_halo.py --racks 3,3,3 --grid 3x3 --seed 4 -o halo.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _testbed_common import (
    iteration_seconds,
    iteration_table,
    testbed_down,
    testbed_exec,
    testbed_up,
    workload_args,
)

REPO = Path(__file__).resolve().parents[1]
HALO = REPO / "tests" / "mpi_scripts" / "halo2d.py"


def _with_env(env: dict[str, str], cmd: list[str]) -> list[str]:
    """Every rank sets ``env`` itself (whatever the launcher forwards)."""
    sets = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return ["sh", "-c", f"{sets} exec {shlex.join(cmd)}"]


def block_order(hosts: list[str], racks: list[int]) -> np.ndarray:
    """Launch ranks sorted by the rack (then host) they run on: rank ``k`` of the
    program goes to the ``k``-th process in rack order."""
    index = [int(h.rsplit("-h", 1)[1]) for h in hosts]
    rack_of = np.repeat(np.arange(len(racks)), racks)
    return np.lexsort((np.arange(len(hosts)), index, rack_of[index]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    workload_args(p, racks="4,4,4", seed=3, prefix="rkh", rates="1gbit,250mbit")
    p.add_argument("--grid", default="6x2", help="ROWSxCOLS of ranks (default: 6x2)")
    p.add_argument("--bytes", default="2e6", help="halo bytes per neighbour (default: 2e6)")
    p.add_argument("--iterations", type=int, default=8)
    args = p.parse_args(argv)

    from rankopt.adapters import shim
    from rankopt.adapters._common import save_order
    from rankopt.adapters.profile import read_rank_files, write_profile

    racks = [int(x) for x in args.racks.split(",")]
    work = Path(tempfile.mkdtemp(prefix="rankopt-halo-"))
    os.chmod(work, 0o755)
    lib = shim.build(outdir=work / "shim")
    py = sys.executable
    halo = [py, str(HALO), args.grid, args.bytes, str(args.iterations)]
    testbed_up(args.prefix, args.racks, args.rates)
    try:
        run = lambda cmd: testbed_exec(args.prefix, args.launch, args.seed, cmd)  # noqa: E731
        prof_dir = work / "profile"
        prof_dir.mkdir()
        run(_with_env({"LD_PRELOAD": str(lib), "RANKOPT_PROFILE": str(prof_dir)}, halo))
        prof = read_rank_files(prof_dir)
        profile = work / "profile.json"
        write_profile(profile, prof)
        print(prof.summary(), flush=True)
        # where the launch put each rank: its host (a one-line mpi4py program)
        where = run([py, "-c", "from mpi4py import MPI; import socket; h = MPI.COMM_WORLD.gather("
                     "socket.gethostname()); h and print('hosts', *h)"])  # fmt: skip
        hosts = next(ln.split()[1:] for ln in where.splitlines() if ln.startswith("hosts"))
        block = work / "block.txt"
        save_order(block, block_order(hosts, racks))
        cases = {
            "launch": halo,
            "block layout": [py, "-m", "rankopt.mpi", "--order", str(block), *halo[1:]],
        }
        times: dict[str, list[float]] = {k: [] for k in [*cases, "user path"]}
        user: list[dict] = []
        for r in range(args.rounds):
            for name, cmd in cases.items():
                times[name].append(iteration_seconds(run(cmd)))
            res = work / f"user{r}.json"
            cmd = [py, "-m", "rankopt.mpi", "--workload", str(profile), "--json", str(res)]
            times["user path"].append(iteration_seconds(run([*cmd, *halo[1:]])))
            user.append(json.loads(res.read_text()))
        iteration_table(times, user, args.output, args)
    finally:
        testbed_down(args.prefix)
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run(["ip", "netns", "list"], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
