"""Combinations of the public API called with defaults: solve() against cost(), keep_rank0, init."""

from __future__ import annotations

import numpy as np
import pytest

import rankopt
from rankopt.models import ALGORITHMS


def _latency(n: int, seed: int) -> np.ndarray:
    a = np.random.default_rng(seed).uniform(1e-6, 1e-4, (n, n))
    lat = (a + a.T) / 2
    np.fill_diagonal(lat, 0.0)
    return lat


PAIRS = [(c, a) for c, algs in ALGORITHMS.items() for a in algs]


@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize(("collective", "algorithm"), PAIRS)
def test_cost_agrees_with_solve_on_every_algorithm(n: int, collective: str, algorithm: str) -> None:
    lat = _latency(n, n)
    kw = {
        "collective": collective,
        "algorithm": algorithm,
        "nbytes": 64 << 20,
        "bandwidth": np.full((n, n), 5e9),
        "groups": np.arange(n) // 2,
        "uplink_bandwidth": 1e9,
    }
    res = rankopt.solve(lat, keep_rank0=True, **kw)
    assert sorted(res.order.tolist()) == list(range(n))
    assert res.order[0] == 0
    assert res.speedup >= 1.0 or res.stop_reason == "launch_order_kept"
    assert rankopt.cost(lat, res.order, **kw) == pytest.approx(res.cost, rel=1e-12)
    assert rankopt.cost(lat, np.arange(n), **kw) == pytest.approx(res.baseline_cost, rel=1e-12)


def _init_that_moves_rank0(lat: np.ndarray) -> tuple[np.ndarray, float, float]:
    """The free optimum of a binomial broadcast, which does not start with 0, and the
    optimum cost with and without process 0 kept first."""
    free = rankopt.solve(lat, "broadcast", "binomial", method="brute_force")
    kept = rankopt.solve(lat, "broadcast", "binomial", method="brute_force", keep_rank0=True)
    return free.order, free.cost, kept.cost


@pytest.mark.parametrize("method", ["brute_force", "anneal", "swap", "auto"])
def test_keep_rank0_holds_with_an_init_that_moves_rank0(method: str) -> None:
    # the init fallback of solve() used to hand back ``init`` itself when it priced
    # lower than the method's order, process 0 not first despite keep_rank0=True
    lat = _latency(6, 5)
    init, free_cost, kept_cost = _init_that_moves_rank0(lat)
    assert init[0] != 0 and free_cost < kept_cost  # the case: init is cheaper, rank 0 moved
    res = rankopt.solve(
        lat, "broadcast", "binomial", method=method, keep_rank0=True, init=init, rng=0
    )
    assert res.order[0] == 0
    assert sorted(res.order.tolist()) == list(range(6))
    assert res.cost >= kept_cost * (1 - 1e-12)
    assert rankopt.cost(lat, res.order, "broadcast", "binomial") == pytest.approx(res.cost)


def test_keep_rank0_rotates_an_init_on_a_ring() -> None:
    lat = _latency(8, 3)
    best = rankopt.solve(lat)  # ring sum, exact
    init = np.roll(best.order, 3)
    res = rankopt.solve(lat, keep_rank0=True, init=init, method="two_opt")
    assert res.order[0] == 0
    assert res.cost == pytest.approx(best.cost)


def test_held_karp_on_a_schedule_suggests_a_method_that_accepts_n() -> None:
    # the message used to suggest brute_force whatever n, which then refused n = 12
    lat = _latency(12, 1)
    with pytest.raises(rankopt.RankoptInputError, match="held_karp") as info:
        rankopt.solve(lat, "broadcast", "binomial", method="held_karp")
    assert "method='auto'" in str(info.value)
    with pytest.raises(rankopt.RankoptInputError, match="method='brute_force'"):
        rankopt.solve(lat[:6, :6], "broadcast", "binomial", method="held_karp")


@pytest.mark.parametrize("engine", ["openmpi", "mpich", "gloo", "nccl"])
def test_engine_and_workload_keep_rank0_and_reproduce(engine: str) -> None:
    n = 12
    lat = _latency(n, 2)
    kw = {
        "bandwidth": np.full((n, n), 3e9),
        "groups": np.arange(n) // 3,
        "uplink_bandwidth": 1e9,
        "engine": engine,
        "workload": [("allreduce", 1 << 20, 5), ("broadcast", 64), ("alltoall", 1 << 24)],
        "keep_rank0": True,
        "max_iter": 30,
    }
    a = rankopt.solve(lat, rng=np.random.default_rng(4), **kw)
    b = rankopt.solve(lat, rng=a.seed, **kw)
    assert a.order[0] == 0
    assert sorted(a.order.tolist()) == list(range(n))
    assert a.order.tolist() == b.order.tolist()
    assert a.speedup >= 1.0 or a.stop_reason == "launch_order_kept"


@pytest.mark.parametrize(
    "kw",
    [
        {"workload": [("allreduce", 1 << 24, 3), ("broadcast", 1 << 20)]},
        {"workload": [("allreduce", 1 << 24, 3), ("alltoall", 1 << 20)], "engine": "openmpi"},
        {"engine": "nccl", "nbytes": 1 << 22},
        {"engine": "mpich", "nbytes": 1 << 10, "collective": "allgather"},
        {"workload": [("allreduce", 1 << 24, 3), ("allgather", 1 << 16)], "bw": True},
        {"workload": [("allreduce", 1 << 24, 3)], "engine": "gloo", "bw": True, "up": True},
        {"engine": "openmpi", "nbytes": 1 << 24, "bw": True, "up": True},
    ],
)
def test_cost_prices_a_workload_or_an_engine_as_solve_does(kw):
    rng = np.random.default_rng(7)
    n = 10
    lat = rng.random((n, n)) * 1e-5
    lat = (lat + lat.T) / 2
    np.fill_diagonal(lat, 0.0)
    bw = rng.uniform(1e9, 1e10, (n, n))
    bw = (bw + bw.T) / 2
    np.fill_diagonal(bw, 0.0)
    kw = dict(kw)
    collective = kw.pop("collective", "allreduce")
    if kw.pop("bw", False):
        kw["bandwidth"] = bw
    if kw.pop("up", False):
        kw |= {"groups": np.arange(n) // 2, "uplink_bandwidth": 2e9}
    res = rankopt.solve(lat, collective, **kw)
    assert rankopt.cost(lat, res.order, collective, **kw) == pytest.approx(res.cost, rel=1e-9)
    launch = rankopt.cost(lat, np.arange(n), collective, **kw)
    assert launch == pytest.approx(res.baseline_cost, rel=1e-9)


def test_cost_refuses_an_engine_and_an_algorithm_together():
    lat = np.full((4, 4), 1e-5) * (1 - np.eye(4))
    with pytest.raises(rankopt.RankoptInputError, match="`engine` decides each call's algorithm"):
        rankopt.cost(lat, [0, 1, 2, 3], "allreduce", "recursive_doubling", engine="openmpi")


@pytest.mark.parametrize(
    ("collective", "algorithm", "engine"),
    [
        ("allreduce", "ring", None),
        ("allreduce", "rabenseifner_ompi", None),
        ("allgather", "bruck", None),
        ("broadcast", "binomial", None),
        ("allreduce", "ring", "openmpi"),
    ],
)
def test_cost_prices_a_network_as_solve_does(tmp_path, collective, algorithm, engine):
    # a Network, its Cloud and its saved file: what the keywords leave out is the
    # network's (contention on its uplinks at 16 MiB), as in solve()
    cloud = rankopt.synthetic_cloud(2, 2, 3, 2, rng=4)
    net = rankopt.Network.from_cloud(cloud)
    path = net.save(tmp_path / "net.npz")
    kw = {"engine": engine} if engine else {"collective": collective, "algorithm": algorithm}
    res = rankopt.solve(net, **kw, rng=0)
    launch = np.arange(net.n)
    for source in (net, cloud, path, str(path)):
        if engine:
            got, base = rankopt.cost(source, res.order, engine=engine), None
        else:
            got = rankopt.cost(source, res.order, collective, algorithm)
            base = rankopt.cost(source, launch, collective, algorithm)
        assert got == pytest.approx(res.cost, rel=1e-12)
        if base is not None:
            assert base == pytest.approx(res.baseline_cost, rel=1e-12)
    # a keyword given wins over the network's: the ring's latency only
    lat_only = rankopt.cost(net, res.order, objective="sum")
    assert lat_only == pytest.approx(rankopt.cost(net.latency, res.order, objective="sum"))


def test_cost_of_a_hierarchical_network_is_its_ring_cost():
    from rankopt import HierarchicalNetwork, RankoptInputError

    rack = np.array([0, 0, 1, 1])
    lat = np.where(rack[:, None] == rack[None, :], 10e-6, 40e-6)
    hn = HierarchicalNetwork([0, 1, 2, 3, 0, 1, 2, 3], lat, groups=[rack], intra_latency=1e-6)
    res = rankopt.solve(hn)
    assert rankopt.cost(hn, res.order) == res.cost == hn.cost(res.order)
    assert rankopt.cost(hn, np.arange(8), "allgather") == hn.cost(np.arange(8), "allgather")
    with pytest.raises(RankoptInputError, match="prices rings .* got algorithm='binomial'"):
        rankopt.cost(hn, res.order, "broadcast", "binomial")
    with pytest.raises(RankoptInputError, match="got `bandwidth`"):
        rankopt.cost(hn, res.order, bandwidth=1e9, nbytes=1e6)
