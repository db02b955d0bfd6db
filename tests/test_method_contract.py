"""One contract for every entry of the method registry, checked on the method's own output.

``solve()`` keeps the launch order when a method's order is not cheaper and rolls a
rotation-invariant ring to put rank 0 first; those fallbacks would make a weak method
look correct. These tests call each registered method directly, before the façade
touches its output.
"""

import itertools

import numpy as np
import pytest

from rankopt.models import make_model
from rankopt.solvers import METHODS, STOP_REASONS
from rankopt.solvers._base import SolveContext

N = 7

#: (objective, algorithm) pairs each method is run on, where it applies
MODELS = [
    ("sum", "ring"),
    ("bottleneck", "ring"),
    ("time", "ring"),
    ("time", "recursive_doubling"),
    ("contention", "ring"),
    ("contention", "recursive_doubling"),
    ("time", "traffic"),  # point-to-point traffic (TrafficModel), no collective
    ("contention", "traffic"),
]


def _model(objective, algorithm, seed):
    gen = np.random.default_rng(seed)
    rack = gen.permutation(np.arange(N) % 2)
    same = rack[:, None] == rack[None, :]
    lat = np.where(same, 2e-6, 4e-5) * gen.uniform(0.8, 1.25, (N, N))
    bw = np.where(same, 1e10, 1e9) * gen.uniform(0.8, 1.25, (N, N))
    np.fill_diagonal(lat, 0.0)
    kw = {}
    if objective in ("time", "contention"):
        kw = {"bandwidth": bw, "nbytes": 1e6}
    if objective == "contention":
        kw.update(groups=[rack], uplink_bandwidth=[1e9])
    if algorithm == "traffic":
        from rankopt.models.traffic import Traffic, TrafficModel

        w = gen.uniform(0, 1e6, (N, N)) * (gen.uniform(size=(N, N)) < 0.4)
        up = {"groups": [rack], "uplink": np.full((1, 2), 1e9)} if objective == "contention" else {}
        return TrafficModel(lat, Traffic.from_matrix(w), bandwidth=bw, objective=objective, **up)
    return make_model(lat, "allreduce", algorithm, objective=objective, **kw)


def _applies(method, model):
    ctx = SolveContext(gen=np.random.default_rng(0), seed=0, max_iter=200)
    try:
        return METHODS[method][0](model, ctx)
    except Exception as exc:  # noqa: BLE001 - a method that declines says so by raising
        from rankopt import RankoptInputError

        if isinstance(exc, RankoptInputError):
            return None
        raise


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("objective, algorithm", MODELS)
def test_method_output_is_a_permutation_no_worse_than_its_start(method, objective, algorithm):
    model = _model(objective, algorithm, 1)
    out = _applies(method, model)
    if out is None:
        pytest.skip(f"{method} does not take {objective}/{algorithm}")
    order = np.asarray(out.order)
    assert sorted(order.tolist()) == list(range(N))
    assert model.cost(order) <= model.cost(np.arange(N)) * (1 + 1e-12)
    assert out.evaluations >= 0 and out.iterations >= 0
    assert out.stop_reason in STOP_REASONS, out.stop_reason
    # with an explicit start, the method's own output is no worse than that start
    start = np.random.default_rng(5).permutation(N)
    ctx = SolveContext(gen=np.random.default_rng(0), seed=0, max_iter=200, init=start)
    out2 = METHODS[method][0](model, ctx)
    assert model.cost(np.asarray(out2.order)) <= model.cost(start) * (1 + 1e-12)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_method_keeps_rank0_itself_when_the_model_is_not_rotation_invariant(method):
    model = _model("time", "recursive_doubling", 2)
    assert not model.rotation_invariant
    ctx = SolveContext(gen=np.random.default_rng(0), seed=0, max_iter=200, keep_rank0=True)
    try:
        out = METHODS[method][0](model, ctx)
    except Exception as exc:  # noqa: BLE001
        from rankopt import RankoptInputError

        if isinstance(exc, RankoptInputError):
            pytest.skip(f"{method} does not take this model")
        raise
    assert int(np.asarray(out.order)[0]) == 0


@pytest.mark.parametrize("method", ["brute_force", "exact", "held_karp"])
def test_exact_methods_reach_the_enumerated_optimum(method):
    model = _model("sum", "ring", 3)
    out = _applies(method, model)
    best = min(model.cost(np.array((0, *p))) for p in itertools.permutations(range(1, N)))
    assert model.cost(np.asarray(out.order)) == pytest.approx(best, rel=1e-12)
    assert out.stop_reason == "optimal"


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_takes_some_model(method):
    assert any(_applies(method, _model(o, a, 1)) is not None for o, a in MODELS)


# ------------------------------------------------------------------ registry
def test_registry_refuses_a_second_method_under_a_taken_name():
    from rankopt.solvers._base import register

    with pytest.raises(ValueError, match="registered already"):
        register("ils")(lambda model, ctx: None)
    fn = METHODS["swap"].fn
    assert register("swap", METHODS["swap"].options, METHODS["swap"].doc)(fn) is fn  # same: ok


def test_every_method_is_described_and_auto_accepts_what_it_may_pick():
    from rankopt.solvers import method_options, show_options

    text = show_options()
    for name, entry in METHODS.items():
        assert entry.doc, name
        assert f"{name}: {entry.doc}" in text
    picked = {"ils", "anneal", "layout", "two_opt", "brute_force", "held_karp"}
    auto = set(method_options("auto"))
    assert all(set(method_options(m)) <= auto for m in picked)
    with pytest.raises(ValueError, match="`method` must be one of"):
        show_options("nope")
