"""Job-start overhead of the user path, first launch and cached launches, on the testbed.

Runs ``rankopt testbed run`` (default flags for the user's entry points,
``python -m rankopt.mpi`` and ``rankopt run``) ``--launches`` times on one
network with one probe cache folder: the first launch probes and keeps the
probe, the later ones reuse it after the drift check. Prints, per launch and
engine, what the cache did, the job-start overhead (the user path's time to
the program's first line less that of the plain program), the order and the
fraction of the best order measured. Needs root (network namespaces); writes
only under a temporary folder it removes, and compiles rankopt's bytecode
first (``compileall``, as ``pip install`` does), so that no launch pays for
compiling the package on every rank.

    python bench/testbed_cache.py
    python bench/testbed_cache.py --racks 4,4,4 --engines mpi-default --launches 4
    python bench/testbed_cache.py --topology    # the user path given the racks (--topology)

``--topology`` writes the testbed's racks as a ``host rack`` text topology and passes
``--topology FILE`` to the user's entry point: the provider's groups, no discovery.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--racks", default="3,3,3", help="hosts per rack (default: 3,3,3)")
    p.add_argument("--rates", default="1gbit,250mbit", help="host and uplink rates")
    p.add_argument("--seed", type=int, default=5, help="launch placement seed")
    p.add_argument("--engines", default="mpi-default,gloo", help="testbed engines")
    p.add_argument("--launches", type=int, default=3, help="launches (the first is cold)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per order")
    p.add_argument("-o", "--output", help="also write the rows as JSON here")
    p.add_argument(
        "--topology", action="store_true", help="give the user path the racks (--topology)"
    )
    args = p.parse_args()
    import compileall

    import rankopt

    compileall.compile_dir(Path(rankopt.__file__).parent, quiet=1)
    print("| launch | engine | probe | overhead s | order | of best |")
    print("|---|---|---|---|---|---|")
    rows = []
    with tempfile.TemporaryDirectory(prefix="rankopt-cache-") as tmp:
        user_args = []
        if args.topology:
            topo = Path(tmp) / "racks.txt"
            topo.write_text(_rack_topology(args.racks))
            user_args = ["--user-args", f"--topology {topo}"]
        for launch in range(1, args.launches + 1):
            out = Path(tmp) / f"run{launch}.json"
            cmd = [sys.executable, "-m", "rankopt", "testbed", "-q", "run", "--racks",
                   args.racks, "--rates", args.rates, "--launch", "random", "--seed",
                   str(args.seed), "--engines", args.engines, "--sizes", "16M", "--random",
                   "0", "--repeats", str(args.repeats), "--cache-dir", str(Path(tmp) / "cache"),
                   "-o", str(out), *user_args]  # fmt: skip
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            report = json.loads(out.read_text())
            best = {s["engine"]: s["fraction_of_best"] for s in report["summary"]}
            for engine, user in report["user"].items():
                row = {
                    "launch": launch,
                    "engine": engine,
                    "probe": user.get("probe_cache"),
                    "overhead_s": user.get("overhead_s"),
                    "order": user.get("order"),
                    "fraction_of_best": best.get(engine),
                }
                rows.append(row)
                print(
                    f"| {launch} | {engine} | {row['probe']} | {row['overhead_s']:.2f} | "
                    f"{row['order']} | {row['fraction_of_best']:.0%} |",
                    flush=True,
                )
            if launch == 1:
                phases = _probe_phases(Path(tmp) / "cache")
                for row in rows:
                    row["probe_phases_s"] = phases.get(row["engine"], {})
    for row in rows[: len(report["user"])]:
        spent = ", ".join(f"{k} {v:.2f}" for k, v in row.get("probe_phases_s", {}).items())
        print(f"first launch, {row['engine']}: probe phases (s): {spent}")
    for engine in dict.fromkeys(row["engine"] for row in rows):
        cached = [
            r["overhead_s"]
            for r in rows
            if r["engine"] == engine and r["launch"] > 1 and str(r["probe"]).startswith("cached")
        ]
        if cached:
            print(
                f"cached launches, {engine}: median overhead {statistics.median(cached):.2f} s "
                f"over {len(cached)} ({min(cached):.2f}-{max(cached):.2f} s)"
            )
    if args.output:
        Path(args.output).write_text(json.dumps(rows, indent=1))


def _rack_topology(racks: str) -> str:
    """``host rack`` lines for the hosts of ``rankopt testbed run --racks RACKS`` (its
    default prefix): each host's name and rack as the testbed gives them."""
    from rankopt.testbed import Testbed, Topology

    topo = Topology(racks=tuple(int(x) for x in racks.split(",")))
    tb = Testbed(topo)  # names only: nothing is built
    return "".join(f"{tb.ns(h)} rack{topo.rack_of(h)}\n" for h in range(topo.n_hosts))


def _probe_phases(cache: Path) -> dict[str, dict[str, float]]:
    """Seconds per probe phase of every kept probe, by testbed engine."""
    from rankopt.probe.measurement import load_measurement

    found: dict[str, dict[str, float]] = {}
    for path in sorted(cache.rglob("*.npz")):
        m = load_measurement(path)
        engine = "gloo" if "gloo" in m.backend.lower() else "mpi-default"
        spent: dict[str, float] = {}
        for phase, _steps, seconds in m.parameters.get("phase_seconds", []):
            spent[phase] = spent.get(phase, 0.0) + float(seconds)
        found[engine] = spent
    return found


if __name__ == "__main__":
    main()
