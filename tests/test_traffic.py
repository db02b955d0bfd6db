"""Point-to-point traffic: the format, its reader's errors, and the traffic model against its spec."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from rankopt import RankoptInputError
from rankopt.models.traffic import (
    Traffic,
    TrafficModel,
    as_traffic,
    load_traffic,
    write_traffic,
)


def _random_traffic(n, seed, density=0.3):
    w = sp.random_array((n, n), density=density, rng=seed, format="coo")
    w.data *= 1e6
    msg = w.copy()
    msg.data = np.ceil(msg.data / 1e5)
    return Traffic.from_matrix(w, msg)


def _network(n, seed):
    rng = np.random.default_rng(seed)
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    bw = rng.uniform(1e8, 1e9, (n, n))  # asymmetric on purpose
    return lat, bw


@pytest.mark.parametrize("objective", ["time", "contention"])
@pytest.mark.parametrize("n", [2, 5, 12])
def test_cost_and_swap_delta_match_the_spec(objective, n):
    t = _random_traffic(n, n)
    lat, bw = _network(n, n + 1)
    rack = np.arange(n) * 3 // n  # unequal racks
    up = np.array([[2e8, 5e7, 1e8]])
    up_in = np.array([[9e7, 3e8, 4e7]])  # directional
    m = TrafficModel(
        lat, t, bandwidth=bw, groups=[rack], uplink=up, uplink_in=up_in, objective=objective
    )
    rng = np.random.default_rng(0)
    for _ in range(10):
        o = rng.permutation(n)
        assert m.cost(o) == pytest.approx(m.reference_cost(o), rel=1e-12)
        i, j = rng.choice(n, 2, replace=False)
        p = o.copy()
        p[i], p[j] = o[j], o[i]
        assert m.swap_delta(o, i, j) == pytest.approx(
            m.reference_cost(p) - m.reference_cost(o), rel=1e-9, abs=1e-15
        )


def test_time_is_traffic_times_distance_with_weights():
    # the classic process-mapping objective: sum of weight x distance
    w = np.array([[0, 5, 0], [1, 0, 2], [0, 0, 0]], dtype=float)
    d = np.array([[0, 1, 10], [1, 0, 100], [10, 100, 0]], dtype=float)
    m = TrafficModel(d, Traffic.from_weights(w))
    order = np.array([2, 0, 1])
    want = sum(w[k, l] * d[order[k], order[l]] for k in range(3) for l in range(3))
    assert m.cost(order) == want == 5 * 10 + 1 * 10 + 2 * 1


def test_directions_count_apart():
    # 0 sends 1 MB to 1; the slow direction is 1 -> 0: only 0 -> 1 is priced
    t = Traffic.from_pairs(2, [0], [1], [1e6], [1])
    lat = np.zeros((2, 2))
    bw = np.array([[np.inf, 1e9], [1e6, np.inf]])
    m = TrafficModel(lat, t, bandwidth=bw)
    assert m.cost(np.array([0, 1])) == pytest.approx(1e-3)
    assert m.cost(np.array([1, 0])) == pytest.approx(1.0)


def test_round_trip_and_self_traffic_dropped(tmp_path):
    t = Traffic.from_pairs(3, [0, 0, 1, 2], [1, 1, 1, 0], [10, 5, 7, 3], [1, 2, 4, 1])
    assert t.nnz == 2  # (0, 1) summed, 1 -> 1 dropped
    assert t.bytes[0, 1] == 15 and t.messages[0, 1] == 3
    p = write_traffic(t, tmp_path / "t.json")
    back = load_traffic(p)
    assert back.to_dict() == t.to_dict()
    # inside a profile, under "traffic"
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps({"rankopt_profile": 1, "workload": [], "traffic": t.to_dict()}))
    assert load_traffic(prof).to_dict() == t.to_dict()


def test_matrix_market(tmp_path):
    import scipy.io

    w = sp.coo_array(([3.0, 4.0], ([0, 2], [1, 0])), shape=(3, 3))
    scipy.io.mmwrite(tmp_path / "g.mtx", w)
    t = load_traffic(tmp_path / "g.mtx")
    assert t.n == 3 and t.total_bytes == 7.0 and t.total_messages == 2


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"rankopt_traffic": 2, "n": 2, "pairs": []}, "'rankopt_traffic' must be 1"),
        ({"rankopt_traffic": 1, "n": 0, "pairs": []}, "`n` must be a whole number"),
        ({"rankopt_traffic": 1, "n": 2, "pairs": [[0, 2, 1, 1]]}, "destination of pair 0 is 2"),
        ({"rankopt_traffic": 1, "n": 2, "pairs": [[0, 1, -1, 1]]}, "pair 0 \\(0 -> 1\\) has bytes"),
        ({"rankopt_traffic": 1, "n": 2, "pairs": [[0, 1, 1, 1.5]]}, "whole number"),
        ({"rankopt_traffic": 1, "n": 2, "pairs": [[0, 1, 1]]}, "pair 0 must be"),
        ({"rankopt_traffic": 1, "n": 2, "pairs": [[0, 1, "x", 1]]}, "must hold numbers"),
        ({"rankopt_traffic": 1, "n": 2, "pairs": [], "extra": 1}, "unknown key 'extra'"),
    ],
)
def test_bad_traffic_is_refused_by_name(tmp_path, data, match):
    with pytest.raises(RankoptInputError, match=match):
        as_traffic(data)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    with pytest.raises(RankoptInputError, match="traffic file"):
        load_traffic(f)


def test_a_file_without_traffic_says_so(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"rankopt_profile": 1, "workload": []}))
    with pytest.raises(RankoptInputError, match="holds no traffic"):
        load_traffic(f)


def test_size_must_match_the_network():
    t = Traffic.from_pairs(3, [0], [1], [1.0])
    with pytest.raises(RankoptInputError, match="for 3 ranks; the network has 4"):
        as_traffic(t, 4)
    with pytest.raises(RankoptInputError, match="for 3 ranks"):
        TrafficModel(np.zeros((4, 4)), t)
