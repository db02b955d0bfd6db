"""The probe at scale, simulated: group finding and the time estimate at n = 1,024 and 4,096.

The probe's own scheduling and inference code
(:class:`~rankopt.probe.linear_latency.LatencyPlanner`, the engine's pair
budget) runs against a modelled network (:mod:`rankopt.probe.simulate`):
every ping-pong is sampled with lognormal noise and a Pareto tail, congested
VMs are slower on all their links, and the duration is simulated the way the
engine runs -- each process its own pairs in slot order, one consensus and a
gather per stage -- not slept.

For each size, random layouts (:func:`~rankopt.probe.simulate.random_network`):
two zones of unequal size, unequal racks (1-48 hosts), 1-4 processes per host,
sample noise sigma drawn in 0.05-0.2, 5-10 % congested VMs. Printed per size:
the fraction of layouts whose groups (racks and zones) the probe found exactly,
the congested VMs reported against the true ones, the filled latency's error
against what an all-pairs probe would have measured for the same pairs (and
that probe's own noise floor), and the plan's estimate of the latency phase
against the simulated duration.

Run: ``python bench/bench_probe_sim.py [--layouts 100 10] [--sizes 1024 4096]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rankopt.probe.simulate import random_network, simulate_probe


def layouts(n: int, count: int, seed: int) -> list[tuple[dict, object]]:
    gen = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        per = gen.uniform(1.0, 4.0)
        hosts = max(8, int(n / per))
        cfg = {
            "hosts": hosts,
            "sigma": float(gen.uniform(0.05, 0.2)),
            "congested": float(gen.uniform(0.05, 0.10)),
            "seed": int(gen.integers(2**31)),
        }
        out.append(
            (
                cfg,
                random_network(
                    n,
                    hosts,
                    zones=2,
                    sigma=cfg["sigma"],
                    congested=cfg["congested"],
                    tail=1.5,
                    rng=cfg["seed"],
                ),
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 4096])
    ap.add_argument("--layouts", type=int, nargs="*", default=[100, 10], help="per size")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--verbose", action="store_true", help="one line per layout")
    args = ap.parse_args()
    counts = dict(
        zip(args.sizes, args.layouts + [args.layouts[-1]] * len(args.sizes), strict=False)
    )
    print(
        "| n | layouts | groups found | congested reported: true positives / reported / true "
        "| fill error (median abs log) | all-pairs noise floor | simulated latency phase s "
        "(median, max) | estimate / simulated (median, min-max) | stages (median) "
        "| pairs per process (median) | sim wall s |"
    )
    print("|" + "---|" * 11)
    for n in args.sizes:
        found = tp = reported = true_c = 0
        errors, floors, seconds, ratios, stages, per_proc = [], [], [], [], [], []
        t0 = time.perf_counter()
        for i, (cfg, net) in enumerate(layouts(n, counts[n], args.seed + n)):
            r = simulate_probe(net, rng=cfg["seed"])
            found += r.found
            tp += len(r.congested_found & r.congested_true)
            reported += len(r.congested_found)
            true_c += len(r.congested_true)
            errors.append(r.fill_error)
            floors.append(r.noise_floor)
            seconds.append(r.seconds)
            ratios.append(r.estimated / r.seconds)
            stages.append(len(r.stages))
            per_proc.append(2 * sum(p for _, _, p in r.stages) / n)
            if args.verbose:
                true = [int(g.max()) + 1 for g in net.groups]
                got = [int(g.max()) + 1 for g in r.levels]
                print(
                    f"  layout {i}: {cfg} groups {true} found {got} {r.found}; "
                    f"sim {r.seconds:.2f} s est {r.estimated:.2f} s; "
                    f"congested {len(r.congested_true)} reported {len(r.congested_found)}",
                    flush=True,
                )
        wall = time.perf_counter() - t0
        k = counts[n]
        print(
            f"| {n} | {k} | {found}/{k} ({found / k:.0%}) | {tp} / {reported} / {true_c} "
            f"| {np.median(errors):.3f} | {np.median(floors):.3f} "
            f"| {np.median(seconds):.1f}, {np.max(seconds):.1f} "
            f"| {np.median(ratios):.2f}, {np.min(ratios):.2f}-{np.max(ratios):.2f} "
            f"| {np.median(stages):.0f} | {np.median(per_proc):.0f} | {wall:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
