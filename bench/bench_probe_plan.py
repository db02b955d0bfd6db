"""The probe's plan at scale: ``rankopt probe --plan`` for n = 1,024, 4,096 and 16,384.

Networks (:func:`rankopt.probe.simulate.random_network`): two zones of unequal
size (one-way latency between them 0.6-1.5 ms), unequal racks inside them,
8 % congested VMs (1.5-3 times slower on all their links), lognormal noise
and a Pareto tail on every sample; processes spread over the hosts, launch
order shuffled. The issue's job is the first row: 1,024 processes on 342
hosts. The plan is given what a probe would see without the samples' noise:
the (n, n) latency of every pair (its own deviation and the congestion
included) up to n = 4,096, the host-level (H, H) model at 16,384 (an
(n, n) matrix of 16,384 processes is 2 GB).

Printed per job: the latency schedule (mode, stages, slots, pairs), the
bandwidth slots, the estimated seconds (latency, bandwidth, control, total),
the groups found against the model's, and the planner's own cost: wall and
CPU seconds (CPU is what the planner needs; the wall clock also counts other
work on a shared machine) and its peak memory (tracemalloc, a second run).

Targets (issue 27): planner <= 2 s and <= 200 MB at n = 4,096, runs at
n = 16,384; latency phase estimated <= 30 s at n = 1,024 and <= 60 s at 4,096.

``--baseline DIR`` also plans the jobs up to 4,096 with the rankopt checkout
in ``DIR`` (the all-pairs latency phase of earlier versions), in a
subprocess, for a before/after table.

It also measures the real probe on loopback (``--measure N ...``: mpiexec with N
ranks posing as hosts of 4) and prints it beside the plan's estimate for the
same job.

Run: ``python bench/bench_probe_plan.py [--sizes 1024 4096 16384] [--baseline DIR]``
or ``python bench/bench_probe_plan.py --sizes --measure 16 32``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

import rankopt

REPO = Path(__file__).resolve().parents[1]
LINK = 25e9 / 8
#: (n, hosts) of the planned jobs
JOBS = {1024: 342, 4096: 1024, 16384: 4096}


def network(n: int, seed: int = 27):  # type: ignore[no-untyped-def]
    from rankopt.probe.simulate import random_network

    return random_network(n, JOBS[n], zones=2, sigma=0.1, congested=0.08, tail=1.5, rng=seed)


def plan_input(net) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The latency the plan is given: per process pair up to 4,096, else per host pair."""
    if net.n <= 4096:
        return net.latency_matrix()
    hl = net.host_latency * np.outer(net.factor, net.factor)
    np.fill_diagonal(hl, np.diag(net.host_latency))
    return hl


def timed(lat: np.ndarray, hosts: list[str]) -> tuple[dict, float, float, float]:
    """The plan, its wall and CPU seconds, and its peak traced memory (MB, second run)."""
    from rankopt.probe.plan import plan_probe

    t0, c0 = time.perf_counter(), time.process_time()
    plan = plan_probe(lat, hosts, link_rate=LINK)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    tracemalloc.start()
    plan_probe(lat, hosts, link_rate=LINK)
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    out = plan.to_dict()
    return out, wall, cpu, peak


_BASELINE = r"""
import json, sys, time, tracemalloc
import numpy as np
from rankopt.probe.plan import plan_probe
lat = np.load(sys.argv[1]); hosts = open(sys.argv[2]).read().split()
t0, c0 = time.perf_counter(), time.process_time()
plan = plan_probe(lat, hosts, link_rate=float(sys.argv[3]))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
tracemalloc.start()
plan_probe(lat, hosts, link_rate=float(sys.argv[3]))
peak = tracemalloc.get_traced_memory()[1] / 1e6
print(json.dumps({"plan": plan.to_dict(), "wall": wall, "cpu": cpu, "peak": peak}))
"""


def baseline(directory: str, lat: np.ndarray, hosts: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as d:
        np.save(Path(d) / "lat.npy", lat)
        (Path(d) / "hosts.txt").write_text("\n".join(hosts))
        env = dict(os.environ, PYTHONPATH=directory)
        proc = subprocess.run(
            [sys.executable, "-c", _BASELINE, f"{d}/lat.npy", f"{d}/hosts.txt", str(LINK)],
            capture_output=True,
            text=True,
            env=env,
            cwd=d,
        )
        if proc.returncode:
            return {"error": proc.stderr.strip().splitlines()[-1]}
        return json.loads(proc.stdout)


def measure(n: int, mode: str) -> tuple[float, dict, object]:
    """Wall time of the probe (rank 0's measurement duration), the plan for it, the measurement."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit("mpiexec not found")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env["RANKOPT_PROBE_TEST_HOSTS"] = "4"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    script = REPO / "tests" / "mpi_scripts" / "probe_measure.py"
    with tempfile.TemporaryDirectory() as d:
        cmd = [mpiexec, "-n", str(n), "--oversubscribe", "-x", "PYTHONPATH", "-x"]
        cmd += ["RANKOPT_PROBE_TEST_HOSTS", sys.executable, str(script), d]
        cmd += ["timeout=60", f'bandwidth_mode="{mode}"']
        subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
        m = rankopt.load_measurement(Path(d) / "rank0.npz")
        # plan the same job with what the probe measured (latency and rates)
        from rankopt.probe.plan import plan_probe

        bw = m.bandwidth if mode in ("all-pairs", "sampled") else None
        rate = float(np.median(m.bandwidth[~np.eye(n, dtype=bool)]))
        plan = plan_probe(m.latency, m.hosts, mode=mode, link_rate=rate, bandwidth=bw)
        return m.duration, plan.to_dict(), m


def predicted(m: object, overhead: float, mode: str) -> float:
    """The plan's estimate for the job of ``m`` with a given per-step overhead."""
    from rankopt.probe.plan import plan_probe

    n = m.latency.shape[0]  # type: ignore[attr-defined]
    bw = m.bandwidth  # type: ignore[attr-defined]
    rate = float(np.median(bw[~np.eye(n, dtype=bool)]))
    plan = plan_probe(
        m.latency,  # type: ignore[attr-defined]
        m.hosts,  # type: ignore[attr-defined]
        mode=mode,
        link_rate=rate,
        bandwidth=bw if mode in ("all-pairs", "sampled") else None,
        step_overhead=overhead,
    )
    return plan.estimated_seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=list(JOBS), choices=list(JOBS))
    ap.add_argument("--baseline", help="a rankopt checkout to plan the same jobs with (n <= 4096)")
    ap.add_argument("--measure", type=int, nargs="*", default=[], help="loopback ranks to probe")
    ap.add_argument("--modes", nargs="*", default=["linear"], help="bandwidth modes to measure")
    args = ap.parse_args()
    print(
        "| n | hosts | latency mode | latency stages / rounds | latency slots | latency pairs "
        "| bandwidth slots | est. latency s | est. bandwidth s | est. control s | est. total s "
        "| groups found | groups true | congested found/true | planner wall s | planner CPU s "
        "| planner peak MB |"
    )
    print("|" + "---|" * 17)
    rows = []
    for n in args.sizes:
        net = network(n)
        lat = plan_input(net)
        hosts = list(net.hosts)
        p, wall, cpu, peak = timed(lat, hosts)
        true = [int(g.max()) + 1 for g in net.groups]
        lat_stages = len(p["latency_stages"]) if p["latency_mode"] == "linear" else "-"
        pairs = sum(s[2] for s in p["latency_stages"]) if p["latency_stages"] else n * (n - 1) // 2
        print(
            f"| {n} | {p['hosts']} | {p['latency_mode']} | {lat_stages} | {p['latency_rounds']} "
            f"| {pairs} | {p['bandwidth_slots']} | {p['latency_seconds']:.1f} "
            f"| {p['bandwidth_seconds']:.1f} | {p['control_seconds']:.1f} "
            f"| {p['estimated_seconds']:.1f} | {p['levels'][1:]} | {true} "
            f"| {p['congested_hosts']}/{int(np.sum(net.factor > 1))} | {wall:.2f} | {cpu:.2f} "
            f"| {peak:.0f} |",
            flush=True,
        )
        rows.append((n, lat, hosts))
    if args.baseline:
        print(f"\nbaseline: {args.baseline}")
        print(
            "| n | latency rounds | bandwidth slots | est. latency s | est. total s | groups "
            "| planner wall s | planner CPU s | planner peak MB |"
        )
        print("|" + "---|" * 9)
        for n, lat, hosts in rows:
            if n > 4096:
                print(f"| {n} | not run: the (n, n) plan input alone is 2 GB |")
                continue
            got = baseline(args.baseline, lat, hosts)
            if "error" in got:
                print(f"| {n} | failed: {got['error']} |")
                continue
            p = got["plan"]
            print(
                f"| {n} | {p['latency_rounds']} | {p['bandwidth_slots']} "
                f"| {p['latency_seconds']:.1f} | {p['estimated_seconds']:.1f} | {p['levels'][1:]} "
                f"| {got['wall']:.2f} | {got['cpu']:.2f} | {got['peak']:.0f} |",
                flush=True,
            )
    if args.measure:
        from rankopt.probe.plan import calibrate_step_overhead

        print(
            "\n| ranks (4 per posed host) | mode | measured s | phases (steps, s) | "
            "estimated s (default overhead) | ratio | step overhead seen | "
            f"estimated s (calibrated on {args.measure[0]} ranks) | ratio |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for mode in args.modes:
            first_overhead = None
            for n in args.measure:
                got, plan, m = measure(n, mode)
                est = plan["estimated_seconds"]
                seen = calibrate_step_overhead(m)
                if first_overhead is None:
                    first_overhead = seen
                cal = predicted(m, first_overhead, mode)
                phases = ", ".join(
                    f"{name} {k}: {sec:.2f}"
                    for name, k, sec in m.parameters["phase_seconds"]  # type: ignore[attr-defined]
                )
                print(
                    f"| {n} | {mode} | {got:.2f} | {phases} | {est:.2f} | {got / est:.2f} | "
                    f"{seen * 1e3:.2f} ms | {cal:.2f} | {got / cal:.2f} |"
                )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nload average while running: {load:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
