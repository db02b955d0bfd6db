"""Run the entry points a user runs, with default flags, inside a testbed.

Contents
--------
user_argv
    The command line of the user's path for an engine: ``python -m
    rankopt.mpi --save FILE WORKER`` under mpirun (Open MPI), ``python -m
    rankopt.run --save FILE -- WORKER`` per process (torch Gloo).
run_user_path
    Launch the timing worker through that entry point (it probes, solves on a
    :class:`rankopt.Network` and applies the order before the worker starts),
    and return the worker's times, the order the entry point used, the
    modelled speedup it printed and the time it added to the job start.
parse_report
    The modelled speedup, its interval and the solve time from the report the
    entry points print on rank 0.

The worker times allreduce on the world it is given (``MPI.COMM_WORLD`` is
the reordered world under ``rankopt.mpi``; the Gloo world follows the
``RANK`` that ``rankopt run`` chose), so what is timed is what a user's
program gets.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rankopt._files import atomic_write_text
from rankopt.testbed.launch import RING_MCA, run_gloo, run_mpi
from rankopt.testbed.netns import Testbed

__all__ = ["parse_report", "run_user_path", "user_argv", "worker_argv"]

_NUM = r"[0-9.]+(?:e[+-]?\d+)?"
_SPEEDUP = re.compile(
    rf"modelled speedup\s*:\s*({_NUM})x(?:\s*\(90% interval ({_NUM})-({_NUM})x)?", re.I
)
_SOLVE_MS = re.compile(rf"stop\s*:.*?,\s*({_NUM}) ms", re.I)


def worker_argv(engine: str, cfg_path: str | Path) -> list[str]:
    """The timing worker of ``engine`` for configuration ``cfg_path``."""
    mod = "worker_gloo" if engine == "gloo" else "worker_mpi"
    return [sys.executable, "-m", f"rankopt.testbed.{mod}", str(cfg_path)]


def user_argv(
    engine: str, program: Sequence[str], save: str | Path, extra: Sequence[str] = ()
) -> list[str]:
    """The user's command for ``program``: the engine's entry point, default flags.

    Examples
    --------
    >>> user_argv("gloo", ["python", "w.py"], "o.txt")[2:]
    ['rankopt.run', '--save', 'o.txt', '--', 'python', 'w.py']
    >>> user_argv("mpi-ring", ["python", "-m", "w"], "o.txt")[2:]
    ['rankopt.mpi', '--save', 'o.txt', '-m', 'w']
    """
    prog = list(program)
    if engine == "gloo":
        return [sys.executable, "-m", "rankopt.run", "--save", str(save), *extra, "--", *prog]
    if prog and Path(prog[0]).name.startswith("python"):
        prog = prog[1:]  # rankopt.mpi runs a pyfile or -m module in its own interpreter
    return [sys.executable, "-m", "rankopt.mpi", "--save", str(save), *extra, *prog]


_CACHE = re.compile(r"^probe: (.*)$", re.M)


def parse_report(text: str) -> dict[str, Any]:
    """Modelled speedup, its 90% interval and the solve time from a printed report.

    Examples
    --------
    >>> parse_report(
    ...     "  modelled speedup  : 2.959x (90% interval 2.57-3x from the measured spread)\\n"
    ...     "  stop              : converged after 9 iterations, 80 evaluations, 12.5 ms"
    ... )
    {'modelled_speedup': 2.959, 'modelled_interval': [2.57, 3.0], 'solve_s': 0.0125}
    """
    out: dict[str, Any] = {"modelled_speedup": None, "modelled_interval": None, "solve_s": None}
    m = _SPEEDUP.search(text)
    if m:
        out["modelled_speedup"] = float(m.group(1))
        if m.group(2):
            out["modelled_interval"] = [float(m.group(2)), float(m.group(3))]
    s = _SOLVE_MS.search(text)
    if s:
        out["solve_s"] = float(s.group(1)) * 1e-3
    c = _CACHE.search(text)
    if c:
        out["probe_cache"] = c.group(1).strip()
    return out


def _read_order(path: Path, n: int) -> tuple[list[int] | None, dict[str, Any] | None]:
    """The saved order and the network record it carries (a ``--save x.json`` file)."""
    if not path.exists():
        return None, None
    from rankopt.adapters._common import read_order_file

    f = read_order_file(path)
    order = [int(x) for x in f.order]
    if sorted(order) != list(range(n)):
        return None, None
    return order, {"network": f.network, "solved": f.solved}


def run_user_path(
    tb: Testbed,
    hosts: np.ndarray,
    engine: str,
    sizes: Sequence[int],
    *,
    repeats: int,
    workdir: Path,
    timeout: float,
    extra: Sequence[str] = (),
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Time allreduce in a job started through the user's entry point.

    Parameters
    ----------
    tb : Testbed
    hosts : ndarray
        Host of every launch rank.
    engine : {"mpi-ring", "mpi-default", "gloo"}
    sizes : sequence of int
        Allreduce sizes in bytes, timed ``repeats`` times each.
    repeats : int
    workdir : Path
    timeout : float
    extra : sequence of str
        Flags added to the entry point (none: what a user gets).
    cache_dir : Path, optional
        The entry point's probe cache folder (``RANKOPT_CACHE_DIR``); default
        ``workdir / "probe-cache"``, new with every experiment: each
        experiment's first launch of an engine is a first launch.

    Returns
    -------
    dict
        ``argv``, ``times`` (one list per size), ``order`` (from ``--save``:
        ``order[k]`` = launch rank of new rank ``k``; None when not written),
        ``order_matches`` (the hosts the worker saw agree with the order),
        ``saved`` (the network record and what was modelled, as the entry
        point's ``--save x.json`` wrote them: the probe to re-price any order on),
        ``report`` (rank 0's stderr), the parsed ``modelled_speedup``,
        ``modelled_interval`` and ``solve_s``, and ``ready_s`` (launch to the
        worker's first line after the engine is up).
    """
    n = len(hosts)
    stamp = time.monotonic_ns()
    cfg_path = workdir / f"user-{engine}-{stamp}.json"
    save = workdir / f"user-{engine}-{stamp}.order.json"
    cfg = {
        "orders": [list(range(n))],
        "jobs": [[0, int(b)] for b in sizes],
        "repeats": repeats,
        "out": str(cfg_path.with_suffix(".out.json")),
        "timeout": timeout,
    }
    atomic_write_text(cfg_path, json.dumps(cfg), what="worker configuration")
    argv = user_argv(engine, worker_argv(engine, cfg_path), save, extra)
    t0 = time.time()
    env = {"RANKOPT_CACHE_DIR": str(cache_dir or workdir / "probe-cache")}
    if engine == "gloo":
        done = run_gloo(tb, hosts, argv, env=env, timeout=timeout)
        stderr = "\n".join(p.stderr or "" for p in done)
    else:
        mca = RING_MCA if engine == "mpi-ring" else None
        stderr = run_mpi(tb, hosts, argv, mca=mca, env=env, timeout=timeout).stderr or ""
    res = json.loads(Path(str(cfg["out"])).read_text())
    order, record = _read_order(save, n)
    names = res.get("hostnames")
    matches = None
    if order is not None and names:
        matches = [tb.ns(int(hosts[r])) for r in order] == list(names)
    return {
        "argv": argv,
        "times": res["times"],
        "order": order,
        "order_matches": matches,
        "report": stderr[-4000:],
        **parse_report(stderr),
        "ready_s": float(res["t_ready"]) - t0 if "t_ready" in res else None,
        "saved": record,
    }
