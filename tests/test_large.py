"""Large jobs: solve() without n x n copies, and the hierarchical network form (small n)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import rankopt
from rankopt import HierarchicalNetwork, RankoptInputError, check_matrix
from rankopt.models import make_model
from rankopt.models.ring import RingBottleneck, RingSum
from rankopt.network.hierarchical import ring_cost
from rankopt.solvers.hierarchical import _make_contiguous


def _points(n: int, seed: int = 0, dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pts = rng.normal(size=(n, 2))
    d = np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)) * 1e-5
    return np.ascontiguousarray(d, dtype=dtype)


# ------------------------------------------------------------------ no copies
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_check_matrix_keeps_a_valid_input_as_a_read_only_view(dtype):
    lat = _points(20, dtype=dtype)
    out = check_matrix(lat, copy=False, dtypes=(np.float64, np.float32))
    assert np.shares_memory(out, lat) and out.dtype == dtype
    assert not out.flags.writeable and lat.flags.writeable
    assert not np.shares_memory(check_matrix(lat), lat)  # the default still copies


def test_check_matrix_copies_what_it_must_change():
    lat = _points(10)
    diag = lat.copy()
    diag[3, 3] = 1.0  # the diagonal is set to 0: a copy, the input untouched
    out = check_matrix(diag, copy=False)
    assert not np.shares_memory(out, diag) and out[3, 3] == 0 and diag[3, 3] == 1.0
    fortran = np.asfortranarray(lat)
    assert not np.shares_memory(check_matrix(fortran, copy=False), fortran)
    f32 = lat.astype(np.float32)
    wide = check_matrix(f32, copy=False)  # float32 not listed: one float64 copy
    assert wide.dtype == np.float64 and not np.shares_memory(wide, f32)
    nan = lat.copy()
    nan[1, 2] = np.nan
    filled = check_matrix(nan, copy=False, nan="symmetric")
    assert filled[1, 2] == lat[2, 1] and np.isnan(nan[1, 2])
    bad = lat.copy()
    bad[0, 1] = -1.0
    with pytest.raises(RankoptInputError, match=r"latency\[0, 1\] is -1"):
        check_matrix(bad, copy=False)


def test_ring_models_use_symmetric_input_as_is():
    lat = _points(30, dtype=np.float32)
    for cls in (RingSum, RingBottleneck):
        m = cls(lat)
        assert m.symmetric and m.ring_weights is lat and m.latency is lat
    asym = lat.copy()
    asym[0, 1] += np.float32(1e-5)
    m = RingSum(asym)
    assert not m.symmetric and m.ring_weights.dtype == np.float32
    np.testing.assert_allclose(m.ring_weights, 0.5 * (asym + asym.T), rtol=1e-6)
    np.testing.assert_array_equal(RingBottleneck(asym).max_weights, np.maximum(asym, asym.T))


def _solve_peak(lat: np.ndarray, **kw) -> tuple[int, rankopt.SolveResult]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    res = rankopt.solve(lat, method="two_opt", rng=0, **kw)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, res


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_solve_makes_no_copy_of_a_symmetric_matrix(dtype):
    n = 2000
    lat = _points(n, seed=1, dtype=dtype)
    peak, res = _solve_peak(lat)
    assert peak < 0.25 * lat.nbytes  # not one n x n copy (the candidate lists are O(n k))
    assert res.cost == pytest.approx(rankopt.cost(lat.astype(np.float64), res.order))


def test_solve_makes_one_copy_of_an_asymmetric_or_widened_matrix():
    n = 2000
    lat = _points(n, seed=2)
    lat[np.arange(n - 1), np.arange(1, n)] *= 1.5  # asymmetric: the symmetrised mean
    peak, res = _solve_peak(lat)
    assert lat.nbytes <= peak < 1.5 * lat.nbytes
    as_int = np.round(_points(n, seed=3) * 1e9).astype(np.int64)  # widened to float64 once
    peak, _ = _solve_peak(as_int)
    assert peak < 1.5 * n * n * 8


# ----------------------------------------------------------- hierarchical form
def _hnet(hosts=16, per=3, seed=0, *, bandwidth=True, uplinks=True) -> HierarchicalNetwork:
    rng = np.random.default_rng(seed)
    rack = np.arange(hosts) // 4
    pod = np.arange(hosts) // 8
    meet = np.where(rack[:, None] == rack[None, :], 0, np.where(pod[:, None] == pod[None, :], 1, 2))
    noise = rng.lognormal(0, 0.2, (hosts, hosts))
    noise = np.sqrt(noise * noise.T)
    lat = np.array([10e-6, 20e-6, 40e-6])[meet] * noise
    bw = np.array([10e9, 5e9, 2e9])[meet] / noise
    return HierarchicalNetwork(
        rng.permutation(np.repeat(np.arange(hosts), per)),
        lat,
        bw if bandwidth else None,
        groups=[rack, pod],
        uplinks=[12e9, 20e9, 30e9] if uplinks else (),
        intra_latency=1e-6,
        intra_bandwidth=50e9,
    )


def _flat_kw(flat, objective, nbytes):
    kw = {"objective": objective}
    if objective in ("time", "contention"):
        kw.update(nbytes=nbytes, bandwidth=flat.bandwidth)
    if objective == "contention":
        kw.update(groups=list(flat.groups), uplink_bandwidth=list(flat.uplinks))
    return kw


@pytest.mark.parametrize("objective", ["sum", "bottleneck", "time", "contention"])
@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reduce_scatter"])
def test_ring_cost_from_crossing_counts_equals_the_reference(objective, collective):
    net = _hnet()
    flat = net.to_network()
    kw = _flat_kw(flat, objective, 1e8)
    model = make_model(flat.latency, collective, "ring", **kw)
    rng = np.random.default_rng(4)
    for order in [np.arange(net.n), net.contiguous_order(), *rng.permutation([net.n] * 4)]:
        order = rng.permutation(net.n) if order.ndim == 0 else order
        got = ring_cost(net, order, collective, objective=objective, nbytes=1e8)
        assert got == pytest.approx(model.reference_cost(order), rel=1e-12)
        assert got == pytest.approx(rankopt.cost(flat.latency, order, collective, **kw), rel=1e-12)


def test_contiguous_order_crosses_every_uplink_once():
    net = _hnet(hosts=16, per=2)
    order = net.contiguous_order()
    for lab in net.rank_levels():
        runs = np.count_nonzero(lab[order] != np.roll(lab[order], 1))
        assert runs == lab.max() + 1


def test_make_contiguous_keeps_every_group_one_run():
    rng = np.random.default_rng(0)
    rack = np.arange(32) // 4
    pod = np.arange(32) // 16
    ring = _make_contiguous(rng.permutation(32), [rack, pod])
    assert sorted(ring.tolist()) == list(range(32))
    for lab in (rack, pod):
        runs = np.count_nonzero(lab[ring] != np.roll(lab[ring], 1))
        assert runs == lab.max() + 1


@pytest.mark.parametrize("objective", ["sum", "contention"])
def test_hierarchical_solve_approaches_the_flat_solve(objective):
    net = _hnet(hosts=16, per=3, seed=5)
    flat = net.to_network()
    res = rankopt.solve(net, objective=objective, nbytes=1e8, rng=0)
    ref = rankopt.solve(flat, objective=objective, nbytes=1e8, rng=0)
    assert sorted(res.order.tolist()) == list(range(net.n))
    kw = _flat_kw(flat, objective, 1e8)
    assert res.cost == pytest.approx(rankopt.cost(flat.latency, res.order, **kw), rel=1e-12)
    assert res.cost <= 1.05 * ref.cost
    info = res.extra["hierarchical"]
    assert info["quality_vs_contiguous"] >= 1.0 and res.cost <= res.baseline_cost
    contiguous = net.cost(net.contiguous_order(), objective=objective, nbytes=1e8)
    assert info["contiguous_cost"] == pytest.approx(contiguous)


def test_hierarchical_solve_keeps_hosts_contiguous_and_rank0():
    net = _hnet(hosts=12, per=4, seed=1, bandwidth=False, uplinks=False)
    res = rankopt.solve(net, keep_rank0=True, rng=0)
    assert res.order[0] == 0 and res.objective == "sum"
    hosts = net.host_of[res.order]
    assert np.count_nonzero(hosts != np.roll(hosts, 1)) == net.n_hosts
    assert res.cost == pytest.approx(net.cost(res.order))


def test_hierarchical_network_errors():
    net = _hnet()
    with pytest.raises(RankoptInputError, match="`bandwidth` cannot be given"):
        rankopt.solve(net, bandwidth=1e9)
    with pytest.raises(RankoptInputError, match="ring algorithms"):
        rankopt.solve(net, algorithm="recursive_doubling")
    with pytest.raises(RankoptInputError, match="host 2 has no process"):
        HierarchicalNetwork([0, 1, 3, 3], np.ones((4, 4)) - np.eye(4))
    with pytest.raises(RankoptInputError, match="one entry per level including the hosts"):
        HierarchicalNetwork([0, 1], np.ones((2, 2)), groups=[[0, 1]], uplinks=[1e9])
    with pytest.raises(RankoptInputError, match="must be nested"):
        HierarchicalNetwork([0, 1, 2], np.ones((3, 3)), groups=[[0, 1, 1], [0, 0, 1]])
    no_up = _hnet(uplinks=False)
    with pytest.raises(RankoptInputError, match="needs `uplinks`"):
        no_up.cost(np.arange(no_up.n), objective="contention")
    big = HierarchicalNetwork(np.arange(9000) % 2, np.ones((2, 2)) - np.eye(2))
    with pytest.raises(RankoptInputError, match="above 8192"):
        big.to_network()


def test_hierarchical_network_keeps_float32_host_matrices_uncopied():
    net = _hnet()
    lat = np.asarray(net.latency, dtype=np.float32)
    h = HierarchicalNetwork(net.host_of, lat, groups=net.groups)
    assert np.shares_memory(h.latency, lat)


# ------------------------------------------------------------ network bounds
def test_network_shares_its_frozen_matrices_across_copies():
    lat = _points(12)
    net = rankopt.Network.from_matrices(lat, lat * 1e15 + 1e9)
    assert not np.shares_memory(net.latency, lat)  # a writeable input is copied once
    again = net.with_hierarchy([np.arange(12) // 6])
    assert again.latency is net.latency and again.bandwidth is net.bandwidth


def test_large_networks_skip_inference_and_the_interval(monkeypatch):
    import rankopt.models.robust as robust
    import rankopt.network.core as network

    monkeypatch.setattr(network, "INFER_MAX_N", 8)
    monkeypatch.setattr(robust, "INTERVAL_MAX_N", 8)
    lat = _points(12)
    hosts = [f"h{i // 2}" for i in range(12)]
    net = rankopt.Network.from_matrices(lat, hosts=hosts, latency_spread=0.1 * lat)
    assert net.provenance["hierarchy"] == "not inferred above n = 8: hosts only"
    assert net.level_sizes() == [[2] * 6]
    res = rankopt.solve(net, rng=0)
    assert res.speedup_interval is None
    assert any("no speedup interval above n = 8" in t for t in res.notes)
