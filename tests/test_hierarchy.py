"""infer_hierarchy: levels from latency, bandwidth or both."""

import numpy as np
import pytest

import rankopt
from rankopt import RankoptInputError, infer_hierarchy


def _same_partition(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return (a[:, None] == a[None, :]).tolist() == (b[:, None] == b[None, :]).tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("source", ["latency", "bandwidth", "both"])
def test_finds_hosts_racks_pods(seed, source):
    c = rankopt.synthetic_cloud(2, 3, 4, 2, congested=0.0, rng=seed)
    lv = infer_hierarchy(
        c.latency if source != "bandwidth" else None, c.bandwidth if source != "latency" else None
    )
    assert len(lv) == 3
    for found, true in zip(lv, c.groups, strict=False):
        assert _same_partition(found, true)


def test_racks_that_differ_only_in_bandwidth():
    rng = np.random.default_rng(0)
    rack = rng.permutation(np.repeat(np.arange(4), 4))
    same = rack[:, None] == rack[None, :]
    lat = np.full((16, 16), 50e-6) * rng.lognormal(0, 0.02, (16, 16))
    bw = np.where(same, 10e9, 1e9) * rng.lognormal(0, 0.02, (16, 16))
    assert infer_hierarchy(lat) == []  # latency alone sees nothing
    for lv in (infer_hierarchy(bandwidth=bw), infer_hierarchy(lat, bw)):
        assert len(lv) == 1 and _same_partition(lv[0], rack)


def test_levels_are_nested_finest_first():
    c = rankopt.synthetic_cloud(2, 2, 3, 2, congested=0.0, rng=4)
    lv = infer_hierarchy(c.latency, c.bandwidth)
    for fine, coarse in zip(lv, lv[1:], strict=False):
        assert fine.max() > coarse.max()
        for g in np.unique(fine):  # each fine group inside one coarse group
            assert len(np.unique(coarse[fine == g])) == 1


def test_flat_network_has_no_levels():
    rng = np.random.default_rng(1)
    assert infer_hierarchy(rng.uniform(1.0, 1.2, (10, 10))) == []


def test_feeds_contention_and_hierarchical_models():
    c = rankopt.synthetic_cloud(1, 2, 4, 2, congested=0.0, rng=3)
    lv = infer_hierarchy(c.latency, c.bandwidth)
    t = rankopt.cost(
        c.latency,
        np.arange(c.n),
        bandwidth=c.bandwidth,
        nbytes=1e6,
        groups=lv,
        uplink_bandwidth=1e9,
    )
    assert t > 0
    auto = rankopt.cost(
        c.latency, np.arange(c.n), "allreduce", "hierarchical", bandwidth=c.bandwidth, nbytes=1e6
    )
    given = rankopt.cost(
        c.latency,
        np.arange(c.n),
        "allreduce",
        "hierarchical",
        bandwidth=c.bandwidth,
        nbytes=1e6,
        groups=c.groups,
    )
    assert auto == pytest.approx(given)


def test_errors():
    with pytest.raises(RankoptInputError, match="needs `latency`, `bandwidth` or both"):
        infer_hierarchy()
    with pytest.raises(RankoptInputError, match="`gap` must be greater than 1"):
        infer_hierarchy(np.ones((3, 3)), gap=1.0)
    with pytest.raises(RankoptInputError, match="`bandwidth` must have the shape of `latency`"):
        infer_hierarchy(np.ones((3, 3)), np.ones((4, 4)))
    with pytest.raises(RankoptInputError, match="`latency` must be finite"):
        infer_hierarchy(np.full((3, 3), np.inf))
