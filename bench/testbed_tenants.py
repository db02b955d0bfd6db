"""Another tenant on the emulated testbed: the user path against the best order, per case.

Every row launches the user's entry point (``python -m rankopt.mpi``, default
flags, through ``rankopt testbed run``) on a network with a random launch,
while another tenant's flows run (or, with ``--no-tenant``, on the quiet
network), and times it against the launch order, its own order replayed and
the rack-contiguous order. Each (network, tenant) case is launched twice: the
probe, and so the order, may differ between launches. Needs root (network
namespaces); writes only under a temporary folder it removes.

    python bench/testbed_tenants.py                 # every case, table at the end
    python bench/testbed_tenants.py --no-tenant     # the same networks, quiet
    python bench/testbed_tenants.py --quick         # one network, one case
    python bench/testbed_tenants.py --other 3,4,2:1gbit,220mbit:11   # another network
    python bench/testbed_tenants.py --solo user-replay --solo best   # see below

The table: launch, user path (its own job), the user path's order replayed
with the others, and the best order measured (seconds, median of
``--repeats``, 6 by default, timed in visits of ``--block`` runs back to back,
3 by default: the user path's own job runs its repeats back to back, and
beside a TCP neighbour an order timed right after another order's traffic
reads faster than in a run of its own), the fraction of the best of the user path
(with its 90% bootstrap interval over the calls) and of its order replayed, the
modelled speedup
with its 90% interval as printed, the measured speedup, whether the interval
holds it, and the modelled speedup's error against the measured one; then one
line that counts the launches against the targets (interval holds, within ±25%,
user path at least 95% of the best, and under 95% beyond the calls' spread).

The timing job's orders are timed in visits; the user path's job runs alone.
``--solo user-replay --solo best`` also times the user path's order and the
fastest order of the timing job each in a job of its own, launched after the
timing job and run as the user path's job runs (a warm-up call, then its
repeats back to back): the last column gives their medians and the user
path's fraction of the faster, the same protocol on both sides. ``--solo-rounds 3`` times
those jobs in three rounds, the orders in turn, and adds the user path's order
against the best, both alone, by total time (beside a neighbour that comes and
goes, one job's median depends on the phase it met). ``--keep DIR``
keeps every launch's report (the network the user path saved, every call's time)
and its probe cache (``TAG-cache/``: the whole measurement, the sharing test's steps
included).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rankopt.testbed.topology import Topology

#: Networks no test uses: racks (hosts each), host and rack-uplink rates, launch seed.
NETWORKS = (
    ("3,3,3", "1gbit,250mbit", 5),
    ("4,3,2", "1gbit,200mbit", 7),
    ("2,4,3", "1gbit,300mbit", 9),
)
#: Tenant cases: label, flows, extra options of ``rankopt testbed run``.
TENANTS = (
    ("one uplink, one way, TCP paced", "rack0->rack1", ["--tenant-count", "3", "--tenant-rate", "50mbit"]),
    ("two uplinks, UDP paced", "rack0->rack1,rack2->rack0",
     ["--tenant-count", "2", "--tenant-rate", "40mbit", "--tenant-proto", "udp"]),
    ("one uplink, TCP unpaced", "rack1->rack2", ["--tenant-count", "2"]),
    ("on/off 2 s, TCP paced", "rack0->rack1",
     ["--tenant-count", "3", "--tenant-rate", "50mbit", "--tenant-on-off", "2,2"]),
    # phases longer than a probe, each flow at its own: 0 to 3 flows on at a time
    ("on/off 30 s, TCP paced", "rack0->rack1",
     ["--tenant-count", "3", "--tenant-rate", "50mbit", "--tenant-on-off", "30,30"]),
    # on a quarter of the time: the load the probe meets is not on half of it
    ("on 1 s / off 3 s, TCP paced", "rack0->rack1",
     ["--tenant-count", "3", "--tenant-rate", "50mbit", "--tenant-on-off", "1,3"]),
)  # fmt: skip


def run_case(racks, rates, seed, tenant, opts, args, work: Path, tag: str) -> dict:
    out = work / f"{tag}.json"
    cmd = [sys.executable, "-m", "rankopt", "testbed", "-q", "run", "--racks", racks,
           "--rates", rates, "--launch", "random", "--seed", str(seed), "--engines",
           args.engine, "--sizes", f"{args.size}M", "--random", "0", "--repeats",
           str(args.repeats), "--block", str(args.block), "-o", str(out)]  # fmt: skip
    for label in args.solo:
        cmd += ["--solo", label]
    if args.solo and args.solo_rounds > 1:
        cmd += ["--solo-rounds", str(args.solo_rounds)]
    if tenant is not None:
        cmd += ["--tenant", tenant, *opts, "--tenant-only"]
    if args.keep:
        # the user path's probe cache, in a folder of its own (still a first launch): the
        # whole measurement, the sharing test's steps included, which the saved network
        # leaves out
        cmd += ["--cache-dir", str(work / f"{tag}-cache")]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    report = json.loads(out.read_text())
    row = [r for r in report["summary"] if (r["tenant"] is None) == (tenant is None)][0]
    # the rack of every rank around the user path's ring: which uplinks its flows cross
    topo = Topology.from_dict(report["topology"])
    user = next(iter(report["user"].values()))
    if user.get("order") is not None:
        row["user_racks"] = "".join(str(topo.rack_of(report["hosts"][r])) for r in user["order"])
    # what the probe read: uplink sharing exponent (the saved network's record, which
    # leaves out an even split), and whether the robust objective solved
    record = (user.get("saved") or {}).get("network") or {}
    row["straggle"] = float(record.get("straggle") or 1.0)
    row["robust"] = "robust objective" in (user.get("report") or "")
    # the ring-direction trial's line, where the user path ran one
    trial = [ln for ln in (user.get("report") or "").splitlines() if "ring direction timed" in ln]
    row["direction_trial"] = trial[-1].strip() if trial else None
    return row


def _inside(row: dict) -> bool:
    """Whether the printed interval (two decimals) holds the measured speedup."""
    lo, hi = row["modelled_interval"] or (float("nan"),) * 2
    return lo - 0.005 <= row["speedup_user"] <= hi + 0.005


def _error(row: dict) -> float:
    """The modelled speedup's error against the measured one."""
    return row["modelled_speedup"] / row["speedup_user"] - 1.0


def fmt(label: str, net: str, launch: int, row: dict) -> str:
    lo, hi = row["modelled_interval"] or (float("nan"),) * 2
    meas = row["speedup_user"]
    inside = _inside(row)
    err = _error(row)
    return (
        f"| {label} | {net} | {launch} | {row['launch']:.2f} | {row['user']:.2f} | "
        f"{row['user_replay']:.2f} | {row['best']:.2f} ({row['best_label']}) | "
        f"{_of_best(row)} | {row['best'] / row['user_replay']:.0%} | "
        f"{row['modelled_speedup']:.2f}x ({lo:.2f}-{hi:.2f}) | {meas:.2f}x | "
        f"{'yes' if inside else 'no'} | {err:+.0%} |"
        + ("" if not row.get("solo") else f" {_solo(row)} |")
    )


def _of_best(row: dict) -> str:
    """The user path's fraction of the best median, with its 90% interval over the calls."""
    from rankopt.testbed.report import fraction_band

    return f"{row['fraction_of_best']:.0%}" + fraction_band(row.get("fraction_of_best_interval"))


def _below_best(row: dict) -> bool:
    """Whether the user path is under 95% of the best beyond the spread of the calls."""
    band = row.get("fraction_of_best_interval")
    return band is not None and band[1] < 0.95


def _solo(row: dict) -> str:
    """The orders timed each in a job of its own, and the user path's fraction of them."""
    cells = ", ".join(f"{k} {v:.2f}" for k, v in row["solo"].items())
    text = f"{cells}: {row['fraction_of_best_solo']:.0%}"
    if row.get("order_of_best_solo") is not None:
        text += f"; order by total {row['order_of_best_solo']:.0%}"
    return text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--no-tenant", action="store_true", help="the networks without a tenant")
    p.add_argument("--quick", action="store_true", help="one network, one tenant case")
    p.add_argument("--engine", default="mpi-ring", help="testbed engine (default: mpi-ring)")
    p.add_argument("--size", type=int, default=16, help="allreduce MB (default: 16)")
    p.add_argument(
        "--repeats", type=int, default=6,
        help="timed runs per order (default: 6: a neighbour's on/off period meets every order)",
    )  # fmt: skip
    p.add_argument(
        "--block", type=int, default=3,
        help="runs back to back per visit of an order, as the user path's own job runs them "
        "(default: 3; 1 alternates the orders run by run)",
    )  # fmt: skip
    p.add_argument(
        "--solo", action="append", default=[], metavar="ORDER",
        help="also time this order (user-replay, ideal, best, rival) in a job of its own, its "
        "repeats back to back as the user path's job runs them; adds the column 'of best "
        "(solo)': the user path against the fastest of them",
    )  # fmt: skip
    p.add_argument(
        "--solo-rounds", type=int, default=1, metavar="N",
        help="time the --solo orders in N rounds of jobs, in turn (default: 1); the tally "
        "then also counts the user path's order against the best, both alone, by total time",
    )  # fmt: skip
    p.add_argument("--launches", type=int, default=2, help="user-path launches per case")
    p.add_argument("--case", help="only the tenant cases whose label holds this text")
    p.add_argument("--network", help="only the networks whose racks are this, e.g. 3,3,3")
    p.add_argument(
        "--other",
        metavar="RACKS:RATES:SEED",
        help="this network instead of the usual three, e.g. 3,4,2:1gbit,220mbit:11",
    )
    p.add_argument("-o", "--output", help="also write the rows as JSON here")
    p.add_argument(
        "--keep", metavar="DIR",
        help="keep every launch's whole report (the saved network, per-call times) and its "
        "probe cache in DIR (default: a temporary folder, removed)",
    )  # fmt: skip
    args = p.parse_args()
    nets = NETWORKS[:1] if args.quick else NETWORKS
    if args.other:
        racks, rates, seed = args.other.split(":")
        nets = ((racks, rates, int(seed)),)
    cases = [(None, None, [])] if args.no_tenant else TENANTS[: 1 if args.quick else None]
    if args.case:
        cases = [c for c in cases if c[0] is not None and args.case in c[0]]
    if args.network:
        nets = [net for net in nets if net[0] == args.network]
    if not cases or not nets:
        p.error(f"no case or network matches --case {args.case!r} --network {args.network!r}")
    print("| tenant | racks, uplink | launch | launch s | user path s | replayed s | best s | "
          "of best (90%) | replayed of best | modelled (90%) | measured | in interval | "
          "modelled error |" + (" solo s: of best (solo) |" if args.solo else ""))  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if args.solo else ""))
    rows = []
    with tempfile.TemporaryDirectory(prefix="rankopt-tenants-") as tmp:
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            tmp = args.keep
        for racks, rates, seed in nets:
            for label, tenant, opts in cases:
                for launch in range(1, args.launches + 1):
                    tag = f"{racks}-{label}-{launch}".replace(",", "_").replace(" ", "_")
                    tag = tag.replace("/", "_")
                    row = run_case(racks, rates, seed, tenant, opts, args, Path(tmp), tag)
                    net = f"{racks}, {rates.split(',')[1]}, seed {seed}"
                    print(fmt(label or "none", net, launch, row), flush=True)
                    if row.get("direction_trial"):
                        print(f"  {row['direction_trial']}", file=sys.stderr, flush=True)
                    rows.append(
                        {**row, "case": label or "none", "network": net, "launch_no": launch}
                    )
    print()
    print(tally(rows))
    if args.output:
        Path(args.output).write_text(json.dumps(rows, indent=1))


def tally(rows: list[dict]) -> str:
    """The targets' counts over ``rows``: interval, ±25%, ≥95% of best, median error."""
    if not rows:
        return "no launches"
    n = len(rows)
    inside = sum(_inside(r) for r in rows)
    errs = [_error(r) for r in rows]
    near = sum(abs(e) <= 0.25 for e in errs)
    best = sum(r["fraction_of_best"] >= 0.95 for r in rows)
    replay = sum(r["best"] / r["user_replay"] >= 0.95 for r in rows)
    under = sum(_below_best(r) for r in rows)
    mid = statistics.median(errs)
    solo = [r["fraction_of_best_solo"] for r in rows if r.get("fraction_of_best_solo")]
    order = [r["order_of_best_solo"] for r in rows if r.get("order_of_best_solo")]
    return (
        f"{n} launches: interval holds {inside}/{n}, modelled within ±25% {near}/{n}, "
        f"user path >= 95% of best {best}/{n} (its order replayed {replay}/{n}; under 95% "
        f"beyond the calls' spread, the 90% interval below it, {under}/{n}), "
        f"median modelled error {mid:+.0%}, largest {max(errs):+.0%}"
        + (
            ""
            if not solo
            else f"; against orders timed in jobs of their own, user path >= 95% "
            f"{sum(f >= 0.95 for f in solo)}/{len(solo)}"
        )
        + (
            ""
            if not order
            else f"; the user path's order against the best, both alone, by total time: "
            f">= 95% {sum(f >= 0.95 for f in order)}/{len(order)}"
        )
    )


if __name__ == "__main__":
    main()
