"""The robust objective: a model's cost over networks the measurement cannot tell apart.

Contents
--------
RobustModel
    The mean (or a high quantile) of one model's cost over K networks: the
    measured one and K - 1 redrawn from its uncertainty
    (:class:`rankopt.network.Redraw`).
robust_model
    Build it for a :class:`rankopt.Network` and the model ``solve()`` prices.

Why: the median network of a probe is one guess. Where two orders differ by
less than the measurement can resolve, the median's optimum picks whichever
noise favoured; an order that is good on every drawn network is the one that
holds when the network is not exactly the median (another tenant's load that
came and went during the probe, a link that measured fast once). The mean
over draws rewards orders whose cost is low *and* stable; a high quantile
(``statistic=0.9``) guards against the bad case only.

When it differs from the median's optimum: when the measured entries that
decide between orders carry spreads comparable to the gaps between them --
a rack uplink loaded by another tenant for part of the probe (its pairs
measured slow with a wide spread), or pairs whose bandwidth sits between two
levels. On a network whose levels are far apart and tight (a quiet
testbed), every draw has the same optimum and the robust order is the
median's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import RankoptInputError
from rankopt.models.base import Capabilities, CostModel

__all__ = [
    "RobustModel",
    "robust_model",
    "ROBUST_DRAWS",
    "speedup_interval",
    "speedup_draws",
    "keep_launch_order",
    "INTERVAL_MAX_N",
    "LOSS_TOLERANCE",
    "MIN_GAIN",
    "TRAFFIC_MODEL_ERROR",
    "LOADED_MODEL_ERROR",
    "model_error",
    "LOAD_ON_SHARE",
    "over_time",
    "loaded_phase_model",
]

#: Networks the robust objective averages over by default (the measured one included).
ROBUST_DRAWS = 16


class RobustModel(CostModel):
    """The mean (or a quantile) of several models' costs of one order.

    Parameters
    ----------
    models : sequence of CostModel
        The same model priced on different networks; ``models[0]`` is the
        measured (median) network's.
    statistic : "mean" or float
        ``"mean"``, or a quantile in (0, 1) (e.g. 0.9) of the costs.

    Notes
    -----
    Cost: ``len(models)`` evaluations of the underlying model per order. The
    mean of ring-sum models is a ring sum over the mean weights, so ring
    kernels still apply (``ring_weights``); other models go through the
    generic search (``anneal``, ``brute_force``), ring schedules
    (``ring_schedule``) from the short rings of the measured network's step
    times (:func:`rankopt.solvers.ring.ring_seed`).

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.models import make_model
    >>> a = make_model(np.array([[0, 1, 4], [1, 0, 2], [4, 2, 0.]]), "allreduce", "ring")
    >>> b = make_model(np.array([[0, 3, 4], [3, 0, 2], [4, 2, 0.]]), "allreduce", "ring")
    >>> RobustModel([a, b]).cost(np.array([0, 1, 2]))
    8.0
    """

    def __init__(self, models: Sequence[CostModel], statistic: str | float = "mean") -> None:
        if not models:
            raise ValueError("`models` must hold at least one model.")
        if statistic != "mean" and not (
            isinstance(statistic, (int, float)) and 0.0 < float(statistic) < 1.0
        ):
            raise ValueError(
                f"`statistic` must be 'mean' or a quantile in (0, 1); got {statistic!r}."
            )
        self.models = list(models)
        self.statistic = statistic
        first = self.models[0]
        self.n = first.n
        self.objective = first.objective
        caps = [m.capabilities for m in self.models]
        weights = [c.ring_weights for c in caps]
        ring = statistic == "mean" and all(w is not None for w in weights)
        # the mean ring weights are a proxy of the mean cost (no ring_matrix);
        # the clustering start and the ring seeds read the measured network's matrices
        # and hierarchy
        self.capabilities = Capabilities(
            rotation_invariant=all(c.rotation_invariant for c in caps),
            ring=caps[0].ring if ring else None,
            ring_weights=np.mean(np.stack(weights), axis=0) if ring else None,  # type: ignore[arg-type]
            ring_schedule=all(c.ring_schedule for c in caps),
            latency=caps[0].latency,
            bandwidth=caps[0].bandwidth,
            nbytes=caps[0].nbytes,
            groups=caps[0].groups,
            uplinks=caps[0].uplinks,
        )

    def _combine(self, costs: NDArray[np.float64]) -> float:
        if self.statistic == "mean":
            return float(np.mean(costs))
        return float(np.quantile(costs, float(self.statistic)))

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        return self._combine(np.array([m.reference_cost(order) for m in self.models]))

    def cost(self, order: NDArray[np.int64]) -> float:
        return self._combine(np.array([m.cost(order) for m in self.models]))

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        costs = np.stack([m.batch_cost(orders) for m in self.models])
        if self.statistic == "mean":
            return np.asarray(costs.mean(axis=0), dtype=np.float64)
        return np.asarray(np.quantile(costs, float(self.statistic), axis=0), dtype=np.float64)

    def swap_delta(self, order: NDArray[np.int64], i: int, j: int) -> float:
        if self.statistic == "mean":
            return float(np.mean([m.swap_delta(order, i, j) for m in self.models]))
        return super().swap_delta(order, i, j)


def robust_model(
    network: Any,
    latency: NDArray[np.float64],
    collective: str,
    algorithm: str,
    model: Mapping[str, Any],
    *,
    draws: int = ROBUST_DRAWS,
    statistic: str | float = "mean",
    seed: int = 0,
) -> RobustModel:
    """The robust objective of ``model`` on ``network``: the measured one plus redraws.

    ``model`` holds the keyword arguments of :func:`rankopt.models.make_model`
    as ``solve()`` built them; the draws are seeded by ``seed`` (reproducible).
    """
    from rankopt._limits import MAX_ARRAY_BYTES, MAX_DRAWS, check_bound
    from rankopt.models.factory import make_model
    from rankopt.network.core import Redraw

    if isinstance(draws, (bool, np.bool_)) or not isinstance(draws, (int, float, np.number)):
        raise RankoptInputError(f"`robust` draws must be a whole number; got {draws!r}.")
    if not np.isfinite(draws) or int(draws) != draws or draws < 2:
        raise RankoptInputError(f"`robust` must ask for at least 2 networks; got {draws!r}.")
    n = int(np.shape(latency)[0])
    # every draw holds its own n x n matrices: at most MAX_ARRAY_BYTES of them in all
    limit = min(MAX_DRAWS, max(2, MAX_ARRAY_BYTES // (8 * n * n)))
    check_bound(
        int(draws), "robust", limit, "solve()", integer=True,
        hint="" if limit == MAX_DRAWS else f"each draw is an n x n network; n={n}",
    )  # fmt: skip
    gen = np.random.default_rng([int(seed), 0x0B05])
    redraw = Redraw(network, model)
    models = [make_model(latency, collective, algorithm, **model)]
    for _ in range(int(draws) - 1):
        lat_s, kw = redraw(gen)
        models.append(make_model(lat_s, collective, algorithm, **kw))
    return RobustModel(models, statistic)


# --------------------------------------------------------------- the interval
#: Monte-Carlo draws behind a modelled speedup's interval.
INTERVAL_SAMPLES = 32
#: The interval: from the 5th to the 95th percentile of the drawn speedups.
INTERVAL_LEVEL = 0.90
#: Largest n :func:`speedup_interval` draws networks for (each draw and the
#: uncertainties are several (n, n) arrays); beyond, solve() reports none.
INTERVAL_MAX_N = 4096


#: The order found is kept only if it is at most this much slower than the launch
#: order in the worst 5% of the drawn networks (see :func:`keep_launch_order`).
LOSS_TOLERANCE = 0.02
#: The smallest modelled gain worth an order change on a measured network: the
#: drawn speedups' median must be at least ``1 + MIN_GAIN``. Below it two orders
#: differ by less than any measurement resolves (the testbed's run-to-run spread
#: is several percent), and what the model leaves out decides which is faster.
MIN_GAIN = 0.01


def speedup_draws(
    network: Any,
    order: ArrayLike,
    collective: str = "allreduce",
    algorithm: str = "ring",
    *,
    model: Mapping[str, Any],
    samples: int = INTERVAL_SAMPLES,
    rng: int = 0,
) -> NDArray[np.float64]:
    """``cost(launch) / cost(order)`` on ``samples`` networks drawn from the measurement.

    Every entry of the latency and bandwidth matrices (and every uplink,
    per direction) is redrawn with log-normal noise of its own uncertainty
    (:class:`rankopt.network.Redraw`); both orders are priced on every
    draw with the same model, so what is uncertain in both cancels.

    Parameters
    ----------
    network : Network
    order : array_like of int
    collective, algorithm : str
    model : mapping
        The keyword arguments of :func:`rankopt.cost` that define the model
        (``objective``, ``bandwidth``, ``nbytes``, ``groups``,
        ``uplink_bandwidth``), as ``solve()`` used them.
    samples : int
    rng : int
        Seed of the draws (they are reproducible).
    """
    from rankopt.models.factory import make_model
    from rankopt.network.core import Redraw

    n = network.n
    order = np.asarray(order, dtype=np.int64)
    gen = np.random.default_rng(rng)
    draws = Redraw(network, model)
    ident = np.arange(n, dtype=np.int64)
    ratios = np.empty(samples)
    for s in range(samples):
        lat_s, kw = draws(gen)
        m = make_model(lat_s, collective, algorithm, **kw)
        c_new = m.cost(order)
        c_old = m.cost(ident)
        ratios[s] = c_old / c_new if c_new > 0 else (1.0 if c_old == 0 else np.inf)
    return ratios


def speedup_interval(
    network: Any,
    order: ArrayLike,
    collective: str = "allreduce",
    algorithm: str = "ring",
    *,
    model: Mapping[str, Any],
    samples: int = INTERVAL_SAMPLES,
    rng: int = 0,
) -> tuple[float, float]:
    """The interval of ``cost(launch) / cost(order)`` that the measurement supports.

    The 5th and 95th percentiles of :func:`speedup_draws` (same parameters).
    """
    ratios = speedup_draws(
        network, order, collective, algorithm, model=model, samples=samples, rng=rng
    )
    return interval_of(ratios)


def interval_of(ratios: NDArray[np.float64]) -> tuple[float, float]:
    """The :data:`INTERVAL_LEVEL` interval (central) of drawn speedups."""
    tail = (1.0 - INTERVAL_LEVEL) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail])
    return float(lo), float(hi)


#: The cost models' own error on a speedup: one standard deviation of
#: ``log(measured speedup / modelled speedup)`` between random orders timed on
#: the emulated testbed and priced from its probe (``rankopt testbed run
#: --fidelity 12``, two networks no test uses; ``bench/model_error.py``
#: reproduces it). The measurement's spread cannot show it: it is what the
#: alpha-beta-contention model leaves out (protocol overheads, TCP dynamics,
#: the engine's pipelining).
MODEL_ERROR = 0.10
#: The same for a model with point-to-point traffic (:mod:`rankopt.models.traffic`):
#: the root mean square of ``log(measured / modelled)`` over the five testbed
#: runs of ``bench/testbed_halo.py`` and ``bench/testbed_pipeline_torch.py``
#: whose order was applied (measured 1.21-2.62x; modelled -27% to +1% of it).
#: A profile gives bytes per pair over the whole run, not which pairs exchange
#: at the same time, and that is what this error is mostly made of.
TRAFFIC_MODEL_ERROR = 0.22
#: The same beside another tenant's load: the root mean square of ``log(modelled /
#: measured)`` over the 24 launches of ``bench/testbed_tenants.py`` with a
#: tenant (three networks; paced TCP and UDP, unpaced TCP, on/off; modelled
#: -25% to +152% of the measured speedup; 0.18 without the +152% launch; the
#: same campaign's quiet launches: 0.12, which :data:`MODEL_ERROR` stands for).
#: Beside a neighbour the measured speedup itself moves from job to job (the
#: same order timed in two jobs differed by up to 1.5x under unpaced TCP), and
#: TCP's share of a loaded uplink is what the contention model prices least
#: well.
LOADED_MODEL_ERROR = 0.26
#: Normal quantiles that spread every drawn speedup by the model's error.
_MODEL_QUANTILES = 33


#: The share of the time a load that came and went while probed is taken to be on.
LOAD_ON_SHARE = 0.5


def over_time(off: float, on: float) -> float:
    """A call's cost averaged over time, the load on :data:`LOAD_ON_SHARE` of it.

    A job that repeats the call completes ``share / on + (1 - share) / off``
    of them per second; the cost is that rate's inverse (a weighted harmonic
    mean of ``off`` and ``on``).

    >>> over_time(1.0, 3.0)
    1.5
    """
    return 1.0 / (LOAD_ON_SHARE / on + (1.0 - LOAD_ON_SHARE) / off)


def loaded_phase_model(
    network: Any, latency: Any, collective: str, algorithm: str, model: Mapping[str, Any]
) -> CostModel | None:
    """``model`` (the keywords of :func:`rankopt.models.make_model`) with the load on, as
    the probe's recheck met it (:func:`rankopt.network.core.loaded_phase`), or None where
    the probe saw no load come and go on a measured network."""
    from rankopt.models.factory import make_model
    from rankopt.network.core import loaded_phase

    if network is None or not getattr(network, "measured", False):
        return None
    on_kw = loaded_phase(network, model)
    return None if on_kw is None else make_model(latency, collective, algorithm, **on_kw)


def model_error(network: Any, traffic: bool = False) -> float:
    """The model's own error on a speedup priced on ``network`` (log-normal sigma).

    :data:`LOADED_MODEL_ERROR` when the probe saw another tenant's load on an
    uplink: the sharing test across a loaded way read how the load yields
    (``network.elastic_reading`` is set), an uplink (either direction) gives
    less than :data:`rankopt.probe.sharing.LOADED_BELOW` of the best of its
    level (a narrower uplink reads the same), or a recheck
    :data:`~rankopt.network.core.VARYING_SLOWDOWN` times slower than its groups
    (load that comes and goes), or a pair between two sibling groups read well below
    the others of its block (:func:`rankopt.network.core.uneven_blocks`: load seen by
    some transfers only). Else :data:`MODEL_ERROR`, or
    :data:`TRAFFIC_MODEL_ERROR` for point-to-point traffic (``traffic``); the
    larger of the two when both apply. ``network`` may be matrices (no probe:
    no load seen).

    Examples
    --------
    >>> import numpy as np, rankopt
    >>> net = rankopt.Network.from_matrices(np.full((4, 4), 1e-5))
    >>> model_error(net), model_error(net, traffic=True)
    (0.1, 0.22)
    >>> model_error(rankopt.Network.from_matrices(np.full((4, 4), 1e-5), provenance={"elastic": 0.4}))
    0.26
    """
    base = TRAFFIC_MODEL_ERROR if traffic else MODEL_ERROR
    if getattr(network, "elastic_reading", None) is not None:
        return max(base, LOADED_MODEL_ERROR)
    if not getattr(network, "measured", False):
        return base
    from rankopt.network.core import load_came_and_went, loaded_directions

    for u in network.uplinks or ():
        if any(loaded.any() for loaded in loaded_directions(u)):
            return max(base, LOADED_MODEL_ERROR)
    if load_came_and_went(network):
        return max(base, LOADED_MODEL_ERROR)
    return base


def modelled_interval(
    ratios: NDArray[np.float64], model_error: float = MODEL_ERROR
) -> tuple[float, float]:
    """The :data:`INTERVAL_LEVEL` interval of a measured speedup, as far as it can be told.

    Every drawn speedup (the measurement's spread, :func:`speedup_draws`) is
    multiplied by the model's own error, log-normal with ``model_error``
    (:data:`MODEL_ERROR`) at evenly spaced normal quantiles, and the central
    interval of the products is returned. Deterministic.

    Examples
    --------
    >>> lo, hi = modelled_interval(np.array([2.0, 2.0]))
    >>> round(lo, 2), round(hi, 2)
    (1.7, 2.35)
    >>> modelled_interval(np.array([2.0, 2.0]), model_error=0.0)
    (2.0, 2.0)
    """
    from statistics import NormalDist  # scipy.stats costs ~0.6 s to import, at job start

    k = _MODEL_QUANTILES
    inv = NormalDist().inv_cdf
    z = np.array([inv((i + 0.5) / k) for i in range(k)])
    spread = np.exp(float(model_error) * z)
    return interval_of((np.asarray(ratios, dtype=np.float64)[:, None] * spread[None, :]).ravel())


def keep_launch_order(ratios: NDArray[np.float64]) -> str | None:
    """Why the launch order must be kept over an order with these drawn speedups, or None.

    The order found replaces the launch order unless it *could be slower*:
    when, on the worst 5% of the networks the measurement cannot tell from
    the one measured, it is more than :data:`LOSS_TOLERANCE` slower than
    the launch order, or when it is not faster on most of them by at least
    :data:`MIN_GAIN` (the drawn speedups' median). A wide interval alone is no reason:
    when the launch order's own cost is what the measurement cannot pin down
    (a loaded uplink it crosses many times, the order found once), the
    speedup is uncertain only in how large it is.

    Examples
    --------
    >>> keep_launch_order(np.array([0.996, 1.2, 1.4, 1.78])) is None
    True
    >>> keep_launch_order(np.array([0.9, 1.0, 1.01, 1.1]))
    'the order found could be 9% slower than the launch order (5th percentile of the drawn speedups 0.915x)'
    >>> keep_launch_order(np.array([1.0003, 1.0004, 1.0005]))
    'the order found is modelled only 0.04% faster (median of the drawn speedups 1.0004x), less than the 1% a measurement resolves'
    """
    lo = float(np.quantile(ratios, (1.0 - INTERVAL_LEVEL) / 2.0))
    mid = float(np.median(ratios))
    if lo < 1.0 - LOSS_TOLERANCE:
        return (
            f"the order found could be {1.0 / lo - 1.0:.0%} slower than the launch order "
            f"(5th percentile of the drawn speedups {lo:.3g}x)"
        )
    if not mid > 1.0:
        return f"the order found is not faster on most drawn networks (median {mid:.3g}x)"
    if mid < 1.0 + MIN_GAIN:
        return (
            f"the order found is modelled only {mid - 1.0:.2%} faster (median of the drawn "
            f"speedups {mid:.5g}x), less than the {MIN_GAIN:.0%} a measurement resolves"
        )
    return None
