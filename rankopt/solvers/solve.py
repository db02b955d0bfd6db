"""``solve()``: one entry point for every collective, objective and method."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._rng import normalize_rng
from rankopt._validation import (
    NanPolicy,
    RankoptInputError,
    check_groups,
    check_matrix,
    check_options,
    check_order,
    check_positive,
)
from rankopt.models import RING_OBJECTIVES, make_model
from rankopt.models.base import CostModel
from rankopt.models.custom import CustomModel
from rankopt.order import identity, invert
from rankopt.solvers._base import (
    METHODS,
    STOP_REASONS,
    MethodOutput,
    SolveContext,
    check_method_options,
    rank0_pinned,
    register,
)
from rankopt.solvers.exact import BRUTE_FORCE_MAX_N, HELD_KARP_MAX_N
from rankopt.solvers.layout import applies as layout_applies
from rankopt.solvers.mapping import applies as map_applies
from rankopt.solvers.result import SolveResult
from rankopt.solvers.spec import MODEL_FIELDS, ModelFields, ModelSpec, Robust
from rankopt.units import format_size

if TYPE_CHECKING:
    from typing import Unpack

logger = logging.getLogger("rankopt")

__all__ = ["solve", "model_spec", "auto_method", "as_matrices", "check_stop_reason", "LAUNCH_KEPT"]

#: ``SolveResult.stop_reason`` when no order beat the launch order, which is then returned.
LAUNCH_KEPT = "launch_order_kept"

#: dtypes ``solve()`` keeps a latency matrix in (float32 is not widened: the ring
#: kernels read both); anything else is validated into one float64 copy.
KERNEL_DTYPES = (np.float64, np.float32)

#: Largest n solved exactly by ``method="auto"``.
AUTO_EXACT_MAX_N = 12
#: Above this many processes ``method="auto"`` solves step schedules on
#: networks with groups by ``layout`` rather than ``anneal`` (up to
#: :data:`rankopt.solvers.layout.ANNEAL_MAX_N` processes ``anneal``'s order is
#: one of its starts, so it never prices higher). Without that start,
#: ``layout`` priced up to 1% higher than ``anneal`` on 6 of 144 uneven
#: networks of 12-64 processes (2 and 3 levels, Rabenseifner and recursive
#: doubling), where ``anneal``'s four starts are cheap.
AUTO_LAYOUT_MIN_N = 64


def auto_method(model: CostModel, time_limit: float | None = None) -> str:
    """The method ``method="auto"`` runs for ``model`` (the documented rule).

    * point-to-point traffic (``capabilities.traffic``, on a latency matrix):
      ``map`` (:mod:`rankopt.solvers.mapping`), whatever its size;
    * ring ``sum``: ``held_karp`` (exact) for n <= 12; else ``two_opt`` when
      ``time_limit`` is under 1 ms per 100 processes; else ``ils``;
    * ring ``bottleneck``: ``brute_force`` (exact) for n <= 9, else ``ils``
      (threshold search);
    * any other model, custom objectives included: ``brute_force`` for
      n <= 8; else ``greedy_cluster`` when ``time_limit`` is under 10 us per
      process; else, above :data:`AUTO_LAYOUT_MIN_N` processes, ``layout``
      for a step schedule that is no ring priced on a network with groups
      (Rabenseifner, recursive doubling / halving, trees under
      ``"contention"``, alone or in a workload:
      :func:`rankopt.solvers.layout.applies`); else ``anneal`` started from
      the greedy-cluster order.

    "Ring" is what the model declares (``capabilities.ring``); ``held_karp``
    needs a cost that is exactly a ring sum (``capabilities.ring_matrix``).
    ``bench/bench_solvers.py`` (group ``auto``) measures the rule;
    ``bench/bench_solve_scale.py`` the ``layout`` branch against ``anneal``.
    """
    n = model.n
    caps = model.capabilities
    if map_applies(model):
        return "map"
    if caps.ring is not None:
        if caps.ring == "sum":
            if caps.ring_sum_exact and n <= min(AUTO_EXACT_MAX_N, HELD_KARP_MAX_N):
                return "held_karp"
            return "two_opt" if time_limit is not None and time_limit < 1e-5 * n else "ils"
        return "brute_force" if n <= min(9, BRUTE_FORCE_MAX_N) else "ils"
    if n <= 8:
        return "brute_force"
    if time_limit is not None and time_limit < 1e-5 * n:
        return "greedy_cluster"
    if n > AUTO_LAYOUT_MIN_N and not caps.ring_schedule and layout_applies(model):
        return "layout"
    return "anneal"


@register("auto", doc="exact when small, else the best heuristic", delegates=True)
def _auto(model: CostModel, ctx: SolveContext) -> MethodOutput:
    name = auto_method(model, ctx.time_limit)
    fn, allowed = METHODS[name].fn, METHODS[name].options
    sub = SolveContext(
        **{**ctx.__dict__, "options": {k: v for k, v in ctx.options.items() if k in allowed}}
    )
    out = fn(model, sub)
    ctx.history[:] = sub.history
    out.method = out.method or name
    return out


def as_matrices(latency: Any, bandwidth: Any = None) -> tuple[Any, Any]:
    """Unpack a Measurement-like object (``.latency``/``.bandwidth``) or a path."""
    if hasattr(latency, "latency"):
        if bandwidth is None:
            bandwidth = getattr(latency, "bandwidth", None)
        latency = latency.latency
    elif isinstance(latency, (str, bytes)) or hasattr(latency, "__fspath__"):
        if str(latency).endswith(".npz"):  # a measurement: latency and bandwidth, one read
            from rankopt.probe.measurement import load_measurement

            return as_matrices(load_measurement(latency), bandwidth)
        from rankopt.network.io import load_matrix

        latency = load_matrix(latency)
    return latency, bandwidth


def solve(
    latency: ArrayLike | Any,
    collective: str = "allreduce",
    algorithm: str = "ring",
    *,
    model: ModelSpec | None = None,
    method: str = "auto",
    rng: None | int | np.random.Generator = 0,
    time_limit: float | None = None,
    max_iter: int | None = None,
    keep_rank0: bool = False,
    init: ArrayLike | None = None,
    callback: Callable[[dict[str, Any]], Any] | None = None,
    nan: NanPolicy = "raise",
    options: Mapping[str, Any] | None = None,
    **model_fields: Unpack[ModelFields],
) -> SolveResult:
    """Find the rank order that minimises the modelled cost of a collective.

    Parameters
    ----------
    latency : array_like (n, n), path, Network, HierarchicalNetwork, Measurement or Cloud
        One-way latency in seconds, ``latency[i, j]`` from process i to j
        (original ranks), or a whole network: a :class:`rankopt.Network`,
        a :class:`rankopt.HierarchicalNetwork` (very large jobs: a ring
        solved on its host-level matrix, :func:`rankopt.solvers.hierarchical.solve_hierarchical`),
        a :class:`rankopt.Measurement` or :class:`rankopt.Cloud` (made a
        Network, hierarchy and uplinks inferred), or a path (``.npz``:
        :func:`rankopt.load_network`; other files:
        :func:`rankopt.load_matrix`).
    collective, algorithm : str
        The collective operation and the algorithm the engine runs
        (shorthands of the :class:`~rankopt.ModelSpec` fields; with
        ``model``, left at their defaults or equal to the spec's).
        ``"ring"``, the default, on a collective without a ring prices its
        ring pattern (:data:`rankopt.models.schedule.RING_PATTERN`: the
        chain for a broadcast, ring reduce-scatter and gather for a reduce,
        the pairwise exchange for an all-to-all); the result names it.
    model : ModelSpec, optional
        What to price: collective, algorithm, objective, message size,
        network overrides, workload, engine and the robust policy
        (:class:`rankopt.ModelSpec`, whose fields document each).
    method : str
        One of the registered methods (``rankopt.solvers.METHODS``);
        ``"auto"`` follows :func:`auto_method`.
    rng : None, int or numpy.random.Generator, default 0
        Randomness; the seed used is recorded in the result. The default is
        a fixed seed, so the same input gives the same order; ``None`` draws
        a fresh seed.
    time_limit : float, optional
        Wall-clock guard in seconds (results then depend on machine speed).
    max_iter : int, optional
        The reproducible budget (kicks for ``ils``, moves for local search).
    keep_rank0 : bool
        Guarantee ``order[0] == 0``: the process at original rank 0 (e.g. a
        rendezvous-store host) keeps rank 0. Free for ring objectives, which
        are invariant under rotation.
    init : array_like, optional
        Start order for local-search methods.
    callback : callable, optional
        Called with ``{"elapsed", "cost", "iteration"}`` on progress.
    nan : {"raise", "symmetric", "max", "mean"}
        Policy for missing (NaN) latency entries.
    options : mapping, optional
        Method-specific options (e.g. ``{"neighbors": 12}``); unknown ones
        raise ``TypeError``.
    **model_fields
        The other fields of :class:`~rankopt.ModelSpec` as keywords
        (``objective``, ``nbytes``, ``bandwidth``, ``groups``,
        ``uplink_bandwidth``, ``straggle``, ``workload``, ``engine``,
        ``robust``): ``solve(lat, nbytes=1e6)`` is
        ``solve(lat, model=ModelSpec(nbytes=1e6))``.

    Returns
    -------
    SolveResult
        Unpacks as ``order, cost = solve(...)``; ``result.model_spec`` is the
        spec solved, ``result.stop_reason`` one of
        :data:`rankopt.solvers.STOP_REASONS`.

    Raises
    ------
    RankoptInputError
        For an invalid matrix, order, budget, model field (see
        :class:`~rankopt.ModelSpec`) or method (the message lists the valid
        ones), and for a model field given both in ``model`` and as a
        keyword.
    TypeError
        For an unknown keyword (the message lists the model fields) or
        unknown method options.

    Notes
    -----
    The steps, each a function of this module: the spec from ``model`` and
    the keywords (:func:`model_spec`); the model's inputs, the network's
    where the spec leaves them out (:func:`_model_inputs`); the model, with
    the workload priced per call and the robust objective
    (:func:`_build_model`); the method's search (:func:`_search`); the
    order made final (:func:`_polished`); the launch order kept when the
    order does not beat it (:func:`_launch_order_kept`) or could be slower
    on the measured spread (:func:`_checked_against_spread`); the result
    (:func:`_make_result`).

    ``order[k]`` is the original rank of the process given new rank ``k``;
    ``result.rank_of`` is its inverse. For a measured network (one with
    spreads, up to :data:`rankopt.models.robust.INTERVAL_MAX_N` processes) the
    result carries ``speedup_interval``, the 90% interval of
    the modelled speedup that the measurement supports
    (:func:`rankopt.models.robust.speedup_interval`); an order that could be
    slower than the launch order on the networks drawn from that spread
    (:func:`rankopt.models.robust.keep_launch_order`) is a gain within the
    noise, and the launch order is kept.
    The baseline is the launch order
    (identity). ``solve`` never returns an order whose modelled cost is not
    below the launch order's: when the method found none, the launch order
    is returned with ``stop_reason == "launch_order_kept"`` (the cost the
    method reached is in ``result.extra["found_cost"]``, and a warning is
    logged when it was worse).

    Examples
    --------
    Four processes, two per rack, launched interleaved; the optimum found
    here is proven by brute force:

    >>> import itertools, numpy as np, rankopt
    >>> rack = np.array([0, 1, 0, 1])
    >>> lat = np.where(rack[:, None] == rack[None, :], 1e-6, 1e-4)
    >>> res = rankopt.solve(lat, rng=0)
    >>> res.order, res.speedup
    (array([0, 2, 3, 1]), 1.98...)
    >>> min(rankopt.models.ring.ring_sum_reference(lat, (0,) + p)
    ...     for p in itertools.permutations(range(1, 4))) == res.cost
    True
    """
    t0 = time.perf_counter()
    spec = model_spec(model, collective, algorithm, model_fields)
    from rankopt.network.core import as_network
    from rankopt.network.hierarchical import HierarchicalNetwork

    if isinstance(latency, HierarchicalNetwork):
        return _solve_hierarchical(
            latency, spec, method=method, rng=rng, time_limit=time_limit, max_iter=max_iter,
            keep_rank0=keep_rank0, callback=callback, options=options, init=init, nan=nan,
        )  # fmt: skip
    network = as_network(latency)
    lat, inputs, notes = _model_inputs(spec, network, latency, nan)
    ctx = _context(
        lat.shape[0], method, options, rng, time_limit, max_iter, keep_rank0, init, callback, t0
    )
    prob = _build_model(spec, network, lat, inputs, ctx.seed, notes)
    baseline = prob.model.cost(identity(prob.n))
    order, out = _search(prob, method, ctx)
    order, cost = _polished(prob, order, ctx, method)
    stop_reason, kept = out.stop_reason, not cost < baseline
    if kept:
        order, cost, stop_reason = _launch_order_kept(
            prob.n, cost, baseline, stop_reason, out.method or method, prob.extra, prob.notes
        )
    if prob.robust is not None:  # the order is the robust objective's; its figures are
        cost, baseline = _measured_point(prob, order, cost, baseline)  # the network's own
    cost, baseline = _time_averaged(prob, order, cost, baseline)
    if not kept and not cost < baseline:  # faster with the load off, not over time
        kept = True
        prob.notes.append("the order found is not faster than the launch order over time")
        order, cost, stop_reason = _launch_order_kept(
            prob.n, cost, baseline, stop_reason, out.method or method, prob.extra, prob.notes
        )
    interval = None
    if network is not None and network.measured and not prob.custom:
        order, cost, stop_reason, interval = _checked_against_spread(
            network, order, cost, baseline, stop_reason, kept,
            (prob.collective, prob.algorithm, prob.model_kw, ctx.seed), prob.extra, prob.notes,
        )  # fmt: skip
    if prob.robust is not None:
        _record_robust(prob, cost, baseline)
    _ring_alternative(prob, order, cost)
    return _make_result(prob, spec, order, cost, baseline, stop_reason, interval, out, method, ctx)


def model_spec(
    model: ModelSpec | None,
    collective: str = "allreduce",
    algorithm: str = "ring",
    fields: Mapping[str, Any] | None = None,
) -> ModelSpec:
    """The spec ``solve(latency, collective, algorithm, model=model, **fields)`` prices.

    Without ``model``, the keywords make one. With it, ``fields`` must be
    empty and ``collective``/``algorithm`` at their defaults or equal to the
    spec's.

    Raises
    ------
    TypeError
        For a key of ``fields`` that is no field of :class:`ModelSpec`; the
        message lists the fields and ``solve()``'s other keywords.
    RankoptInputError
        For a field given both in ``model`` and in ``fields`` (or a
        collective/algorithm the spec contradicts), or a ``model`` that is
        not a :class:`ModelSpec`.

    Examples
    --------
    >>> model_spec(None, "allgather", fields={"nbytes": 1e6}) == ModelSpec("allgather", nbytes=1e6)
    True
    """
    fields = dict(fields or {})
    unknown = sorted(set(fields) - set(MODEL_FIELDS))
    if unknown:
        raise TypeError(
            f"solve() got an unexpected keyword argument {unknown[0]!r}; the model fields it "
            f"takes as keywords are {', '.join(MODEL_FIELDS[2:])} (rankopt.ModelSpec), and its "
            f"other keywords {', '.join(_SOLVER_KEYWORDS)}."
        )
    if model is None:
        return ModelSpec(collective, algorithm, **fields)
    if not isinstance(model, ModelSpec):
        raise RankoptInputError(
            f"`model` must be a rankopt.ModelSpec; got {type(model).__name__} {model!r} instead."
        )
    if fields:
        both = sorted(fields)
        raise RankoptInputError(
            f"{', '.join(f'`{k}`' for k in both)} given both in `model` and as a keyword: give "
            f"each field in one place (model.replace({both[0]}=...) is the spec with it changed)."
        )
    for name, value, default in (
        ("collective", collective, "allreduce"),
        ("algorithm", algorithm, "ring"),
    ):
        if value != default and value != getattr(model, name):
            raise RankoptInputError(
                f"`{name}` is {value!r} but `model` has {name}={getattr(model, name)!r}: give "
                "it in one place."
            )
    return model


#: ``solve()``'s keywords that are not model fields (for the unknown-keyword error).
_SOLVER_KEYWORDS = (
    "model", "method", "rng", "time_limit", "max_iter", "keep_rank0", "init", "callback", "nan",
    "options",
)  # fmt: skip


@dataclass
class _Problem:
    """What :func:`_build_model` made of a spec: the model and what later steps read."""

    lat: NDArray[Any]
    network: Any
    model: CostModel
    collective: str  # as the result reports it ("workload" for a mix)
    algorithm: str
    nbytes: float | None
    groups: Any
    custom: bool  # a callable objective
    model_kw: dict[str, Any]  # make_model's keywords of the model: the draws', each call's
    priced: Sequence[Any] | None  # the workload's priced calls
    robust: dict[str, Any] | None  # what extra["robust"] records
    extra: dict[str, Any]
    notes: list[str]

    @property
    def n(self) -> int:
        return int(self.lat.shape[0])


def _model_inputs(
    spec: ModelSpec, network: Any, latency: Any, nan: NanPolicy
) -> tuple[NDArray[Any], dict[str, Any], list[str]]:
    """The working matrix, ``make_model``'s keywords (the network's where the spec
    leaves them out, :func:`_network_model`) and notes."""
    if network is not None:
        inputs, notes = _network_model(network, spec)
        latency = network.latency
    else:
        latency, bandwidth = as_matrices(latency, spec.bandwidth)
        notes = []
        inputs = {
            "objective": spec.objective,
            "bandwidth": bandwidth,
            "nbytes": spec.nbytes,
            "groups": spec.groups,
            "uplink_bandwidth": spec.uplink_bandwidth,
            "straggle": spec.straggle,
            "elastic": None,
        }
    # the one working matrix: the input itself when it already is what the kernels read
    lat = check_matrix(latency, "latency", nan=nan, copy=False, dtypes=KERNEL_DTYPES)
    if spec.groups is not None and len(spec.groups):  # before a model or the tie-break reads them
        check_groups(spec.groups, lat.shape[0])
    return lat, inputs, notes


def _context(
    n: int,
    method: str,
    options: Mapping[str, Any] | None,
    rng: None | int | np.random.Generator,
    time_limit: float | None,
    max_iter: int | None,
    keep_rank0: bool,
    init: ArrayLike | None,
    callback: Callable[[dict[str, Any]], Any] | None,
    start: float,
) -> SolveContext:
    """The solver's keywords, validated, as the methods receive them."""
    check_options("method", method, tuple(sorted(METHODS)))
    if options is not None and not isinstance(options, Mapping):
        raise RankoptInputError(
            f"`options` must be a mapping of method options; got {type(options).__name__} "
            f"{options!r}."
        )
    opts = dict(options or {})
    check_method_options(method, opts)
    time_limit = check_positive(time_limit, "time_limit", allow_none=True)
    max_iter = check_positive(max_iter, "max_iter", integer=True, allow_none=True)
    if not isinstance(keep_rank0, (bool, np.bool_)):
        raise RankoptInputError(f"`keep_rank0` must be a bool; got {keep_rank0!r} instead.")
    init_order = check_order(init, n, "init") if init is not None else None
    if callback is not None and not callable(callback):
        raise RankoptInputError(f"`callback` must be callable; got {callback!r} instead.")
    gen, seed = normalize_rng(rng)
    return SolveContext(
        gen=gen,
        seed=seed,
        time_limit=time_limit,
        max_iter=max_iter,
        keep_rank0=bool(keep_rank0),
        callback=callback,
        init=init_order,
        options=opts,
        start=start,
    )


def _build_model(
    spec: ModelSpec,
    network: Any,
    lat: NDArray[Any],
    inputs: dict[str, Any],
    seed: int,
    notes: list[str],
) -> _Problem:
    """The model to minimise: the workload's calls priced with the engine's
    algorithms (:func:`_price_workload`), the robust objective when asked
    (:func:`_robust`), else the spec's collective and algorithm."""
    n = lat.shape[0]
    collective, algorithm = spec.collective, spec.algorithm
    priced = None
    extra: dict[str, Any] = {}
    if spec.traffic is not None:
        inputs = _with_traffic(spec, inputs, n, notes)
        if spec.workload is None:
            collective, algorithm = "point-to-point", "traffic"
    if spec.workload is not None or (spec.engine is not None and spec.traffic is None):
        priced, collective, algorithm, nbytes, wl_notes, extra = _price_workload(
            spec, n, network, inputs["nbytes"]
        )
        notes.extend(wl_notes)
        inputs = {**inputs, "nbytes": nbytes}
        if spec.objective is None and inputs["objective"] in RING_OBJECTIVES:
            inputs["objective"] = None  # latency only: the α-β time of every call
    custom = callable(inputs["objective"])
    model: CostModel = (
        CustomModel(lat, inputs["objective"])
        if custom
        else make_model(lat, collective, algorithm, **inputs, workload=priced)
    )
    model_kw = {**inputs, "objective": model.objective}
    if priced is not None:
        model_kw["workload"] = priced
    policy = spec.robust_policy
    if policy is not None and policy.auto and not _auto_robust(network, custom, n, notes):
        policy = None
    robust = None
    if policy is not None:
        model = _robust(custom, network, lat, collective, algorithm, policy, seed, model_kw)
        robust = {"draws": policy.draws, "statistic": policy.statistic}
        notes.append(
            f"robust objective: the {policy.statistic} cost over {policy.draws} networks "
            "drawn from the measured spreads chose the order; its costs and speedup are the "
            "measured network's"
        )
    return _Problem(
        lat, network, model, collective, algorithm, inputs["nbytes"], inputs["groups"], custom,
        model_kw, priced, robust, extra, notes,
    )  # fmt: skip


def _with_traffic(
    spec: ModelSpec, inputs: dict[str, Any], n: int, notes: list[str]
) -> dict[str, Any]:
    """``make_model``'s keywords with the spec's point-to-point traffic.

    The traffic is priced with the spec's objective, by default ``"time"``
    (:class:`~rankopt.models.traffic.TrafficModel`); the calls beside it keep
    the network's default.
    """
    from rankopt.models.traffic import as_traffic

    traffic = as_traffic(spec.traffic, n)
    objective = spec.objective
    notes.append(
        f"point-to-point traffic: {traffic.nnz} pairs, {format_size(traffic.total_bytes)} in "
        f"{traffic.total_messages:,.0f} messages"
        + ("" if spec.workload is not None else " (no collective calls priced)")
    )
    out = {**inputs, "objective": objective, "traffic": traffic}
    if spec.workload is None:
        out["nbytes"] = None  # no collective call: no message size of one
    return out


def _search(
    prob: _Problem, method: str, ctx: SolveContext
) -> tuple[NDArray[np.int64], MethodOutput]:
    """The method's order (and output); for a workload, the best of it and the
    orders of its costliest calls solved alone (:func:`_best_of_per_call_orders`)."""
    fn = METHODS[method].fn
    out = fn(prob.model, ctx)
    check_stop_reason(out.stop_reason, f"method {method!r}")
    order = np.asarray(out.order, dtype=np.int64)
    priced = prob.priced
    if priced is not None and len(priced) > 1 and prob.robust is None and prob.n <= PER_CALL_MAX_N:
        order = _best_of_per_call_orders(
            prob.model, order, priced, fn, ctx, prob.lat, prob.model_kw, prob.notes
        )
    return order, out


def check_stop_reason(stop_reason: str, who: str) -> str:
    """``stop_reason``, which must be one of :data:`STOP_REASONS` (a bug of ``who`` if not)."""
    if stop_reason not in STOP_REASONS:  # a method's bug, not the caller's input
        raise RuntimeError(
            f"{who} stopped with {stop_reason!r}, not one of {', '.join(sorted(STOP_REASONS))}"
        )
    return stop_reason


def _measured_point(
    prob: _Problem, order: NDArray[np.int64], cost: float, baseline: float
) -> tuple[float, float]:
    """A robust solve's cost and launch cost on the measured network, the statistic's
    over the draws kept in ``robust["objective_cost"]`` and ``["objective_baseline_cost"]``.

    The robust objective chooses the order; the figures a user reads are the
    measured network's, as :func:`rankopt.cost` gives them, with the draws in
    the interval. The statistic's ratio (a mean over the draws) weighs most the
    draws where a loaded uplink is at its slowest and every order waits on it:
    beside TCP neighbours on the testbed it read 19-49% under the measured
    speedup, where the measured network's ratio read -27% to +32% off.
    """
    assert prob.robust is not None
    prob.robust["objective_cost"] = float(cost)
    prob.robust["objective_baseline_cost"] = float(baseline)
    median_model = prob.model.models[0]  # type: ignore[attr-defined]
    return float(median_model.cost(order)), float(median_model.cost(identity(prob.n)))


def _time_averaged(
    prob: _Problem, order: NDArray[np.int64], cost: float, baseline: float
) -> tuple[float, float]:
    """The order's and the launch order's costs over time, where the probe saw another
    tenant's load come and go (:func:`rankopt.network.core.loaded_phase`).

    The measured network is the load off: the bandwidth phase keeps every pair's
    best rate. Only the recheck met the load on, on the uplinks it crossed, and
    an order that crowds those uplinks runs much slower then: beside TCP flows on
    for 2 s and off for 2 s on the emulated racks, the order found was priced at
    1.25 s with the load off and 5.7 s with it on, and ran in 2.1 s. A job that
    repeats its calls completes ``share / t_on + (1 - share) / t_off`` of them
    per second, so each cost here is that rate's inverse
    (:func:`rankopt.models.robust.over_time`, the share
    :data:`~rankopt.models.robust.LOAD_ON_SHARE`); ``extra["load_phases"]`` keeps
    both phases.
    ``(cost, baseline)`` unchanged where there is no such phase.
    """
    from rankopt.models.robust import LOAD_ON_SHARE, loaded_phase_model, over_time
    from rankopt.network.core import RECHECK_DISAGREE, VARYING_SLOWDOWN, recheck_readings

    network = prob.network
    if prob.custom or not (cost > 0 and baseline > 0):
        return cost, baseline
    on = loaded_phase_model(network, prob.lat, prob.collective, prob.algorithm, prob.model_kw)
    if on is None:
        return cost, baseline
    cost_on, baseline_on = float(on.cost(order)), float(on.cost(identity(prob.n)))
    prob.extra["load_phases"] = {
        "on_share": LOAD_ON_SHARE,
        "off": {"cost": float(cost), "baseline_cost": float(baseline)},
        "on": {"cost": cost_on, "baseline_cost": baseline_on},
    }
    slower, apart = recheck_readings(network)
    if slower >= VARYING_SLOWDOWN:
        seen = f"a transfer measured again alone ran {slower:.2f}x slower than before"
    elif apart >= RECHECK_DISAGREE:
        seen = f"a transfer measured twice alone ran at rates {apart:.2f}x apart"
    else:
        seen = "a pair between two groups ran well below the others of its block"
    prob.notes.append(
        f"the probe saw another tenant's load come and go ({seen}): costs and speedup are "
        "averaged over time with the load on and off (with it on, as the recheck met it, "
        f"the launch order {baseline_on / baseline:.2f}x and the order {cost_on / cost:.2f}x "
        "slower)"
    )
    return over_time(cost, cost_on), over_time(baseline, baseline_on)


def _record_robust(prob: _Problem, cost: float, baseline: float) -> None:
    """``extra["robust"]``: the draws, the statistic's costs (``objective_cost``,
    ``objective_baseline_cost``), and the result's ``cost`` and ``baseline_cost``, the
    order's and the launch order's on the median (measured) network (averaged over
    time where the load came and went, :func:`_time_averaged`)."""
    assert prob.robust is not None
    prob.robust["median_cost"] = float(cost)
    prob.robust["median_baseline_cost"] = float(baseline)
    prob.extra["robust"] = prob.robust


def _make_result(
    prob: _Problem,
    spec: ModelSpec,
    order: NDArray[np.int64],
    cost: float,
    baseline: float,
    stop_reason: str,
    interval: tuple[float, float] | None,
    out: MethodOutput,
    method: str,
    ctx: SolveContext,
) -> SolveResult:
    """The :class:`SolveResult` of the steps above, logged."""
    runtime = ctx.elapsed()
    result = SolveResult(
        order=order,
        rank_of=invert(order),
        cost=float(cost),
        baseline_cost=float(baseline),
        speedup=float(baseline / cost) if cost > 0 else (1.0 if baseline == 0 else float("inf")),
        method=out.method or method,
        objective=prob.model.objective,
        collective=prob.collective,
        algorithm=prob.algorithm,
        iterations=int(out.iterations),
        evaluations=int(out.evaluations),
        runtime_s=runtime,
        stop_reason=check_stop_reason(stop_reason, "solve()"),
        seed=ctx.seed,
        history=tuple(ctx.history),
        extra=prob.extra,
        nbytes=None if prob.nbytes is None else float(prob.nbytes),
        speedup_interval=interval,
        network=None if prob.network is None else _network_info(prob.network),
        notes=tuple(prob.notes),
        model_spec=spec,
    )
    logger.info(
        "solve %s/%s n=%d method=%s: %.6g -> %.6g (%.3fx) in %.3f s",
        prob.collective,
        prob.algorithm,
        prob.n,
        result.method,
        baseline,
        cost,
        result.speedup,
        runtime,
    )
    return result


#: Spec fields a :class:`~rankopt.HierarchicalNetwork` brings itself (``robust``
#: aside: ``"auto"`` and off are accepted).
_HIERARCHICAL_OWN = ("bandwidth", "groups", "uplink_bandwidth", "straggle", "workload", "engine")


def _solve_hierarchical(
    network: Any, spec: ModelSpec, *, init: Any, nan: NanPolicy, **kw: Any
) -> SolveResult:
    """``solve(HierarchicalNetwork)``: :func:`rankopt.solvers.hierarchical.solve_hierarchical`."""
    from rankopt.solvers.hierarchical import solve_hierarchical

    policy = spec.robust_policy
    given = [k for k in _HIERARCHICAL_OWN if getattr(spec, k) is not None]
    given += ["robust"] if policy is not None and not policy.auto else []
    given += ["init"] if init is not None else []
    given += ["nan"] if nan != "raise" else []
    if given:
        raise RankoptInputError(
            f"a HierarchicalNetwork carries its own matrices and hierarchy; "
            f"{', '.join(f'`{k}`' for k in sorted(given))} cannot be given with it."
        )
    if callable(spec.objective):
        raise RankoptInputError(
            "a HierarchicalNetwork is priced by its ring models, not a callable."
        )
    res = solve_hierarchical(
        network, spec.collective, spec.algorithm, host_solve=solve, objective=spec.objective,
        nbytes=spec.nbytes, **kw,
    )  # fmt: skip
    check_stop_reason(res.stop_reason, "solve_hierarchical()")
    return dataclasses.replace(res, model_spec=spec)


#: Largest job ``robust="auto"`` turns the robust objective on for (it prices
#: every order on :data:`~rankopt.models.robust.ROBUST_DRAWS` networks).
ROBUST_AUTO_MAX_N = 64


def _auto_robust(network: Any, custom: bool, n: int, notes: list[str]) -> bool:
    """``robust="auto"``: whether the measurement shows rates that varied in time."""
    from rankopt.network.core import VARYING_SLOWDOWN, measured_variability

    if network is None or custom or n > ROBUST_AUTO_MAX_N or not network.measured:
        return False
    slowdown = measured_variability(network)
    if slowdown < VARYING_SLOWDOWN:
        return False
    notes.append(
        f"the load across the uplinks varied while probed (a transfer measured again alone "
        f"ran {slowdown:.2f}x slower than its groups had: traffic that comes and goes): "
        "robust objective by default"
    )
    return True


def _robust(
    custom: bool,
    network: Any,
    lat: Any,
    collective: str,
    algorithm: str,
    policy: Robust,
    seed: int,
    model_kw: dict[str, Any],
) -> CostModel:
    """The robust model of ``model_kw`` (:func:`rankopt.models.robust.robust_model`)."""
    from rankopt.models.robust import robust_model

    if network is None:
        raise RankoptInputError(
            "`robust` needs a network whose entries carry their uncertainty (a "
            "rankopt.Network, a Measurement or a probe .npz); got a bare matrix."
        )
    if custom:
        raise RankoptInputError("`robust` prices rankopt's models; a custom objective is not one.")
    try:
        return robust_model(
            network, lat, collective, algorithm, model_kw, draws=policy.draws,
            statistic=policy.statistic, seed=seed,
        )  # fmt: skip
    except RankoptInputError:
        raise  # a bound's own error keeps its class
    except ValueError as exc:
        raise RankoptInputError(str(exc)) from None


#: Largest job whose order gets the tie-break toward fewer group crossings.
TIE_BREAK_MAX_N = 64


def _cross(levels: Sequence[NDArray[np.int64]], a: Any, b: Any) -> Any:
    """How many levels put processes ``a`` and ``b`` in different groups (elementwise)."""
    return sum((lab[a] != lab[b]).astype(np.int64) for lab in levels)


def _crossings(order: NDArray[np.int64], levels: Sequence[NDArray[np.int64]]) -> int:
    """Neighbours around the order's ring that sit in different groups, every level."""
    return int(np.sum(_cross(levels, order, np.roll(order, -1))))


def _fewer_crossings_at_equal_cost(
    model: Any,
    order: NDArray[np.int64],
    cost: float,
    groups: Any,
    keep_rank0: bool,
) -> NDArray[np.int64]:
    """Among orders of the same modelled cost, one whose neighbours cross fewer groups.

    The step-synchronous model prices a step by its slowest transfer, so orders
    that send more bytes across uplinks which are not the bottleneck can tie with
    the best one; real engines overlap steps and pay for that traffic (MPICH's
    Rabenseifner on 3 racks of 3: two tied orders measured 10% apart). Beside a
    load the probe read on two uplinks, a ring that splits a third group in two
    runs ties with the one that keeps it whole (the loaded uplinks are the
    bottleneck of both), and once the load eases it runs twice as slow (racks of
    2, 4 and 3 beside three TCP flows that came and went over half a minute: 1.75 s
    against 0.9 s). Swaps, and moves of one process to another place, that keep
    the cost within 1e-9 and lower the ring-neighbour crossings summed over the
    levels are applied until none is left: on that ring every swap that joined the
    split group cost more, and moving its lone process did not.
    """
    nested = [groups] if np.ndim(groups[0]) == 0 else list(groups)
    levels = [np.asarray(g, dtype=np.int64) for g in nested]
    n = order.size
    cur = order.copy()
    best = _crossings(cur, levels)
    limit = cost * (1.0 + 1e-9) + 1e-300
    first = 1 if keep_rank0 else 0
    improved = True
    while improved:
        improved = False
        for i in range(first, n - 1):
            for j in range(i + 1, n):
                cand = cur.copy()
                cand[i], cand[j] = cand[j], cand[i]
                c = _crossings(cand, levels)
                if c < best and model.cost(cand) <= limit:
                    cur, best, improved = cand, c, True
        for i in range(first, n):
            moved = _fewer_by_a_move(model, cur, i, first, levels, limit)
            if moved is not None:
                cur, best, improved = moved, _crossings(moved, levels), True
    return cur


def _fewer_by_a_move(
    model: Any,
    order: NDArray[np.int64],
    i: int,
    first: int,
    levels: Sequence[NDArray[np.int64]],
    limit: float,
) -> NDArray[np.int64] | None:
    """``order`` with its process at ``i`` moved to the place (``first`` on) that lowers
    the crossings most at a cost within ``limit``, or None. The crossings each place
    adds are counted for every place at once; only the places that lower them are
    priced."""
    n = order.size
    x, before, after = order[i], order[i - 1], order[(i + 1) % n]
    rest = np.delete(order, i)
    # place k puts x between a[k] and b[k]; the last place closes the ring as the first
    a = np.append(np.roll(rest, 1), rest[-1])
    b = np.append(rest, rest[0])
    out = int(_cross(levels, before, x) + _cross(levels, x, after) - _cross(levels, before, after))
    delta = _cross(levels, a, x) + _cross(levels, x, b) - _cross(levels, a, b) - out
    places = np.flatnonzero(delta < 0)
    places = places[places >= first]
    for k in places[np.argsort(delta[places], kind="stable")].tolist():
        cand = np.insert(rest, k, x)
        if model.cost(cand) <= limit:
            return cand
    return None


#: Largest job for which a workload's calls are also solved one by one (each a start).
PER_CALL_MAX_N = 1024
#: At most this many of a workload's calls (the costliest) are solved alone.
PER_CALL_STARTS = 3


def _best_of_per_call_orders(
    model: Any,
    order: NDArray[np.int64],
    priced: Sequence[Any],
    fn: Any,
    ctx: SolveContext,
    lat: NDArray[Any],
    model_kw: dict[str, Any],
    notes: list[str],
) -> NDArray[np.int64]:
    """The best, under the whole workload, of ``order`` and each costly call's own order.

    A mix's landscape is rougher than one call's: a search over the sum can stop in a
    basin that the order of its largest call alone beats. Solving each of the
    costliest calls alone (same method, same seed) gives starts whose price under
    the whole workload is compared with the mix's own result.
    """
    n = lat.shape[0]
    ident = identity(n)
    weights = []
    for call in priced:
        one = make_model(lat, **{**model_kw, "workload": [call]})
        weights.append((one.cost(ident), call, one))
    weights.sort(key=lambda w: -w[0])
    best, best_cost = order, model.cost(order)
    for _, call, one in weights[:PER_CALL_STARTS]:
        sub = dataclasses.replace(
            ctx, gen=np.random.default_rng(ctx.seed), history=[], callback=None
        )
        cand = np.asarray(fn(one, sub).order, dtype=np.int64)
        if ctx.keep_rank0 and cand[0] != 0:
            if not model.capabilities.rotation_invariant:
                continue
            cand = np.roll(cand, -int(np.flatnonzero(cand == 0)[0]))
        c = model.cost(cand)
        if c < best_cost:
            best, best_cost = cand, c
            notes.append(
                f"the order solved for {call.collective} {call.nbytes:g} B alone prices the "
                "whole workload lower than the search over the mix: it is kept"
            )
    return best


def _price_workload(
    spec: ModelSpec, n: int, network: Any, nbytes: float | None
) -> tuple[Any, str, str, float | None, list[str], dict[str, Any]]:
    """The priced calls of the spec's ``workload``/``engine`` and what the result records.

    ``nbytes`` is the size of the spec's one call when it has no workload.
    Returns ``(priced, collective, algorithm, nbytes, notes, extra)``: the
    result's collective/algorithm/nbytes are the call's when there is one
    (``"workload"`` and the algorithms joined by ``+`` otherwise).
    """
    from rankopt.models.workload import price_job

    engine = spec.engine
    nodes = None if network is None or network.hosts is None else list(network.hosts)
    priced, collective, algorithm, nbytes = price_job(
        n, spec.collective, spec.algorithm, nbytes, spec.workload, engine, nodes=nodes
    )
    who = "no engine" if engine is None else f"engine {getattr(engine, 'name', engine)}"
    notes = [f"{who}: " + "; ".join(c.describe() for c in priced)]
    extra: dict[str, Any] = {
        "engine": None if engine is None else str(getattr(engine, "name", engine)),
        "workload": [
            {
                "collective": c.collective,
                "nbytes": c.nbytes,
                "count": c.count,
                "algorithm": c.algorithm,
                **{k: v for k, v in c.params.items() if isinstance(v, (str, int, float))},
            }
            for c in priced
        ],
    }
    return priced, collective, algorithm, nbytes, notes, extra


def _polished(
    prob: _Problem, order: NDArray[np.int64], ctx: SolveContext, method: str
) -> tuple[NDArray[np.int64], float]:
    """The method's order made final: rank 0 first when asked, never worse than
    ``init`` (when ``init`` keeps rank 0 where that is asked and costs), and among
    equal costs the one with the fewest group crossings."""
    model, init_order, groups = prob.model, ctx.init, prob.groups
    n = model.n
    if init_order is not None and not (rank0_pinned(model, ctx) and init_order[0] != 0):
        if model.cost(init_order) < model.cost(order):  # a start that breaks keep_rank0 is none
            order = init_order
    if ctx.keep_rank0 and order[0] != 0:
        if not model.capabilities.rotation_invariant:  # a method's bug, not the caller's input
            raise RuntimeError(
                f"method {method!r} moved rank 0 under keep_rank0=True on a model that is "
                "not rotation invariant"
            )
        order = np.roll(order, -int(np.flatnonzero(order == 0)[0]))
    cost = model.cost(order)
    if groups is not None and len(groups) and not prob.custom and n <= TIE_BREAK_MAX_N:
        order = _fewer_crossings_at_equal_cost(model, order, cost, groups, ctx.keep_rank0)
        cost = model.cost(order)
    if not prob.custom:
        order, cost = _ring_against_the_load(prob, order, cost)
    return order, float(cost)


#: An arrangement of a ring's group blocks priced within this fraction of the order
#: found is a tie for :func:`_ring_against_the_load`.
MIRROR_TIE = 0.02
#: An arrangement priced within this fraction of the order found is recorded as the
#: ring's other way round for the adapters to time (:func:`_ring_alternative`): wider
#: than :data:`MIRROR_TIE`, since the trial measures what the model cannot tell (on the
#: emulated racks, on 8 of 27 launches beside a tenant, the model priced the cheapest
#: arrangement with the other count of hops with the load 0.4-4.6% above the order,
#: through the pair rates of the hosts at the blocks' ends; the load made 12-100%;
#: beside TCP flows whose number on changed every half minute, the rack-contiguous
#: ring with their way was priced 7.8% above the order found, against it, and ran
#: 10-11% faster in every phase of the load).
TRIAL_TIE = 0.10
#: Collectives whose ring algorithms :func:`_ring_step` knows.
_RING_COLLECTIVES = frozenset({"allreduce", "allgather", "reduce_scatter"})
#: Ring algorithms and where rank ``r`` sends: ``r + 1`` (Open MPI's and MPICH's
#: rings) or ``r - 1`` (Gloo's allreduce, and torch's Gloo reduce_scatter, which
#: runs it). Reversing the order reverses the ring.
_RING_STEP = {"ring": 1, "ring_gloo": -1, "allreduce_gloo": -1}


def ways_with_the_load(network: Any, order: NDArray[np.int64], *, step: int = 1) -> int:
    """How many (hop, level) pairs of the ring ``order`` run the way other tenants'
    congestion-controlled load runs: ``order[k] -> order[k + step]`` (``step`` 1, or
    -1 for a ring whose rank ``r`` sends to ``r - 1``) leaves a group whose
    uplink out is loaded and enters one whose uplink in is loaded
    (:func:`rankopt.network.core.loaded_directions`; a level counts only where one
    group's way out and one group's way in are loaded, so that the load's way is
    known: beside two paced UDP neighbours on the emulated racks, 0 -> 1 and
    2 -> 0, rings turned against both ways were 12-16% slower than the ring with
    them). Zero for a network that was not measured, without uplinks, or whose
    load the probe read as keeping its rate (a reading that gives
    :attr:`rankopt.Network.elastic` 0: paced traffic); a measured network whose
    load was not read counts (beside unpaced TCP flows on the emulated racks the
    probe read none, and rings with the load were 1.3-1.6x slower).
    """
    return _hops_with(_load_ways(network), order, step)


def _load_ways(
    network: Any, *, every: bool = False
) -> list[tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_]]]:
    """``(labels, loaded out, loaded in)`` of every level :func:`ways_with_the_load` counts;
    with ``every``, of every level with a loaded way out and a loaded way in, whatever
    the load was read as and however many groups it loads.

    The host level (the first, where the network knows its hosts) is left out: its
    "uplinks" are the hosts' own links, read from a few pair rates each, and on the
    emulated racks a quiet Gloo probe read one host's at 186 MB/s against 124-161
    MB/s for the others, which made them all look loaded."""
    from rankopt.network.core import loaded_directions

    if network is None or not network.has_uplinks or not network.measured:
        return []
    if not every and network.elastic_reading is not None and network.elastic <= 0.0:
        return []
    ways = []
    skip = 1 if network.hosts is not None else 0
    for lab, ups in list(zip(network.groups, network.uplinks, strict=True))[skip:]:
        loaded_out, loaded_in = loaded_directions(ups)
        out, inn = np.count_nonzero(loaded_out), np.count_nonzero(loaded_in)
        if (out == 1 and inn == 1) or (every and out and inn):
            ways.append((lab, loaded_out, loaded_in))
    return ways


def _hops_with(
    ways: list[tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_]]],
    order: NDArray[np.int64],
    step: int = 1,
) -> int:
    """The hops of ring ``order`` (rank ``r`` sending to ``r + step``) from a loaded way
    out to a loaded way in, over ``ways``."""
    order = np.asarray(order, dtype=np.int64)
    nxt = np.roll(order, -step)
    count = 0
    for lab, loaded_out, loaded_in in ways:
        ga, gb = lab[order], lab[nxt]
        count += int(np.count_nonzero((ga != gb) & loaded_out[ga] & loaded_in[gb]))
    return count


#: Largest number of groups whose ring arrangements :func:`_ring_against_the_load` prices.
ARRANGE_MAX_GROUPS = 4


def _arrangements(order: NDArray[np.int64], lab: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    """Every ring made of ``order``'s group blocks in another cyclic order and direction
    (each block kept whole, walked either way); ``[]`` when ``order`` visits some group
    in more than one block or there are more than :data:`ARRANGE_MAX_GROUPS` groups."""
    g = lab[order]
    cut = np.flatnonzero(g != np.roll(g, 1))
    if cut.size < 3 or cut.size > ARRANGE_MAX_GROUPS:
        return []
    ring = np.roll(order, -int(cut[0]))
    bounds = np.r_[cut - cut[0], order.size]
    blocks = [ring[bounds[i] : bounds[i + 1]] for i in range(cut.size)]
    if len({int(lab[b[0]]) for b in blocks}) != len(blocks):
        return []
    out = []
    for perm in itertools.permutations(range(1, len(blocks))):
        for turn in itertools.product((False, True), repeat=len(blocks)):
            parts = [blocks[0][::-1] if turn[0] else blocks[0]]
            parts += [blocks[p][::-1] if turn[i + 1] else blocks[p] for i, p in enumerate(perm)]
            out.append(np.concatenate(parts))
    return out


def _block_sequence(groups: NDArray[np.int64]) -> list[int]:
    """The groups of a ring's blocks in ring order (``groups``: each rank's group)."""
    return [int(x) for x in groups[np.flatnonzero(groups != np.roll(groups, 1))]]


def _same_cycle(a: list[int], b: list[int]) -> bool:
    """Whether the cyclic sequences ``a`` and ``b`` are one rotated.

    >>> _same_cycle([0, 1, 2], [2, 0, 1]), _same_cycle([0, 1, 2], [0, 2, 1])
    (True, False)
    """
    return len(a) == len(b) and any(a[k:] + a[:k] == b for k in range(max(len(a), 1)))


def _ring_step(prob: _Problem) -> int:
    """Where rank ``r`` of the ring ``prob`` prices sends: ``1`` (to ``r + 1``), ``-1``
    (to ``r - 1``), or ``0`` when ``prob`` prices no ring (:data:`_RING_STEP`)."""
    if prob.collective not in _RING_COLLECTIVES or prob.n < 3:
        return 0
    return _RING_STEP.get(prob.algorithm, 0)


def _rolled_arrangements(
    prob: _Problem, order: NDArray[np.int64]
) -> Iterator[tuple[NDArray[np.int64], list[NDArray[np.int64]]]]:
    """``(labels, rings)`` per level of the network's groups, coarsest first, where
    ``order``'s blocks have other arrangements (:func:`_arrangements`), each ring rolled
    so that rank ``order[0]`` is first."""
    for lab in reversed(prob.network.groups):
        lab = np.asarray(lab, dtype=np.int64)
        cands = _arrangements(order, lab)
        if cands:
            yield lab, [np.roll(c, -int(np.flatnonzero(c == order[0])[0])) for c in cands]


def _tied_arrangements(
    prob: _Problem,
    order: NDArray[np.int64],
    cost: float,
    tie: float,
    ways: list[tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_]]],
    wanted: Callable[[int], bool],
) -> list[tuple[int, float, NDArray[np.int64]]]:
    """``(hops with the load, model cost, ring)`` of the arrangements of ``order``'s group
    blocks (:func:`_arrangements`, rank ``order[0]`` kept first) whose count of hops is
    ``wanted`` and whose cost is within ``tie`` of ``cost``, at the coarsest level of
    the network's groups that has one; ``[]`` where none has."""
    for _, cands in _rolled_arrangements(prob, order):
        found = []
        for cand in cands:
            hops = _hops_with(ways, cand, _ring_step(prob))
            if not wanted(hops):
                continue
            c = float(prob.model.cost(cand))
            if c <= cost * (1.0 + tie):
                found.append((hops, c, cand))
        if found:
            return found
    return []


def _ring_against_the_load(
    prob: _Problem, order: NDArray[np.int64], cost: float
) -> tuple[NDArray[np.int64], float]:
    """A ring whose hops do not run the way another tenant's congestion-controlled load
    runs, among the arrangements of its group blocks the model prices alike.

    Beside TCP flows from one group to another, rings that cross every uplink once and
    that the model prices alike differ: on the emulated racks (4, 3, 2 hosts, 200 Mbit/s
    uplinks) an Open MPI ring allreduce of 16 MiB whose hop ran from the loaded group
    to the loaded group took 4.87 s beside three paced TCP flows that way and 3.87 s
    beside two unpaced ones, the ring the other way round 2.25 s and 2.41 s (beside
    two paced UDP flows 2.13 s against 2.37 s, quiet 1.38 s against 1.27 s). A hop
    that runs with the load shares both of its loaded uplinks with the same flows,
    which meet ours once and keep their share; rings that run against it meet them on
    one uplink and again on the other, where they yield twice. So, at the coarsest
    level where the ring visits every group in one block (at most
    :data:`ARRANGE_MAX_GROUPS` groups) and that helps, the blocks' other cyclic
    orders and directions are priced, and among those within :data:`MIRROR_TIE` of
    the order found the one with the fewest hops with the load
    (:func:`ways_with_the_load`) is taken, the cheapest of them; a note says so.
    Orders are never made more than :data:`MIRROR_TIE` costlier.
    """
    step = _ring_step(prob)
    if not step:
        return order, cost
    ways = _load_ways(prob.network)
    mine = _hops_with(ways, order, step)
    if mine == 0:
        return order, cost
    tied = _tied_arrangements(prob, order, cost, MIRROR_TIE, ways, lambda h: h < mine)
    if not tied:
        return order, cost
    hops, c, best = min(tied, key=lambda t: (t[0], t[1]))
    prob.notes.append(
        f"ring direction: {mine} hop(s) of the ring found ran the way other tenants' "
        f"congestion-controlled load runs between two loaded uplinks, {hops} of the "
        f"ring taken (its groups in another order or direction; modelled {c:.4g} s "
        f"against {cost:.4g} s)"
    )
    return best, c


def _ring_alternative(prob: _Problem, order: NDArray[np.int64], cost: float) -> None:
    """Record in ``prob.extra["ring_alternative"]`` the ring the other way round with
    respect to other tenants' load, when the model cannot tell the two apart.

    Which way round a ring should run beside another tenant's load depends on what
    the load is: beside TCP flows a ring against their way ran up to 2.2x faster
    (:func:`_ring_against_the_load`), while on the emulated racks the ring with their
    way ran 12-14% faster than the other way round beside two paced UDP flows (4
    launches of 5) and 25-36% faster beside TCP flows on for 2 s and off for 2 s (3
    launches), and the probe's sharing test does not tell the kinds apart reliably
    (paced UDP read as yielding on 3 launches of 6, paced TCP as keeping its rate on 2
    of 6). So
    where the order found is a ring (:data:`_RING_STEP`; the launch order too, where
    it was kept) whose groups are blocks, some uplink way out and way in are loaded (any number
    of them, however the load was read), and an arrangement of the blocks priced
    within :data:`TRIAL_TIE` of the order has the other extreme of hops from a
    loaded way out to a loaded way in (the fewest where the order has the most, and
    the reverse), the cheapest such arrangement is recorded: ``{"order", "hops",
    "order_hops", "cost", "varying"}`` (``varying``: whether the probe saw the load
    come and go, :func:`_load_varied`, which the trial times call by call). Where no
    uplink reads loaded but the load varied while it was probed, the ring reversed
    (:func:`_reversed_alternative`). The adapters time both orders with the engine's
    own collective before applying one (:mod:`rankopt.adapters.direction`).
    """
    step = _ring_step(prob)
    if not step or prob.custom:
        return
    ways = _load_ways(prob.network, every=True)
    varied = _load_varied(prob.network)
    if not ways and not varied:
        return  # a quiet network: nothing to time, and no further evaluation
    own = float(prob.model.cost(order))
    if not own > 0.0:
        return
    scale, cost = cost / own, own  # the searched model's units to the result's
    if not ways:
        _reversed_alternative(prob, order, cost, scale)
        return
    mine = _hops_with(ways, order, step)
    seen = _tied_arrangements(prob, order, cost, TRIAL_TIE, ways, lambda h: h != mine)
    if not seen:
        return
    lowest = min(h for h, _, _ in seen)
    highest = max(h for h, _, _ in seen)
    if mine < lowest:  # the order has the fewest: the alternative has the most
        want = highest
    elif mine > highest:
        want = lowest
    else:  # the order is between: the extreme farther from it
        want = highest if highest - mine >= mine - lowest else lowest
    hops, c, cand = min((s for s in seen if s[0] == want), key=lambda s: s[1])
    prob.extra["ring_alternative"] = {
        "order": [int(x) for x in cand],
        "hops": int(hops),
        "order_hops": int(mine),
        "cost": c * scale,
        "varying": varied,
    }


def _load_varied(network: Any) -> bool:
    """Whether the probe saw load come and go on a measured network with uplinks
    (:func:`rankopt.network.core.load_came_and_went`)."""
    from rankopt.network.core import load_came_and_went

    if network is None or not network.measured or not network.has_uplinks:
        return False
    return load_came_and_went(network)


def _reversed_alternative(
    prob: _Problem, order: NDArray[np.int64], cost: float, scale: float
) -> None:
    """:func:`_ring_alternative` where no uplink reads loaded but the probe saw load
    come and go (:func:`_load_varied`; beside a TCP neighbour on for 2 s
    and off for 2 s the probe read no loaded uplink on 4 launches of 5, and rings one
    way round ran 1.25-1.36x slower than the other): the ring the other way round, rank
    ``order[0]`` first, when the model prices it within :data:`TRIAL_TIE` (``cost``:
    the order's own in the searched model, ``scale`` its ratio to the result's; the
    caller checked :func:`_load_varied`).

    Of the rings that visit the groups in the reverse order, each group's block walked
    either way (:func:`_arrangements`, at the coarsest level that has them), the
    cheapest: which process ends a block decides which pair's measured rate a hop
    crosses, and a pair measured while the load was on reads slower. On the emulated
    racks (3, 3, 3 hosts) beside TCP flows on for 1 s and off for 3 s, the order found
    turned end to end was priced 22% above it, its blocks walked the other way 0.2%."""
    back = np.r_[order[:1], order[:0:-1]]
    c = float(prob.model.cost(back))
    for lab, cands in _rolled_arrangements(prob, order):
        turned = _block_sequence(lab[back])
        for cand in cands:
            if not _same_cycle(_block_sequence(lab[cand]), turned):
                continue
            cc = float(prob.model.cost(cand))
            if cc < c * (1.0 - 1e-9):  # the order turned end to end, unless this gains
                back, c = cand, cc
        break
    if c <= cost * (1.0 + TRIAL_TIE):
        prob.extra["ring_alternative"] = {
            "order": [int(x) for x in back],
            "hops": 0,
            "order_hops": 0,
            "cost": c * scale,
            "varying": True,
        }


def _launch_order_kept(
    n: int,
    cost: float,
    baseline: float,
    stop_reason: str,
    method: str,
    extra: dict[str, Any],
    notes: list[str],
) -> tuple[NDArray[np.int64], float, str]:
    """The launch order, when the order found does not beat it (never hand back worse)."""
    if cost > baseline:
        logger.warning(
            "solve: method %s found no order better than the launch order "
            "(%.6g >= %.6g); the launch order is kept",
            method,
            cost,
            baseline,
        )
    extra["found_cost"] = float(cost)
    extra["method_stop_reason"] = stop_reason
    if cost > baseline:
        stop_reason = LAUNCH_KEPT
    notes.append("no order found that beats the launch order: the launch order is kept")
    return identity(n), baseline, stop_reason


def _checked_against_spread(
    network: Any,
    order: NDArray[np.int64],
    cost: float,
    baseline: float,
    stop_reason: str,
    kept: bool,
    priced_as: tuple[str, str, dict[str, Any], int],
    extra: dict[str, Any],
    notes: list[str],
) -> tuple[NDArray[np.int64], float, str, tuple[float, float] | None]:
    """The modelled speedup's interval over networks drawn from the measured spread,
    and the launch order instead when the order found could be slower than it.

    ``priced_as`` is ``(collective, algorithm, model keywords, seed)`` of the draws.
    Returns the order, its cost, the stop reason and the interval (None above
    :data:`~rankopt.models.robust.INTERVAL_MAX_N`, whose draws would not fit).
    """
    from rankopt.models.robust import (
        INTERVAL_MAX_N,
        interval_of,
        keep_launch_order,
        model_error,
        modelled_interval,
        speedup_draws,
    )

    n = len(order)
    if n > INTERVAL_MAX_N:
        notes.append(
            f"no speedup interval above n = {INTERVAL_MAX_N} (its draws are several n x n "
            "arrays each): the modelled gain is not checked against the measured spread"
        )
        return order, cost, stop_reason, None
    collective, algorithm, model_kw, seed = priced_as
    ratios = speedup_draws(network, order, collective, algorithm, model=model_kw, rng=seed)
    # the same order as the launch has no model error: its speedup is 1 exactly
    error = model_error(network, traffic=model_kw.get("traffic") is not None)
    interval = (1.0, 1.0) if kept else modelled_interval(ratios, error)
    if not kept and cost > 0:  # never an interval that leaves out the speedup it goes with
        point = baseline / cost
        interval = (min(interval[0], point), max(interval[1], point))
    why = None if kept else keep_launch_order(ratios)
    if why is not None:
        extra["found_cost"] = float(cost)
        extra["method_stop_reason"] = stop_reason
        extra["found_interval"] = interval
        notes.append(
            f"the order found is modelled {baseline / cost:.3g}x faster (90% interval "
            f"{interval[0]:.3g}-{interval[1]:.3g}x with the measured spread and the "
            f"model's error), but {why}: "
            "the launch order is kept"
        )
        return identity(n), baseline, LAUNCH_KEPT, (1.0, 1.0)
    low = interval_of(ratios)[0]
    if not kept and not low > 1.0:
        notes.append(
            f"the order found is slower than the launch order on some drawn networks "
            f"(5th percentile {low:.3g}x), by at most the tolerance; "
            "it is faster "
            f"on most (median {float(np.median(ratios)):.3g}x), so it is applied"
        )
    return order, cost, stop_reason, interval


def _network_model(network: Any, spec: ModelSpec) -> tuple[dict[str, Any], list[str]]:
    """``make_model``'s keywords (``objective`` included) for a :class:`rankopt.Network`,
    and notes (:func:`rankopt.models.factory.network_inputs` of the spec's fields)."""
    from rankopt.models.factory import network_inputs

    return network_inputs(
        network,
        spec.algorithm,
        objective=spec.objective,
        nbytes=spec.nbytes,
        bandwidth=spec.bandwidth,
        groups=spec.groups,
        uplink_bandwidth=spec.uplink_bandwidth,
        straggle=spec.straggle,
    )


def _network_info(network: Any) -> dict[str, Any]:
    """What the result reports of the network it was solved on (JSON-ready)."""
    return {
        "n": network.n,
        "source": network.source,
        "hosts": None if network.hosts is None else list(network.hosts),
        "level_sizes": network.level_sizes(),
        "groups": [np.asarray(lab, dtype=np.int64).tolist() for lab in network.groups],
        "uplinks": [np.asarray(u, dtype=float).tolist() for u in network.uplinks],
        "has_bandwidth": network.bandwidth is not None,
        "hierarchy": network.provenance.get("hierarchy", "given"),
        "straggle": network.straggle,
        "straggle_read": network.provenance.get("straggle") is not None,
        "straggle_range": list(network.straggle_range),
        "elastic": network.elastic,
        "elastic_range": list(network.elastic_range),
    }
