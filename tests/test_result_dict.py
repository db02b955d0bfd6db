"""SolveResult.to_dict / from_dict carry ``extra`` and say what they drop."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import rankopt
from rankopt.solvers.result import SolveResult

LAT = np.array([[0, 1, 9, 1], [1, 0, 1, 9], [9, 1, 0, 1], [1, 9, 1, 0.0]])


def _through_json(res: SolveResult) -> tuple[dict, SolveResult]:
    d = json.loads(json.dumps(res.to_dict(), allow_nan=False))  # strict JSON
    return d, SolveResult.from_dict(d)


def test_the_extra_of_a_real_solve_survives():
    res = rankopt.solve(np.ones((5, 5)) - np.eye(5), rng=0)  # launch order kept: found_cost
    assert {"found_cost", "method_stop_reason"} <= set(res.extra)
    d, back = _through_json(res)
    assert back.extra == res.extra and d["extra_dropped"] == {}
    assert back.to_dict() == res.to_dict()


def test_rich_extra_round_trips_and_the_rest_is_named():
    res = rankopt.solve(LAT, rng=0)
    extra = {
        "robust": {"statistic": 0.9, "draws": np.int64(16), "median_cost": np.float64(2.5)},
        "probe_cache": "hit",
        "found_cost": np.float32(1.5),
        "found_interval": (1.1, 1.4),
        "workload": [{"collective": "allreduce", "nbytes": 1e6, "weights": np.arange(3.0)}],
        "hierarchical": {"hosts": np.array([0, 0, 1]), "kept": True, "flag": np.bool_(False)},
        "network_object": rankopt.Network(LAT),
        "bad_float": float("nan"),
        "nested_inf": {"a": [1.0, float("inf")]},
        "int_keys": {1: "a"},
        7: "not a str key",
    }
    res = dataclasses.replace(res, extra=extra)
    d, back = _through_json(res)
    assert d["robust"] == {"statistic": 0.9, "draws": 16, "median_cost": 2.5}
    assert d["probe_cache"] == "hit"
    assert back.extra == {
        "robust": {"statistic": 0.9, "draws": 16, "median_cost": 2.5},
        "probe_cache": "hit",
        "found_cost": 1.5,
        "found_interval": [1.1, 1.4],
        "workload": [{"collective": "allreduce", "nbytes": 1e6, "weights": [0.0, 1.0, 2.0]}],
        "hierarchical": {"hosts": [0, 0, 1], "kept": True, "flag": False},
    }
    dropped = d["extra_dropped"]
    assert set(dropped) == {"network_object", "bad_float", "nested_inf", "int_keys", "7"}
    assert dropped["network_object"] == "extra['network_object'] is a Network"
    assert "nan" in dropped["bad_float"] and "JSON has no number" in dropped["bad_float"]
    assert dropped["nested_inf"].startswith("extra['nested_inf']['a'][1] is inf")
    assert "the key 1" in dropped["int_keys"] and "the key 7 of extra" in dropped["7"]
    # a second trip changes nothing: what was kept is already JSON
    assert back.to_dict() == {**d, "extra_dropped": {}}


def test_a_dictionary_from_before_extra_gives_robust_and_probe_cache():
    d = rankopt.solve(LAT, rng=0).to_dict()
    del d["extra"], d["extra_dropped"]
    d["robust"] = {"statistic": "mean", "draws": 16}
    d["probe_cache"] = None
    assert SolveResult.from_dict(d).extra == {"robust": {"statistic": "mean", "draws": 16}}


_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**62), 2**62),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(extra=st.dictionaries(st.text(max_size=10), _JSON, max_size=6))
def test_any_json_extra_round_trips(extra):
    res = dataclasses.replace(_BASE, extra=extra)
    d, back = _through_json(res)
    assert d["extra_dropped"] == {}
    # a robust or probe_cache of None is no entry (the top-level key is always written)
    top = ("robust", "probe_cache")
    assert back.extra == {k: v for k, v in extra.items() if k not in top or v is not None}
    assert back.to_dict() == d


_BASE = rankopt.solve(LAT, rng=0)
