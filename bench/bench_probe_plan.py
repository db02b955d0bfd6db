"""The probe's plan at scale: ``rankopt probe --plan`` for n = 1024 on 256 hosts.

Targets (issue 16): at most 8 n bandwidth slots and at most 60 s estimated for the
whole probe, with a 3-level latency matrix (4 pods x 8 racks x 8 hosts x 4 ranks,
synthetic cloud latencies) and with flat, noise-only latency (30 us x lognormal 5%);
25 Gbit/s links, the probe's default settings. Also measures the real probe on
loopback (``--measure N ...``: mpiexec with N ranks posing as hosts of 4) and
prints it beside the plan's estimate for the same job.

Run: ``python bench/bench_probe_plan.py`` (plans only) or
``python bench/bench_probe_plan.py --measure 16 32``.
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
from pathlib import Path

import numpy as np

import rankopt

REPO = Path(__file__).resolve().parents[1]
LINK = 25e9 / 8


def _plan(lat: np.ndarray, hosts: list[str], *extra: str) -> dict:
    """``rankopt probe --plan --json`` for this job; in process if the CLI cannot start."""
    with tempfile.TemporaryDirectory() as d:
        lat_path, host_path = Path(d) / "lat.npy", Path(d) / "hosts.txt"
        np.save(lat_path, lat)
        host_path.write_text("".join(h + "\n" for h in hosts))
        cmd = [sys.executable, "-m", "rankopt", "probe", "--plan", "--hosts", str(host_path)]
        cmd += ["--latency", str(lat_path), "--link-rate", str(LINK), "--json", *extra]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            plan = json.loads(proc.stdout)
        else:  # the function behind --plan, with the probe's default settings
            from rankopt.probe.plan import plan_probe

            mode = (
                extra[extra.index("--bandwidth-mode") + 1]
                if "--bandwidth-mode" in extra
                else "auto"
            )
            plan = plan_probe(lat, hosts, mode=mode, link_rate=LINK).to_dict()
            plan["via"] = "plan_probe"
        plan["plan_wall_s"] = time.perf_counter() - t0
        return plan


def plans() -> list[tuple[str, dict]]:
    cloud = rankopt.synthetic_cloud(4, 8, 8, 4, congested=0.0, shuffle=True, rng=16)
    n = cloud.n
    rng = np.random.default_rng(16)
    flat = 30e-6 * np.exp(0.05 * rng.standard_normal((n, n)))
    np.fill_diagonal(flat, 0.0)
    return [
        # the default bandwidth mode ("auto": linear above 32 hosts)
        ("3-level latency", _plan(cloud.latency, list(cloud.hosts))),
        ("flat latency", _plan(flat, list(cloud.hosts))),
    ]


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

        bw = m.bandwidth if mode == "all-pairs" else None
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
        bandwidth=bw if mode == "all-pairs" else None,
        step_overhead=overhead,
    )
    return plan.estimated_seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", type=int, nargs="*", default=[], help="loopback ranks to probe")
    ap.add_argument("--modes", nargs="*", default=["linear"], help="bandwidth modes to measure")
    args = ap.parse_args()
    print(
        "| latency | n | hosts | latency rounds | bandwidth slots | 8 n | stages | "
        "estimated s | target |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, p in plans():
        ok = p["bandwidth_slots"] <= 8 * p["n"] and p["estimated_seconds"] <= 60
        stages = ", ".join(f"{s} {k}" for s, k in p["bandwidth_stages"])
        print(
            f"| {name} | {p['n']} | {p['hosts']} | {p['latency_rounds']} | "
            f"{p['bandwidth_slots']} | {8 * p['n']} | {stages} | "
            f"{p['estimated_seconds']:.1f} | {'met' if ok else 'MISSED'} |"
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


if __name__ == "__main__":
    main()
