"""One contract for every registered algorithm, and for the example of tests/example_algorithm.py.

Every :class:`rankopt.models.Algorithm` -- the ones rankopt ships and the
made-up ``toy_linear`` broadcast, registered here as a user registers one --
must: move the right data (symbolic execution, 2-16 ranks, sizes that are not
powers of two included), meet its closed form on a uniform network at every
size it claims (every ``p`` unless ``closed_form_at="pow2"``), be priced by its
compiled model as by the plain-Python spec on asymmetric rates and per-direction
uplinks, be rotation invariant when it says it is a ring (and whenever its model declares it), and be a name
that ``schedule()``, ``cost()``, ``solve()`` and the CLI accept.
"""

from __future__ import annotations

import numpy as np
import pytest
from example_algorithm import TOY_LINEAR
from test_directional_uplinks import _directional
from test_schedule import check_result, execute

import rankopt
from rankopt import RankoptInputError
from rankopt.models import ALGORITHM_SPECS, ALGORITHMS, Algorithm, make_model, register_algorithm
from rankopt.models.network import reference_time
from rankopt.models.schedule import schedule
from rankopt.models.step import StepModel

TOY = (TOY_LINEAR.collective, TOY_LINEAR.name)
#: every registered algorithm, then the example one (registered by the fixture below)
KEYS = [*ALGORITHM_SPECS, TOY]
A, B, M = 3e-6, 2e9, 8e6  # latency (s), bandwidth (B/s), nbytes
ANY_P = [2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16]


@pytest.fixture(scope="module", autouse=True)
def toy():
    """The example algorithm, registered as a user registers one (and removed afterwards)."""
    spec = register_algorithm(TOY_LINEAR)
    yield spec
    del ALGORITHM_SPECS[TOY]


@pytest.fixture(params=KEYS, ids=lambda k: "/".join(k))
def spec(request) -> Algorithm:
    return ALGORITHM_SPECS[request.param]


def _kw(spec, n):
    """What schedule() needs beyond n for this algorithm."""
    kw = {}
    if "segments" in spec.options:
        kw.update(nbytes=M, segment_size=M / 16)
    if "groups" in spec.options:
        kw.update(groups=np.arange(n) // 2)
    return kw


def test_registered_once_under_its_name(spec):
    assert spec.name in ALGORITHMS[spec.collective]
    assert register_algorithm(spec) is spec  # the same spec again: a no-op
    twin = Algorithm(spec.collective, spec.name, spec.generator, spec.doc, no_closed_form="x")
    with pytest.raises(RankoptInputError, match="is registered already"):
        register_algorithm(twin)
    assert spec.doc.strip() and (spec.closed_form is not None or spec.no_closed_form.strip())


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("collective", "allreduce_v", "`collective` must be one of"),
        ("name", "Ring", "`name` must be lower case"),
        ("doc", " ", "`doc` must say"),
        ("model", "steps", "`model` must be one of"),
        ("options", ("segment",), "`options` must be among"),
        ("closed_form_at", "odd", "`closed_form_at` must be"),
        ("closed_form", None, "give a `closed_form`"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(field, value, match):
    fields = dict(
        collective="broadcast", name="toy_bad", generator=TOY_LINEAR.generator,
        doc="a toy", closed_form=TOY_LINEAR.closed_form,
    )  # fmt: skip
    fields[field] = value
    with pytest.raises(RankoptInputError, match=match):
        Algorithm(**fields)
    with pytest.raises(RankoptInputError, match="must be an Algorithm"):
        register_algorithm(fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("n", ANY_P)
def test_moves_the_right_data(spec, n):
    s = schedule(spec.collective, spec.name, n, blocks=True, **_kw(spec, n))
    check_result(s, execute(s))


def test_meets_its_closed_form_at_every_size_it_claims(spec):
    if spec.closed_form is None:
        pytest.skip(spec.no_closed_form)
    sizes = ANY_P + [31, 33, 64] if spec.closed_form_at == "any" else [2, 4, 8, 16, 32, 64]
    gen = np.random.default_rng(len(spec.name))
    for p in sizes:
        lat = np.full((p, p), A)
        order = gen.permutation(p)
        seg = M / 16
        t = rankopt.cost(lat, order, spec.collective, spec.name, bandwidth=B, nbytes=M,
                         segment_size=seg)  # fmt: skip
        assert t == pytest.approx(spec.closed_form(p, A, M, B, seg), rel=1e-9), p


@pytest.mark.parametrize("n", [5, 6, 8])
@pytest.mark.parametrize("objective", ["time", "contention"])
def test_compiled_model_matches_the_spec_on_asymmetric_rates(spec, n, objective):
    gen = np.random.default_rng(n)
    lat, kw = _directional(gen, n)
    kw["nbytes"] = M
    if objective == "time":
        kw = {"bandwidth": kw["bandwidth"], "nbytes": M}
    if "segments" in spec.options:
        kw["segment_size"] = M / 8
    model = make_model(lat, spec.collective, spec.name, objective=objective, **kw)
    for _ in range(3):
        o = gen.permutation(n)
        ref = (
            reference_time(model.schedule, model.network, o)
            if isinstance(model, StepModel)
            else model.reference_cost(o)
        )
        assert model.cost(o) == pytest.approx(ref, rel=1e-9)


def test_rotation_invariant_when_a_ring_and_whenever_declared(spec):
    n = 7
    gen = np.random.default_rng(7)
    lat, kw = _directional(gen, n)
    kw["nbytes"] = M
    if "segments" in spec.options:
        kw["segment_size"] = M / 8
    model = make_model(lat, spec.collective, spec.name, objective="contention", **kw)
    invariant = model.capabilities.rotation_invariant
    assert invariant or not spec.ring  # a ring's models say so (a model may know more)
    order = gen.permutation(n)
    costs = [model.cost(np.roll(order, k)) for k in range(n)]
    if invariant:  # what a model declares holds
        assert np.allclose(costs, costs[0], rtol=1e-12)
    elif spec.collective not in ("allreduce", "allgather", "reduce_scatter", "alltoall"):
        # a rooted collective: where rank 0 sits matters
        assert not np.allclose(costs, costs[0], rtol=1e-12)


def test_every_entry_point_accepts_the_name(spec, tmp_path):
    n = 6
    gen = np.random.default_rng(0)
    lat, kw = _directional(gen, n)
    kw["nbytes"] = M
    kw.pop("groups"), kw.pop("uplink_bandwidth")  # solve() segments a chain itself
    res = rankopt.solve(lat, spec.collective, spec.name, method="swap", robust=False, **kw)
    assert sorted(res.order.tolist()) == list(range(n))
    assert res.cost <= rankopt.cost(lat, np.arange(n), spec.collective, spec.name, **kw) + 1e-15

    import argparse

    from rankopt._model_args import add_model_arguments  # the CLI's --algorithm choices

    p = argparse.ArgumentParser(prog="rankopt solve")
    add_model_arguments(p, default_nbytes=16 << 20)
    args = p.parse_args(["--collective", spec.collective, "--algorithm", spec.name])
    assert (args.collective, args.algorithm) == (spec.collective, spec.name)


def test_an_unknown_name_is_an_error_naming_it():
    with pytest.raises(RankoptInputError, match="'toy_linear_v2'"):
        schedule("broadcast", "toy_linear_v2", 4)
