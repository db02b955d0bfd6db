"""A profiled torch (Gloo) workload in the emulated testbed: workload order vs single-call orders.

The torch counterpart of ``bench/testbed_workload.py``. Builds a testbed
(root, network namespaces), probes it over Gloo (``rankopt probe --backend
gloo``, for the single-call baselines), profiles ``bench/_mixed_torch.py``
with ``rankopt profile``'s torch hook, and runs the program through the
user's path, ``rankopt run --workload PROFILE -- PROGRAM`` (it probes, solves
with every call priced as Gloo runs it, keeps rank 0, which hosts the
rendezvous, and runs the program: its own job, timed once per round). Then
it times the program under the order that path saved, each call's own order
and rack-contiguous, with ``rankopt run --order FILE``, rounds interleaved,
and prints one line per order with the median measured total (and writes a
JSON report).

Gloo's calls can disagree about the order: its allreduce is a ring (racks
contiguous), its broadcast a binomial tree that sends to rank 1 first
(neighbours in different racks), so a mix of both has an order of its own.

Run (root)::

    python bench/testbed_workload_torch.py --racks 4,3,3 --launch random --seed 7 -o wl.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
from _testbed_common import (
    first_equal,
    modelled_totals,
    report_rows,
    testbed_down,
    testbed_exec,
    testbed_up,
    totals,
    workload_args,
)

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    workload_args(p, racks="4,3,3", seed=7, prefix="rkg")
    p.add_argument(
        "--calls",
        default="allreduce:65536:20,allreduce:16777216:2,broadcast:16777216:4",
        help="COLLECTIVE:BYTES:COUNT,... of bench/_mixed_torch.py",
    )
    args = p.parse_args(argv)

    import rankopt
    from rankopt.adapters._common import save_order
    from rankopt.adapters.profile import profile_command, read_rank_files, write_profile
    from rankopt.network import load_network

    work = Path(tempfile.mkdtemp(prefix="rankopt-wlt-"))
    work.chmod(0o755)
    prog = [sys.executable, str(HERE / "_mixed_torch.py"), *args.calls.split(",")]
    testbed_up(args.prefix, args.racks, args.rates)

    def gloo(cmd: list[str]) -> str:
        return testbed_exec(args.prefix, args.launch, args.seed, cmd, engine="gloo")

    try:
        net_file = work / "net.npz"
        gloo([sys.executable, "-m", "rankopt", "probe", "--backend", "gloo", "-o", str(net_file)])
        prof_dir = work / "profile"
        keep = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
        cmd, env = profile_command(prog, prof_dir, kind="torch", environ=keep)
        sets = [f"{k}={v}" for k, v in env.items()]
        gloo(["env", *sets, *cmd])
        prof = read_rank_files(prof_dir)
        write_profile(work / "profile.json", prof)
        print(prof.summary())

        net = load_network(net_file)
        wl = prof.workload()
        orders: dict[str, np.ndarray] = {"launch": np.arange(net.n)}
        # the user's path: `rankopt run --workload PROFILE -- PROGRAM` probes, solves
        # (rank 0 kept: it hosts the rendezvous) and runs the program in that order
        saved = work / "workload-order.txt"
        own: list[float] = []

        def user_path() -> None:
            run = [sys.executable, "-m", "rankopt", "run", "--workload", str(work / "profile.json")]
            out = gloo([*run, "--save", str(saved), "--", *prog])
            own.extend(totals(out))

        user_path()
        orders["workload"] = np.array([int(x) for x in saved.read_text().split()])
        print("workload order (rankopt run --workload):", orders["workload"].tolist())
        for c in wl:
            name = f"single {c.collective} {int(c.nbytes)}"
            one = rankopt.solve(
                net, workload=[(c.collective, c.nbytes, 1)], engine=prof.engine, keep_rank0=True
            )
            orders[name] = np.asarray(one.order)
        if net.groups:  # racks contiguous, rank 0's rack first and rank 0 first in it
            lab = np.asarray(net.groups[-1])
            key = np.where(lab == lab[0], -1, lab)
            orders["rack-contiguous"] = np.lexsort((np.arange(net.n), key))
        modelled = modelled_totals(net, wl, prof.engine, orders)
        same = first_equal(orders)  # an order equal to an earlier one is timed once
        timed = [k for k in orders if same[k] == k]
        files = {}
        for k in timed:
            files[k] = work / f"order-{len(files)}.txt"
            save_order(files[k], orders[k])
        times: dict[str, list[float]] = {k: [] for k in timed}
        for r in range(args.rounds):
            if r:
                user_path()  # the user's own job once per round as well
            for k in timed:
                replay = [sys.executable, "-m", "rankopt", "run", "-q", "--order", str(files[k])]
                times[k].append(totals(gloo([*replay, "--", *prog]))[0])
        report = report_rows(orders, same, times, modelled)
        med = statistics.median(own)
        base = statistics.median(times["launch"])
        print(f"{'workload, own job (user path)':<32} {med:8.3f} s  x{base / med:5.2f}  {own}")
        report.append({"order": "user path", "median_total_s": med, "totals_s": own})
        if args.output:
            Path(args.output).write_text(json.dumps({"args": vars(args), "rows": report}, indent=1))
    finally:
        testbed_down(args.prefix)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
