"""Property-based contract of ``solve()`` over every method, objective and algorithm.

For random networks (n = 2-12, asymmetric latency, values from 1e-9 to 1e3 s,
zeros off the diagonal, bandwidth from 1 B/s to 1 TB/s, hierarchies with
uplinks), every applicable (method, collective, algorithm, objective):

* returns a valid permutation (``order[0] == 0`` under ``keep_rank0``);
* reports the cost that ``rankopt.cost`` gives its order with the same arguments;
* is never worse than the launch order;
* returns the same order for the same seed;
* and, for the exact methods at n <= 7, the optimum of every order.

Profiles: the CI run is small (``EXAMPLES``, derandomised by the ``ci``
profile of ``conftest.py``). ``RANKOPT_PROPERTY_EXAMPLES=k`` (or
``contract=k1,exact=k2``) runs that many, randomised and without the example
database; ``bench/bench_properties.py`` runs that big profile and counts
examples and failures.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import rankopt
from rankopt.models import ALGORITHMS, OBJECTIVES, RING_OBJECTIVES, make_model
from rankopt.solvers.exact import BRUTE_FORCE_MAX_N, HELD_KARP_MAX_N
from rankopt.solvers.layout import applies as layout_applies
from rankopt.solvers.mapping import applies as map_applies

#: Examples per test in the CI profile (about 25 s in all on a loaded 2-core machine).
EXAMPLES = {"contract": 200, "exact": 80}

#: Examples run per test (read by bench/bench_properties.py).
RUN: Counter[str] = Counter()

_SCALE = os.environ.get("RANKOPT_PROPERTY_EXAMPLES")

#: Extreme-but-valid entries (seconds): finite, >= 0, far below 1e300.
LATENCIES = (0.0, 1e-9, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1.0, 1e3)
BANDWIDTHS = (1.0, 1e3, 1e6, 1e8, 1e9, 1e10, 1e12)
SIZES = (1.0, 1e3, 1e6, 1e8, 1e9)

METHODS = tuple(sorted(rankopt.METHODS))
RING_ONLY = ("nearest_neighbor", "two_opt", "ils")
EXACT = ("brute_force", "held_karp", "exact")
PAIRS = tuple((c, a) for c, algs in ALGORITHMS.items() for a in algs)


def _examples(name: str) -> int:
    """Examples for test ``name``: ``RANKOPT_PROPERTY_EXAMPLES`` is ``k`` or ``name=k,...``."""
    if not _SCALE:
        return EXAMPLES[name]
    if "=" not in _SCALE:
        return int(_SCALE)
    given_ = dict(item.split("=") for item in _SCALE.split(","))
    return int(given_.get(name, EXAMPLES[name]))


def _settings(name: str) -> Any:
    n = _examples(name)
    extra: dict[str, Any] = {"derandomize": False, "database": None} if _SCALE else {}
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        **extra,
    )


@dataclass
class Case:
    """One solve() call: the network, the model arguments and the method."""

    latency: np.ndarray
    collective: str
    algorithm: str
    method: str
    seed: int
    keep_rank0: bool
    model: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.latency.shape[0]

    def solve(self) -> rankopt.SolveResult:
        return rankopt.solve(
            self.latency,
            self.collective,
            self.algorithm,
            method=self.method,
            rng=self.seed,
            keep_rank0=self.keep_rank0,
            **self.model,
        )

    def cost(self, order: Any) -> float:
        return rankopt.cost(self.latency, order, self.collective, self.algorithm, **self.model)


def _latency(rng: np.random.Generator, n: int, kind: str, symmetric: bool) -> np.ndarray:
    if kind == "levels":  # racks: cheap inside, dear across
        racks = rng.integers(0, max(2, n // 3), size=n)
        lo, hi = sorted(rng.choice(LATENCIES, size=2))
        lat = np.where(racks[:, None] == racks[None, :], lo, hi) * rng.uniform(0.9, 1.1, (n, n))
    elif kind == "extreme":  # every entry drawn from the extreme values
        lat = rng.choice(LATENCIES, size=(n, n))
    elif kind == "zeros":  # many free links
        lat = rng.uniform(1e-6, 1e-4, (n, n)) * (rng.random((n, n)) < 0.3)
    else:
        lo, hi = sorted(rng.choice(LATENCIES[1:], size=2))
        lat = rng.uniform(lo, hi, (n, n))
    if symmetric:
        lat = 0.5 * (lat + lat.T)
    np.fill_diagonal(lat, 0.0)
    return lat


def _groups(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    hosts = np.sort(rng.integers(0, max(1, n // 2), size=n))
    rng.shuffle(hosts)
    racks = hosts // 2
    return [hosts, racks] if rng.random() < 0.5 else [hosts]


def _build(lat: np.ndarray, collective: str, algorithm: str, model: dict[str, Any]) -> Any:
    return make_model(rankopt.check_matrix(lat), collective, algorithm, **model)


@st.composite
def cases(draw: st.DrawFn, exact_only: bool = False, max_n: int = 12) -> Case:
    n = draw(st.integers(2, max_n))
    collective, algorithm = draw(st.sampled_from(PAIRS))
    objective = draw(st.sampled_from((None, *OBJECTIVES)))
    if objective in RING_OBJECTIVES:
        assume(algorithm == "ring")
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(("uniform", "levels", "extreme", "zeros")))
    lat = _latency(rng, n, kind, symmetric=draw(st.booleans()))
    model: dict[str, Any] = {"objective": objective}
    if objective == "contention" or (objective in (None, "time") and draw(st.booleans())):
        model["nbytes"] = float(rng.choice(SIZES))
        if draw(st.booleans()):
            bw = (
                rng.choice(BANDWIDTHS, size=(n, n))
                if kind == "extreme"
                else rng.uniform(1e8, 1e10, (n, n))
            )
            np.fill_diagonal(bw, 1.0)
            model["bandwidth"] = bw
        elif draw(st.booleans()):
            model["bandwidth"] = float(rng.choice(BANDWIDTHS))
        if objective == "contention" or draw(st.booleans()):
            model["groups"] = _groups(rng, n)
            model["uplink_bandwidth"] = float(rng.choice(BANDWIDTHS))
    if objective is None:
        del model["objective"]
    # a model that cannot be built here is a validation matter, not a solver one
    try:
        m = _build(lat, collective, algorithm, model)
    except rankopt.RankoptInputError:
        assume(False)
    ring = m.ring_weights is not None and m.objective in RING_OBJECTIVES
    methods = [
        x
        for x in METHODS
        if (ring or x not in RING_ONLY)
        and (x not in ("held_karp",) or (m.objective == "sum" and ring and n <= HELD_KARP_MAX_N))
        # enumeration is tested up to n = 8 (9! orders of a Python-priced model take seconds)
        and (x not in ("brute_force", "exact") or n <= min(8, BRUTE_FORCE_MAX_N - 1))
        and (not exact_only or x in EXACT)
        and (x != "layout" or layout_applies(m))  # it declines models without groups
        and (x != "map" or map_applies(m))  # it declines models without traffic
    ]
    assume(methods)
    method = draw(st.sampled_from(methods))
    return Case(lat, collective, algorithm, method, seed, draw(st.booleans()), model)


@_settings("contract")
@given(cases())
def test_solve_contract(case: Case) -> None:
    """Valid order, cost() agrees, never worse than the launch order, seeded replay."""
    RUN["contract"] += 1
    res = case.solve()
    n = case.n
    assert sorted(res.order.tolist()) == list(range(n))
    assert res.order.dtype == np.int64
    assert np.array_equal(res.rank_of[res.order], np.arange(n))
    if case.keep_rank0:
        assert res.order[0] == 0
    assert res.cost == pytest.approx(case.cost(res.order), rel=1e-9, abs=0.0)
    launch = case.cost(np.arange(n))
    assert res.baseline_cost == pytest.approx(launch, rel=1e-9, abs=0.0)
    assert res.cost <= launch * (1 + 1e-12)
    assert np.array_equal(case.solve().order, res.order)


def _optimum(case: Case) -> float:
    """The least cost over every order (order[0] = 0 under keep_rank0), by enumeration."""
    m = _build(case.latency, case.collective, case.algorithm, case.model)
    n = case.n
    fixed = case.keep_rank0 and not m.rotation_invariant
    rest = range(1, n) if fixed else range(n)
    perms = np.array(list(itertools.permutations(rest)), dtype=np.int64).reshape(-1, len(rest))
    if fixed:
        perms = np.hstack([np.zeros((len(perms), 1), dtype=np.int64), perms])
    return float(np.min(m.batch_cost(perms)))


@_settings("exact")
@given(cases(exact_only=True, max_n=7))
def test_exact_methods_are_optimal(case: Case) -> None:
    """brute_force, held_karp and exact reach the optimum of every order (n <= 7)."""
    RUN["exact"] += 1
    res = case.solve()
    best = _optimum(case)
    assert res.cost <= best * (1 + 1e-9)
    assert res.cost >= best * (1 - 1e-9)
