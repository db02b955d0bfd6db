"""A profiled mixed workload in the emulated testbed: workload order vs single-size orders.

Builds a testbed (root, network namespaces), probes it over MPI, profiles
``tests/shim_programs/mixed.c`` (allreduce at two sizes and an alltoall) with
the shim's recorder, solves rankopt's order for the profiled workload and for
each of its calls alone, and times the program under each order through the
shim (``RANKOPT_ORDER``), rounds interleaved. Prints one line per order with
the median measured total and writes a JSON report.

Run (root)::

    python bench/testbed_workload.py --racks 3,3,3 --launch random --seed 1 -o wl.json
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
    first_equal,
    modelled_totals,
    report_rows,
    testbed_down,
    testbed_exec,
    testbed_up,
    totals,
    workload_args,
)

REPO = Path(__file__).resolve().parents[1]


def _with_env(env: dict[str, str], cmd: list[str]) -> list[str]:
    """Every rank sets ``env`` itself (whatever the launcher forwards)."""
    sets = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return ["sh", "-c", f"{sets} exec {shlex.join(cmd)}"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    workload_args(p, racks="3,3,3", seed=1, prefix="rkw")
    p.add_argument("--latency", default="0")
    p.add_argument(
        "--calls",
        default="4096,300,4194304,5,1048576,5",
        help="A_BYTES,A_COUNT,B_BYTES,B_COUNT,C_BYTES,C_COUNT of mixed.c",
    )
    args = p.parse_args(argv)

    import rankopt
    from rankopt.adapters import shim
    from rankopt.adapters._common import save_order
    from rankopt.adapters.profile import read_rank_files, write_profile
    from rankopt.network import load_network

    work = Path(tempfile.mkdtemp(prefix="rankopt-wl-"))
    os.chmod(work, 0o755)
    lib = shim.build(outdir=work / "shim")
    exe = work / "mixed"
    subprocess.run(
        [str(shim.find_mpicc()), "-O2", "-o", str(exe), str(REPO / "tests/shim_programs/mixed.c")],
        check=True,
    )
    calls = args.calls.split(",")
    testbed_up(args.prefix, args.racks, args.rates, "--latency", args.latency)
    try:
        net_file = work / "net.npz"
        testbed_exec(
            args.prefix,
            args.launch,
            args.seed,
            [sys.executable, "-m", "rankopt", "probe", "--backend", "mpi", "-o", str(net_file)],
        )
        prof_dir = work / "profile"
        prof_dir.mkdir()
        env = {"LD_PRELOAD": str(lib), "RANKOPT_PROFILE": str(prof_dir)}
        testbed_exec(args.prefix, args.launch, args.seed, _with_env(env, [str(exe), *calls]))
        prof = read_rank_files(prof_dir)
        write_profile(work / "profile.json", prof)
        print(prof.summary())

        net = load_network(net_file)
        wl = prof.workload()
        orders: dict[str, np.ndarray] = {"launch": np.arange(net.n)}
        # the workload order as a user gets it: `rankopt solve NET --workload PROFILE`
        wl_order = work / "workload-order.txt"
        cli = [sys.executable, "-m", "rankopt", "solve", str(net_file), "-q"]
        cli += ["--workload", str(work / "profile.json"), "--order-out", str(wl_order)]
        print(subprocess.run(cli, check=True, capture_output=True, text=True).stdout)
        orders["workload"] = np.array([int(x) for x in wl_order.read_text().split()])
        for c in wl:
            if c.count < 2:
                continue  # the program's one-off calls
            name = f"single {c.collective} {int(c.nbytes)}"
            one = rankopt.solve(net, workload=[(c.collective, c.nbytes, 1)], engine=prof.engine)
            orders[name] = np.asarray(one.order)
        if net.groups:  # the coarsest level's groups kept contiguous
            orders["rack-contiguous"] = np.argsort(net.groups[-1], kind="stable")
        modelled = modelled_totals(net, wl, prof.engine, orders)
        same = first_equal(orders)  # an order equal to an earlier one is timed once
        timed = [k for k in orders if same[k] == k]
        times: dict[str, list[float]] = {k: [] for k in timed}
        files = {}
        for k in timed:
            files[k] = work / f"order-{len(files)}.txt"
            save_order(files[k], orders[k])
        for _ in range(args.rounds):
            for k in timed:
                env = {"LD_PRELOAD": str(lib), "RANKOPT_ORDER": str(files[k])}
                out = testbed_exec(
                    args.prefix, args.launch, args.seed, _with_env(env, [str(exe), *calls])
                )
                times[k].append(totals(out)[0])
        report = report_rows(orders, same, times, modelled)
        if args.output:
            Path(args.output).write_text(json.dumps({"args": vars(args), "rows": report}, indent=1))
    finally:
        testbed_down(args.prefix)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
