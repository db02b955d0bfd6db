"""What the testbed experiment scripts share: the ``rankopt`` CLI as a subprocess.

Each script builds its own testbed (``testbed up``), runs the user's commands
inside it (``testbed exec``) and always takes it down again (``testbed down``).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Sequence
from typing import Any


def rankopt(*args: str, timeout: int = 3600) -> str:
    """``python -m rankopt ARGS``; its standard output, or exit with its tail on failure."""
    cmd = [sys.executable, "-m", "rankopt", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {shlex.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def testbed_exec(
    prefix: str,
    hosts: str,
    seed: int,
    cmd: Sequence[str],
    *,
    engine: str | None = None,
    timeout: int = 900,
) -> str:
    """``cmd`` under the launcher of the testbed ``prefix``, one process per host."""
    argv = ["testbed", "exec", "--attach", "--prefix", prefix, "--hosts", hosts]
    argv += ["--seed", str(seed), *(["--engine", engine] if engine else [])]
    return rankopt(*argv, "--", *cmd, timeout=timeout)


def testbed_down(prefix: str) -> None:
    """Take the testbed ``prefix`` down (never raises: it runs in ``finally`` blocks)."""
    subprocess.run(
        [sys.executable, "-m", "rankopt", "testbed", "down", "--prefix", prefix], check=False
    )


def modelled_totals(net: Any, workload: Any, engine: str | None, orders: dict[str, Any]) -> dict:
    """Each order's modelled total for ``workload`` on ``net`` (its default model), printed."""
    from rankopt.models import make_model
    from rankopt.models.workload import price_calls

    kw = net.default_model()
    model = make_model(
        net.latency,
        workload=price_calls(workload, net.n, engine),
        bandwidth=kw["bandwidth"],
        groups=kw["groups"],
        uplink_bandwidth=kw["uplink_bandwidth"],
    )
    modelled = {k: float(model.cost(o)) for k, o in orders.items()}
    for k, v in modelled.items():
        print(f"modelled {k:<32} {v:.4f} s")
    return modelled


def first_equal(orders: dict[str, Any]) -> dict[str, str]:
    """Each order's name -> the first name with the same permutation (timed once, under it)."""
    import numpy as np

    return {
        k: next(f for f, q in orders.items() if np.array_equal(q, o)) for k, o in orders.items()
    }


def report_rows(
    orders: dict[str, Any],
    same: dict[str, str],
    times: dict[str, list[float]],
    modelled: dict[str, float],
) -> list[dict[str, Any]]:
    """One printed line and one JSON row per order: median total, speedup vs ``launch``."""
    import statistics

    base = statistics.median(times["launch"])
    rows = []
    for k, o in orders.items():
        ts = times[same[k]]
        med = statistics.median(ts)
        rows.append(
            {
                "order": k,
                "same_as": None if same[k] == k else same[k],
                "median_total_s": med,
                "totals_s": ts,
                "speedup_vs_launch": base / med,
                "modelled": modelled[k],
                "permutation": [int(x) for x in o],
            }
        )
        alias = f"  (the {same[k]} order)" if same[k] != k else ""
        print(f"{k:<32} {med:8.3f} s  x{base / med:5.2f}  {ts}{alias}")
    return rows


def totals(out: str) -> list[float]:
    """The ``total_s SECONDS`` lines a timed program printed."""
    return [float(ln.split()[1]) for ln in out.splitlines() if ln.startswith("total_s")]


def workload_args(
    p: Any, *, racks: str, seed: int, prefix: str, rates: str = "1gbit,200mbit"
) -> None:
    """The testbed and timing options the workload scripts share."""
    p.add_argument("--racks", default=racks, help=f"hosts per rack (default: {racks})")
    p.add_argument("--rates", default=rates, help="host and uplink rates")
    p.add_argument("--launch", default="random")
    p.add_argument("--seed", type=int, default=seed)
    p.add_argument("--prefix", default=prefix)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-o", "--output", default=None)


def testbed_up(prefix: str, racks: str, rates: str, *extra: str) -> None:
    """``rankopt testbed up`` with these racks and rates (taken down by :func:`testbed_down`)."""
    up = [sys.executable, "-m", "rankopt", "testbed", "up", "--prefix", prefix]
    subprocess.run([*up, "--racks", racks, "--rates", rates, *extra], check=True)


def iteration_seconds(out: str) -> float:
    """The ``iteration_s SECONDS`` line a timed program printed."""
    return next(float(ln.split()[1]) for ln in out.splitlines() if ln.startswith("iteration_s"))


def iteration_table(
    times: dict[str, list[float]], user: list[dict], output: str | None, args: Any
) -> list[dict]:
    """Print each order's median iteration time and speedup over ``times["launch"]``.

    ``user`` holds the user path's result per round (its modelled speedup and
    interval go in its row). Writes ``{"args", "rows", "user"}`` to ``output``
    when given; returns the rows.
    """
    import json
    import statistics
    from pathlib import Path

    base = statistics.median(times["launch"])
    print("| order | iteration s (median) | speedup measured | modelled (interval) |")
    print("|---|---|---|---|")
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        modelled = ""
        if name == "user path":
            modelled = "; ".join(
                f"{u.get('speedup', 1.0):.2f}x"
                + (f" ({iv[0]:.2f}-{iv[1]:.2f})" if (iv := u.get("speedup_interval")) else "")
                for u in user
            )
        rows.append({"order": name, "times": ts, "median": med, "speedup": base / med})
        print(f"| {name} | {med:.4f} | {base / med:.2f}x | {modelled} |", flush=True)
    if output:
        Path(output).write_text(
            json.dumps({"args": vars(args), "rows": rows, "user": user}, indent=1)
        )
    return rows
