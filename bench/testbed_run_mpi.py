"""``rankopt run-mpi`` on the testbed: an unmodified MPI program reordered through the shim.

Builds racks from network namespaces (root), launches one rank per host in a
random order, starts another tenant's traffic (optional), and runs what a user
of a compiled MPI program runs, with default flags:

1. ``rankopt probe --backend mpi -o net.npz`` under the job's ``mpirun``;
2. ``rankopt run-mpi --network net.npz -- mpirun ... ./allreduce`` (solve, the
   ring-direction trial where the solve leaves it open, then the program
   through the shim).

The program (C, built here with ``mpicc``) times ``MPI_Allreduce`` of
``--size`` MiB ``--repeats`` times after one untimed call, slowest rank per call.
It also runs plain (the launch order) and through ``run-mpi --order`` in the
testbed's ideal order (racks 0, 1, 2, ... in blocks), so that the three
medians come from one testbed and tenant. Open MPI's ring allreduce is forced
through ``OMPI_MCA_`` variables (as the campaign's ``mpi-ring``), which the
engine model reads too. Writes only under a temporary folder it removes.

    python bench/testbed_run_mpi.py
    python bench/testbed_run_mpi.py --racks 4,3,2 --rates 1gbit,200mbit --seed 7 \\
        --tenant "rack0->rack1" --tenant-count 3 --tenant-rate 50mbit
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, count = atoi(argv[1]) / 4, reps = atoi(argv[2]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float *a = malloc(sizeof(float) * count), *b = malloc(sizeof(float) * count);
    for (int i = 0; i < count; i++) a[i] = 1.0f;
    MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("TIMES");
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime(), dt, most;
        MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        dt = MPI_Wtime() - t;
        MPI_Reduce(&dt, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) printf(" %.4f", most);
    }
    if (rank == 0) printf("\n");
    free(a); free(b);
    MPI_Finalize();
    return 0;
}
"""


def _times(text: str) -> list[float]:
    m = re.search(r"^TIMES((?: [0-9.]+)+)$", text, re.M)
    if m is None:
        raise RuntimeError(f"the program printed no times:\n{text[-2000:]}")
    return [float(x) for x in m.group(1).split()]


def main(argv: list[str] | None = None) -> int:
    from rankopt.testbed import Testbed, Topology
    from rankopt.testbed.experiment import ideal_order
    from rankopt.testbed.launch import (
        MPI_MCA,
        RING_MCA,
        _base_env,
        _uts,
        hosts_option,
        mpirun_command,
    )  # fmt: skip
    from rankopt.testbed.tenant import Tenant, parse_tenant

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--racks", default="4,3,2", help="hosts of every rack (default: 4,3,2)")
    p.add_argument("--rates", default="1gbit,200mbit", help="host and rack-uplink rates")
    p.add_argument("--seed", type=int, default=7, help="random launch seed (default: 7)")
    p.add_argument("--size", type=int, default=16, help="allreduce MiB (default: 16)")
    p.add_argument("--repeats", type=int, default=6, help="timed calls per run (default: 6)")
    p.add_argument("--tenant", help="another tenant's flows, e.g. rack0->rack1")
    p.add_argument("--tenant-count", type=int, default=3)
    p.add_argument("--tenant-rate", default=None, help="pace of each flow, e.g. 50mbit")
    p.add_argument("--tenant-proto", default="tcp", choices=("tcp", "udp"))
    p.add_argument("--prefix", default="rkm")
    args = p.parse_args(argv)

    racks = tuple(int(x) for x in args.racks.split(","))
    topo = Topology(racks=racks, rates=tuple(args.rates.split(",")))
    hosts = hosts_option(topo, "random", seed=args.seed)
    env = {
        **_base_env(None),
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        **{f"OMPI_MCA_{k}": str(v) for k, v in {**MPI_MCA, **RING_MCA}.items()},
    }
    with tempfile.TemporaryDirectory(prefix="rankopt-runmpi-") as d:
        work = Path(d)
        (work / "allreduce.c").write_text(PROGRAM)
        subprocess.run(
            ["mpicc", "-O2", "-o", str(work / "allreduce"), str(work / "allreduce.c")], check=True
        )
        with Testbed(topo, prefix=args.prefix) as tb:
            mpirun = mpirun_command(tb, hosts, work)
            program = [str(work / "allreduce"), str(args.size << 20), str(args.repeats)]
            ideal = ideal_order(tb, hosts)
            (work / "ideal.txt").write_text("".join(f"{int(x)}\n" for x in ideal))
            first = int(hosts[0])

            def launch(cmd: list[str]) -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    ["ip", "netns", "exec", tb.ns(first), *_uts(tb.ns(first)), *cmd],
                    env={**os.environ, **env}, capture_output=True, text=True, timeout=900,
                    cwd=work,
                )  # fmt: skip

            spec = None
            if args.tenant:
                spec = parse_tenant(
                    args.tenant, topo, count=args.tenant_count, rate=args.tenant_rate,
                    proto=args.tenant_proto,
                )  # fmt: skip
            with Tenant(tb, spec, seed=1) if spec is not None else contextlib.nullcontext():
                net = work / "net.npz"
                probe = launch([*mpirun, sys.executable, "-m", "rankopt", "probe", "--backend",
                                "mpi", "-o", str(net)])  # fmt: skip
                if probe.returncode != 0:
                    raise RuntimeError(f"probe failed:\n{probe.stderr[-3000:]}")
                rm = ["rankopt", "run-mpi"]
                runs = {
                    "launch": launch([*mpirun, *program]),
                    "run-mpi": launch([*rm, "--network", str(net), "--", *mpirun, *program]),
                    "ideal": launch([*rm, "--order", "ideal.txt", "--", *mpirun, *program]),
                }
        for name, proc in runs.items():
            if proc.returncode != 0:
                raise RuntimeError(f"{name} failed:\n{proc.stderr[-3000:]}")
        report = runs["run-mpi"].stderr
        keep = ("order", "modelled speedup", "ring direction", "note", "stop")
        print("\n".join(ln for ln in report.splitlines() if ln.strip().startswith(keep)))
        med = {k: statistics.median(_times(v.stdout)) for k, v in runs.items()}
        best = min(med.values())
        print(f"racks {args.racks}, launch hosts {hosts.tolist()}, tenant {args.tenant or 'none'}")
        for k, v in med.items():
            t = _times(runs[k].stdout)
            print(f"  {k:8s} median {v:.3f} s, speedup {med['launch'] / v:.2f}x, "
                  f"{best / v:.0%} of the best; calls " + " ".join(f"{x:.2f}" for x in t))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
