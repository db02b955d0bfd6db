"""``ModelSpec``: the model inputs of ``solve()`` in one object, the keywords its shorthands."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import rankopt
from rankopt import HierarchicalNetwork, ModelSpec, RankoptInputError
from rankopt.solvers import STOP_REASONS, Robust
from rankopt.solvers.result import SolveResult
from rankopt.solvers.spec import MODEL_FIELDS

RACK = np.array([0, 1, 0, 1, 0, 1])
LAT = np.where(RACK[:, None] == RACK[None, :], 1e-6, 1e-4) * (
    1 + 0.01 * np.arange(36).reshape(6, 6)
)


def _net(seed=0):
    """Nine processes on three racks, measured: spreads and sample counts."""
    gen = np.random.default_rng(seed)
    rack = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])
    same = rack[:, None] == rack[None, :]
    bw = np.where(same, 110e6, 22e6) * np.exp(0.03 * gen.standard_normal((9, 9)))
    lat = np.where(same, 30e-6, 60e-6) * np.exp(0.05 * gen.standard_normal((9, 9)))
    return rankopt.Network.from_matrices(
        lat, bw, hosts=[f"h{i}" for i in range(9)], bandwidth_spread=0.03 * bw,
        latency_spread=0.05 * lat, bandwidth_samples=np.full((9, 9), 3),
        latency_samples=np.full((9, 9), 10),
    )  # fmt: skip


def _hnet():
    rack = np.array([0, 0, 1, 1])
    lat = np.where(rack[:, None] == rack[None, :], 10e-6, 40e-6)
    return HierarchicalNetwork([0, 1, 2, 3, 0, 1, 2, 3], lat, groups=[rack], intra_latency=1e-6)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"collective": "allreduc"}, r"`collective` must be one of .*got 'allreduc'"),
        ({"algorithm": "rung"}, r"`algorithm` must be one of .*'ring'.*got 'rung'"),
        ({"algorithm": 3}, r"`algorithm` must be a str; got 3"),
        ({"objective": "fastest"}, r"`objective` must be one of 'sum', .*got 'fastest'"),
        ({"nbytes": -1}, r"`nbytes` must be positive and finite; got -1"),
        ({"nbytes": "16M"}, r"`nbytes` must be a number; got '16M'"),
        ({"straggle": 3.0}, r"`straggle` must be a number between 1 .* and 2; got 3.0"),
        ({"engine": "ucx"}, r"`engine` must be one of .*'openmpi'.*got 'ucx'"),
        ({"engine": 7}, r"`engine` must be an engine name or a rankopt Engine; got 7"),
        ({"engine": "openmpi", "algorithm": "rabenseifner"}, r"got algorithm='rabenseifner'"),
        ({"workload": []}, r"`workload` is empty"),
        ({"workload": [("allreduce", 1e6, 1)], "objective": len}, r"custom objective cannot"),
        ({"robust": "sometimes"}, r"`robust` must be a bool, .* or 'auto'; got 'sometimes'"),
        ({"robust": 1}, r"`robust` must be at least 2; got 1"),
        ({"robust": 10**6}, r"`robust` must be at most 1,024; got 1,000,000"),
        ({"robust": {"statistic": 1.5}}, r"statistic must be 'mean' or a quantile .*got 1.5"),
        ({"robust": {"statistic": "median"}}, r"got 'median'"),
    ],
)
def test_spec_errors_name_the_field_and_the_value(kwargs, match):
    with pytest.raises(RankoptInputError, match=match):
        ModelSpec(**kwargs)
    # the keyword shorthand of solve() checks the same way
    collective = kwargs.pop("collective", "allreduce")
    algorithm = kwargs.pop("algorithm", "ring")
    with pytest.raises(RankoptInputError, match=match):
        rankopt.solve(LAT, collective, algorithm, **kwargs)


def test_robust_mapping_with_unknown_keys_is_a_type_error():
    with pytest.raises(TypeError, match=r"'draws', 'statistic' and 'auto'; got \['samples'\]"):
        ModelSpec(robust={"samples": 3})


def test_replace_validates_again_and_keeps_the_rest():
    spec = ModelSpec("allgather", nbytes=1e6, robust=8)
    changed = spec.replace(nbytes=2e6)
    assert (changed.collective, changed.nbytes, changed.robust) == (
        "allgather",
        2e6,
        Robust(draws=8),
    )
    with pytest.raises(RankoptInputError, match=r"`straggle`.*got 0.5"):
        spec.replace(straggle=0.5)
    with pytest.raises(TypeError, match="nbytse"):
        spec.replace(nbytse=1)


# --------------------------------------------------------------- normalisation
@pytest.mark.parametrize(
    "robust, expected",
    [
        ("auto", Robust(auto=True)),
        (True, Robust()),
        (np.True_, Robust()),
        (False, None),
        (None, None),
        (8, Robust(draws=8)),
        (np.int64(8), Robust(draws=8)),
        ({"statistic": 0.9}, Robust(statistic=0.9)),
        ({"draws": 4, "statistic": "mean", "auto": True}, Robust(draws=4, auto=True)),
        (Robust(draws=5), Robust(draws=5)),
    ],
)
def test_every_robust_form_becomes_one_robust_or_none(robust, expected):
    spec = ModelSpec(robust=robust)
    assert spec.robust == expected and spec.robust_policy == expected
    assert type(spec.robust_policy) is type(expected)


def test_simple_fields_are_normalised_once():
    spec = ModelSpec(nbytes=np.int64(1 << 20), straggle=1, workload=[("allreduce", 1e6, 4)])
    assert type(spec.nbytes) is float and spec.nbytes == 1048576.0
    assert type(spec.straggle) is float and spec.straggle == 1.0
    (call,) = spec.workload
    assert (call.collective, call.nbytes, call.count) == ("allreduce", 1e6, 4.0)


def test_specs_compare_by_value_arrays_included():
    groups = [np.array([0, 0, 1, 1])]
    a = ModelSpec(groups=groups, uplink_bandwidth=1e9, nbytes=1e6)
    b = ModelSpec(groups=[np.array([0, 0, 1, 1])], uplink_bandwidth=1e9, nbytes=1e6)
    assert a == b
    assert a != ModelSpec(groups=[np.array([0, 1, 0, 1])], uplink_bandwidth=1e9, nbytes=1e6)
    assert ModelSpec(robust=True) == ModelSpec(robust=16) != ModelSpec(robust=False)
    assert ModelSpec() != "allreduce"


# -------------------------------------------------------- keywords and the spec
def _same(a: SolveResult, b: SolveResult) -> None:
    assert a.order.tolist() == b.order.tolist()
    assert (a.cost, a.baseline_cost, a.seed, a.method, a.objective) == (
        b.cost,
        b.baseline_cost,
        b.seed,
        b.method,
        b.objective,
    )
    assert (a.collective, a.algorithm, a.nbytes, a.notes) == (
        b.collective,
        b.algorithm,
        b.nbytes,
        b.notes,
    )
    assert a.model_spec == b.model_spec


@pytest.mark.parametrize(
    "args, fields",
    [
        ((), {}),
        (("allgather",), {"nbytes": 1 << 20, "bandwidth": 1e9}),
        (("allreduce", "recursive_doubling"), {"objective": "time", "nbytes": 4096}),
        ((), {"groups": [RACK], "uplink_bandwidth": 1e9, "nbytes": 1e6}),
        ((), {"workload": [("allreduce", 1e6, 4), ("allgather", 1e5, 2)]}),
        ((), {"objective": "bottleneck", "robust": False}),
    ],
)
def test_keyword_shorthand_is_the_spec(args, fields):
    by_keyword = rankopt.solve(LAT, *args, rng=3, **fields)
    by_spec = rankopt.solve(LAT, model=ModelSpec(*args, **fields), rng=3)
    _same(by_keyword, by_spec)
    assert by_keyword.model_spec == ModelSpec(*args, **fields)
    # the positional collective/algorithm may repeat the spec's
    if args:
        _same(by_spec, rankopt.solve(LAT, *args, model=ModelSpec(*args, **fields), rng=3))


def test_keyword_shorthand_is_the_spec_on_a_measured_network_with_an_engine():
    net = _net()
    fields = {"workload": [("allreduce", 25e6, 40), ("alltoall", 8e6, 10)], "engine": "openmpi"}
    by_keyword = rankopt.solve(net, rng=0, **fields)
    by_spec = rankopt.solve(net, model=ModelSpec(**fields), rng=0)
    _same(by_keyword, by_spec)
    assert by_keyword.speedup_interval == by_spec.speedup_interval
    assert by_keyword.extra == by_spec.extra and by_spec.extra["engine"] == "openmpi"


def test_robust_forms_solve_alike():
    net = _net()
    a = rankopt.solve(net, robust=8)
    b = rankopt.solve(net, model=ModelSpec(robust={"draws": 8, "statistic": "mean"}))
    c = rankopt.solve(net, robust=Robust(draws=8))
    _same(a, b)
    _same(a, c)
    assert a.extra["robust"]["draws"] == 8 and a.extra["robust"]["statistic"] == "mean"


def test_a_field_in_the_spec_and_as_a_keyword_is_refused():
    spec = ModelSpec(nbytes=1e6)
    with pytest.raises(RankoptInputError, match=r"`nbytes` given both in `model` and as a keyword"):
        rankopt.solve(LAT, model=spec, nbytes=1e6)
    with pytest.raises(RankoptInputError, match=r"`bandwidth`, `straggle` given both"):
        rankopt.solve(LAT, model=spec, straggle=1.5, bandwidth=1e9)


def test_a_collective_or_algorithm_the_spec_contradicts_is_refused():
    spec = ModelSpec("allgather")
    with pytest.raises(RankoptInputError, match=r"`collective` is 'broadcast' but `model` has"):
        rankopt.solve(LAT, "broadcast", model=spec)
    with pytest.raises(RankoptInputError, match=r"`algorithm` is 'recursive_doubling' but"):
        rankopt.solve(LAT, "allgather", "recursive_doubling", model=spec)
    # left at their defaults, they are the spec's
    assert rankopt.solve(LAT, model=spec).collective == "allgather"


def test_model_must_be_a_spec():
    with pytest.raises(RankoptInputError, match=r"`model` must be a rankopt.ModelSpec; got dict"):
        rankopt.solve(LAT, model={"nbytes": 1e6})


def test_unknown_keyword_is_a_type_error_listing_the_fields():
    with pytest.raises(TypeError) as info:
        rankopt.solve(LAT, nbytse=1e6)
    text = str(info.value)
    assert "unexpected keyword argument 'nbytse'" in text
    for name in MODEL_FIELDS[2:]:
        assert name in text
    assert "max_iter" in text and "rankopt.ModelSpec" in text


# ------------------------------------------------------------- the result
def test_the_spec_is_recorded_and_round_trips_through_json():
    net = _net()
    spec = ModelSpec(workload=[("allreduce", 25e6, 40), ("allgather", 8e6, 10)], robust=4)
    res = rankopt.solve(net, model=spec, rng=0)
    assert res.model_spec is spec
    d = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert d["model"]["workload"] == [
        {"collective": "allreduce", "nbytes": 25e6, "count": 40.0},
        {"collective": "allgather", "nbytes": 8e6, "count": 10.0},
    ]
    assert d["model"]["robust"] == {"draws": 4, "statistic": "mean", "auto": False}
    assert d["model_dropped"] == {}
    back = SolveResult.from_dict(d)
    assert back.model_spec == spec
    # every JSON-ready entry of extra comes back: robust, workload, found_* alike
    assert set(back.extra) == set(res.extra) and d["extra_dropped"] == {}
    assert back.extra["robust"]["draws"] == 4
    assert back.extra["robust"]["median_cost"] == res.extra["robust"]["median_cost"]
    assert back.extra["workload"] == res.extra["workload"]
    assert back.to_dict() == d
    # the spec replays the run
    again = rankopt.solve(net, model=back.model_spec, rng=back.seed)
    assert again.order.tolist() == res.order.tolist() and again.cost == res.cost


def test_a_callable_objective_is_named_as_not_written():
    def ring_sum(lat, order):
        return float(lat[order, np.roll(order, -1)].sum())

    res = rankopt.solve(LAT, objective=ring_sum, rng=0)
    assert res.model_spec.objective is ring_sum
    d = res.to_dict()
    assert "objective" not in d["model"] and d["model_dropped"] == {
        "objective": "model['objective'] is a function"
    }
    assert SolveResult.from_dict(d).model_spec is None


def test_a_bandwidth_matrix_field_is_written_as_lists():
    bw = np.full((6, 6), 1e9)
    res = rankopt.solve(LAT, nbytes=1e6, bandwidth=bw, rng=0)
    d = json.loads(json.dumps(res.to_dict()))
    assert d["model"]["bandwidth"] == bw.tolist()
    assert SolveResult.from_dict(d).model_spec == res.model_spec


def test_stop_reason_outside_the_closed_set_is_refused():
    res = rankopt.solve(LAT, rng=0)
    assert res.stop_reason in STOP_REASONS
    with pytest.raises(ValueError, match=r"`stop_reason` must be one of .*got 'tired'"):
        dataclasses.replace(res, stop_reason="tired")
    d = res.to_dict()
    d["stop_reason"] = "tired"
    with pytest.raises(ValueError, match="tired"):
        SolveResult.from_dict(d)


# ----------------------------------------------------- a hierarchical network
def test_hierarchical_network_records_the_spec():
    net = _hnet()
    res = rankopt.solve(net, robust=False, rng=0)
    assert res.stop_reason in STOP_REASONS
    assert res.model_spec == ModelSpec(robust=False)
    assert res.order.tolist() == rankopt.solve(net, model=ModelSpec(robust=False)).order.tolist()


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"bandwidth": 1e9}, "`bandwidth`"),
        ({"groups": [[0] * 8]}, "`groups`"),
        ({"straggle": 1.5}, "`straggle`"),
        ({"workload": [("allreduce", 1e6, 1)]}, "`workload`"),
        ({"engine": "gloo"}, "`engine`"),
        ({"robust": True}, "`robust`"),
        ({"init": list(range(8))}, "`init`"),
        ({"nan": "max"}, "`nan`"),
        ({"uplink_bandwidth": 1e9, "robust": 4}, "`robust`, `uplink_bandwidth`"),
    ],
)
def test_hierarchical_network_refuses_the_fields_it_brings_itself(fields, named):
    with pytest.raises(RankoptInputError, match=f"{named} cannot be given with it"):
        rankopt.solve(_hnet(), **fields)


def test_hierarchical_network_refuses_a_callable_objective():
    with pytest.raises(RankoptInputError, match="not a callable"):
        rankopt.solve(_hnet(), objective=lambda lat, order: 0.0)
