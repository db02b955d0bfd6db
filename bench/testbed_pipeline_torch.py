"""A torch (Gloo) pipeline in the emulated testbed: profiled traffic, then ``rankopt run``.

Builds a testbed (root, network namespaces) and launches
``bench/_pipeline_torch.py`` (every rank a pipeline stage: activations
forward, gradients back, ``send``/``recv`` between neighbouring ranks only)
in a random placement, so that consecutive stages sit in different racks.
Then:

1. profiles it once with ``rankopt profile``'s torch hook and merges the
   profile: its ``"traffic"`` is the program's point-to-point bytes per pair;
2. runs it, rounds interleaved, as launched (``rankopt run --order`` of the
   identity); under the hand-placed block layout (rank 0's rack first, rank 0
   first in it: it hosts the rendezvous, then the other racks one after the
   other); and through the user path, ``rankopt run --workload profile.json``
   with default flags, which probes over Gloo, solves for the traffic and
   runs the program reordered.

Prints per order the median iteration time the program measured, its
speedup over the launch order, and for the user path the modelled speedup
and interval it printed. Writes only under a temporary folder it removes.

    python bench/testbed_pipeline_torch.py
    python bench/testbed_pipeline_torch.py --racks 3,3,3 --seed 4 -o pipeline.json
"""

from __future__ import annotations

import argparse
import json
import os
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

HERE = Path(__file__).resolve().parent
PIPELINE = HERE / "_pipeline_torch.py"


_WHERE = (
    "import socket, torch.distributed as d; d.init_process_group('gloo'); "
    "h = [None] * d.get_world_size(); d.all_gather_object(h, socket.gethostname()); "
    "d.get_rank() or print('hosts', *h, flush=True); d.destroy_process_group()"
)


def block_order(hosts: list[str], racks: list[int]) -> np.ndarray:
    """Launch ranks by rack, rank 0's rack first and rank 0 first in it, then host."""
    index = np.array([int(h.rsplit("-h", 1)[1]) for h in hosts])
    rack = np.repeat(np.arange(len(racks)), racks)[index]
    key = np.where(rack == rack[0], -1, rack)
    first = np.arange(len(hosts)) != 0
    return np.lexsort((index, first, key))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    workload_args(p, racks="3,3,3", seed=3, prefix="rkp", rates="1gbit,250mbit")
    p.add_argument("--bytes", default="4e6", help="bytes per activation (default: 4e6)")
    p.add_argument("--micro", type=int, default=4, help="microbatches per iteration")
    p.add_argument("--iterations", type=int, default=4)
    args = p.parse_args(argv)

    from rankopt.adapters._common import save_order
    from rankopt.adapters.profile import profile_command, read_rank_files, write_profile

    racks = [int(x) for x in args.racks.split(",")]
    work = Path(tempfile.mkdtemp(prefix="rankopt-pipe-"))
    os.chmod(work, 0o755)
    py = sys.executable
    prog = [py, str(PIPELINE), args.bytes, str(args.micro), str(args.iterations)]
    testbed_up(args.prefix, args.racks, args.rates)
    try:

        def gloo(cmd: list[str]) -> str:
            return testbed_exec(args.prefix, args.launch, args.seed, cmd, engine="gloo")

        prof_dir = work / "profile"
        keep = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
        cmd, env = profile_command(prog, prof_dir, kind="torch", environ=keep)
        gloo(["env", *[f"{k}={v}" for k, v in env.items()], *cmd])
        prof = read_rank_files(prof_dir)
        profile = work / "profile.json"
        write_profile(profile, prof)
        print(prof.summary(), flush=True)
        # where the launch put each rank: rank 0 prints every rank's host
        where = gloo([py, "-c", _WHERE])
        hosts = next(ln.split()[1:] for ln in where.splitlines() if ln.startswith("hosts "))
        files = {"launch": work / "launch.txt", "block layout": work / "block.txt"}
        save_order(files["launch"], np.arange(len(hosts)))
        save_order(files["block layout"], block_order(hosts, racks))
        times: dict[str, list[float]] = {k: [] for k in [*files, "user path"]}
        user: list[dict] = []
        run = [py, "-m", "rankopt", "run"]
        for r in range(args.rounds):
            for name, f in files.items():
                times[name].append(
                    iteration_seconds(gloo([*run, "-q", "--order", str(f), "--", *prog]))
                )
            res = work / f"user{r}.json"
            out = gloo([*run, "--workload", str(profile), "--json", str(res), "--", *prog])
            times["user path"].append(iteration_seconds(out))
            user.append(json.loads(res.read_text()))
        iteration_table(times, user, args.output, args)
    finally:
        testbed_down(args.prefix)
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run(["ip", "netns", "list"], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
