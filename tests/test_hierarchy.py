"""infer_hierarchy: levels from latency, bandwidth or both."""

import subprocess
import sys

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


# -- hosts and single linkage: the probe's and the testbed's rules ---------------


def _tiers(level_of_pair, values):
    """Matrix whose entry (i, j) is values[level_of_pair[i, j]]."""
    return np.asarray(values, dtype=float)[level_of_pair]


def _probed_bandwidth(seed, per_host=2):
    """2 pods x 2 racks x 2 hosts, shuffled; half of the cross-host entries
    measured 1.5x-4x low, as when a probe's concurrent transfers shared an uplink."""
    gen = np.random.default_rng(seed)
    host = gen.permutation(np.repeat(np.arange(8), per_host))
    rack, pod = host // 2, host // 4
    level = np.where(
        host[:, None] == host,
        0,
        np.where(rack[:, None] == rack, 1, np.where(pod[:, None] == pod, 2, 3)),
    )
    bw = _tiers(level, [1e9, 125e6, 50e6, 25e6])
    cut = (gen.random(bw.shape) < 0.5) & (level > 0)
    bw[cut] /= gen.uniform(1.5, 4.0, size=int(cut.sum()))
    return bw, [f"h{h}" for h in host], [host, rack, pod]


@pytest.mark.parametrize("seed", range(10))
def test_probed_bandwidth_with_shared_transfers(seed):
    from rankopt.testbed.hierarchy import infer_bandwidth_levels

    bw, hosts, truth = _probed_bandwidth(seed)
    for lv in (
        infer_hierarchy(bandwidth=bw, hosts=hosts, linkage="single"),
        infer_bandwidth_levels(bw, hosts),
    ):
        assert len(lv) == 3
        for found, true in zip(lv, truth, strict=True):
            assert _same_partition(found, true)
    # without host names the host level is found from the intra-host bandwidth
    lv = infer_hierarchy(bandwidth=bw, linkage="single")
    assert len(lv) == 3 and all(map(_same_partition, lv, truth))


def test_single_linkage_uses_the_better_direction():
    # the former infer_bandwidth_levels example: one direction measured at half rate
    bw = np.full((4, 4), 20e6)
    bw[:2, :2] = bw[2:, 2:] = 120e6
    bw[0, 1] = 60e6
    lv = infer_hierarchy(bandwidth=bw, hosts=["a", "b", "c", "d"], linkage="single")
    assert [g.tolist() for g in lv] == [[0, 1, 2, 3], [0, 0, 1, 1]]
    bw[1, 0] = 60e6  # both directions: the only pair of hosts a, b looks like a tier of its own
    lv = infer_hierarchy(bandwidth=bw, hosts=["a", "b", "c", "d"], linkage="single")
    assert [g.tolist() for g in lv] == [[0, 1, 2, 3], [0, 1, 2, 2], [0, 0, 1, 1]]


@pytest.mark.parametrize("linkage", ["single", "average"])
def test_latency_tiers_with_host_names(linkage):
    from rankopt.probe._topology import infer_link_levels

    c = rankopt.synthetic_cloud(2, 3, 4, 2, congested=0.0, rng=7)
    lv = infer_hierarchy(c.latency, hosts=c.hosts, linkage=linkage)
    assert len(lv) == 3
    for found, true in zip(lv, c.groups, strict=True):
        assert _same_partition(found, true)
    assert lv[0].tolist() == rankopt.probe.hierarchy.host_labels(c.hosts).tolist()
    if linkage == "single":  # the probe's call is this one
        probe = infer_link_levels(c.latency, c.hosts)
        assert [p.tolist() for p in probe] == [q.tolist() for q in lv]


def test_latency_tiers_above_distinct_hosts():
    # 2 pods of 2 racks of 2 hosts, one process each (the probe schedule's case)
    near, mid, far = 1e-5, 3e-5, 9e-5
    idx = np.arange(8)
    pod, rack = idx // 4, idx // 2
    lat = np.where(pod[:, None] == pod, mid, far)
    lat = np.where(rack[:, None] == rack, near, lat)
    hosts = [f"h{i}" for i in idx]
    lv = infer_hierarchy(lat, hosts=hosts, linkage="single")
    assert [g.tolist() for g in lv] == [idx.tolist(), rack.tolist(), pod.tolist()]
    # without host names, single processes are no level
    assert [g.tolist() for g in infer_hierarchy(lat)] == [rack.tolist(), pod.tolist()]


def test_host_level_is_always_first():
    lat = np.full((6, 6), 2e-5)
    assert infer_hierarchy(lat) == []  # flat, no hosts: nothing
    flat = infer_hierarchy(lat, hosts=[f"h{i}" for i in range(6)], linkage="single")
    assert [g.tolist() for g in flat] == [list(range(6))]
    assert [g.tolist() for g in infer_hierarchy(lat[:2, :2], hosts=["a", "b"])] == [[0, 1]]
    assert [g.tolist() for g in infer_hierarchy(lat, hosts=["h"] * 6)] == [[0] * 6]
    # processes of one host share a group even when their latency says otherwise
    lat[0, 1] = lat[1, 0] = 1e-3
    lv = infer_hierarchy(lat, hosts=["a", "a", "b", "b", "c", "c"])
    assert [g.tolist() for g in lv] == [[0, 0, 1, 1, 2, 2]]


def test_hosts_with_both_matrices():
    # latency sees only the pods, bandwidth only the racks: both, nested, above the hosts
    idx = np.arange(16)
    host, rack, pod = idx // 2, idx // 4, idx // 8
    lat = np.where(host[:, None] == host, 2e-6, np.where(pod[:, None] == pod, 20e-6, 80e-6))
    bw = np.where(host[:, None] == host, 40e9, np.where(rack[:, None] == rack, 10e9, 1e9))
    hosts = [f"n{h}" for h in host]
    for linkage in ("single", "average"):
        lv = infer_hierarchy(lat, bw, hosts=hosts, linkage=linkage)
        assert [g.tolist() for g in lv] == [host.tolist(), rack.tolist(), pod.tolist()]
    assert len(infer_hierarchy(lat, hosts=hosts)) == 2  # hosts, pods
    assert len(infer_hierarchy(bandwidth=bw, hosts=hosts)) == 2  # hosts, racks


def test_errors_name_the_argument():
    lat = np.ones((4, 4))
    with pytest.raises(RankoptInputError, match=r"`hosts` must name the host of each of the 4"):
        infer_hierarchy(lat, hosts=["a", "b", "c"])
    with pytest.raises(RankoptInputError, match="`hosts` must be a sequence of host names"):
        infer_hierarchy(lat, hosts="abcd")
    with pytest.raises(RankoptInputError, match="`hosts` must be a sequence of host names"):
        infer_hierarchy(lat, hosts=4)
    with pytest.raises(RankoptInputError, match="`linkage` must be one of 'average', 'single'"):
        infer_hierarchy(lat, linkage="complete")
    with pytest.raises(RankoptInputError, match=r"`bandwidth` must be positive off the diagonal"):
        infer_hierarchy(bandwidth=np.eye(3))
    with pytest.raises(RankoptInputError, match="`latency` must be square"):
        infer_hierarchy(np.ones((3, 4)), hosts=["a", "b", "c"])
    with pytest.raises(RankoptInputError, match="`gap` must be a number"):
        infer_hierarchy(lat, gap="big")


def test_callers_report_bad_input_by_name():
    from rankopt.probe._topology import infer_link_levels
    from rankopt.testbed.hierarchy import infer_bandwidth_levels

    with pytest.raises(RankoptInputError, match="`hosts` must name the host of each of the 3"):
        infer_link_levels(np.ones((3, 3)), ["a", "b"])
    with pytest.raises(RankoptInputError, match=r"`bandwidth` must be finite; bandwidth\[0, 1\]"):
        bw = np.ones((3, 3))
        bw[0, 1] = np.nan
        infer_bandwidth_levels(bw, ["a", "b", "c"])
    with pytest.raises(RankoptInputError, match="`gap` must be greater than 1"):
        infer_bandwidth_levels(np.ones((3, 3)), ["a", "b", "c"], ratio=0.5)


@pytest.mark.parametrize("linkage", ["single", "average"])
@pytest.mark.parametrize("seed", range(6))
def test_linkage_levels_match_scipy(seed, linkage):
    # both linkages (single: the minimum spanning tree; average: rankopt's own
    # merges; neither imports scipy.cluster) cut the same dendrogram as
    # scipy.cluster.hierarchy at the same heights
    import math

    from scipy.cluster import hierarchy
    from scipy.spatial.distance import squareform

    from rankopt.probe.hierarchy import _levels_of, _relabel

    gen = np.random.default_rng(seed)
    for _ in range(40):
        n = int(gen.integers(3, 30))
        g = gen.integers(0, gen.integers(1, 6), n)
        tier = np.where(
            g[:, None] == g[None, :], 1e-6, np.where(g[:, None] // 2 == g // 2, 1e-5, 1e-4)
        )
        d = tier * np.exp(gen.normal(0, gen.choice([0.01, 0.3, 1.0]), (n, n)))
        if gen.random() < 0.3:  # ties
            d = gen.choice([1.0, 2.0, 4.0], (n, n))
        d = np.minimum(d, d.T) if linkage == "single" else 0.5 * (d + d.T)
        np.fill_diagonal(d, 0.0)
        z = hierarchy.linkage(squareform(d, checks=False), method=linkage)
        h = np.maximum.accumulate(z[:, 2])
        floor = 1e-12 * max(float(h[-1]), 1e-300)
        want = []
        for k in range(n - 2):
            lo, hi = max(float(h[k]), floor), float(h[k + 1])
            if hi >= 1.5 * lo:
                lab = hierarchy.fcluster(z, math.sqrt(lo * hi), criterion="distance") - 1
                if 1 < lab.max() + 1 < n:
                    want.append(_relabel(lab.astype(np.int64)).tolist())
        got = [_relabel(lv).tolist() for lv in _levels_of(d, 1.5, linkage)]
        assert got == want


def test_average_linkage_inference_does_not_import_scipy_cluster():
    code = (
        "import sys, numpy as np; from rankopt.probe.hierarchy import infer_hierarchy; "
        "lat = np.full((6, 6), 9e-5); lat[:3, :3] = lat[3:, 3:] = 1e-5; "
        "np.fill_diagonal(lat, 0); "
        "print(infer_hierarchy(lat)[0].tolist(), 'scipy.cluster' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[0,", "0,", "0,", "1,", "1,", "1]", "False"]


@pytest.mark.parametrize("seed", range(6))
def test_host_level_inference_is_the_process_level_one(seed):
    from rankopt.probe.hierarchy import host_block_min, host_labels, infer_host_hierarchy

    cloud = rankopt.synthetic_cloud(2, 3, 3, 1 + seed % 3, congested=0.1, shuffle=True, rng=seed)
    lat, bw, hosts = cloud.latency, cloud.bandwidth, list(cloud.hosts)
    h = host_labels(hosts)
    host_lat = host_block_min(lat, h, chunk_bytes=8 * lat.shape[0] * 3)  # several chunks
    n_hosts = int(h.max()) + 1
    brute = np.full((n_hosts, n_hosts), np.inf)
    for a in range(lat.shape[0]):
        for b in range(lat.shape[0]):
            if h[a] != h[b]:
                brute[h[a], h[b]] = min(brute[h[a], h[b]], lat[a, b], lat[b, a])
    np.fill_diagonal(brute, 0.0)
    np.testing.assert_array_equal(host_lat, brute)
    # bandwidth constant per host pair (what the linear planner's matrix is)
    host_bw = np.maximum.reduceat(
        np.maximum.reduceat(
            bw[np.ix_(np.argsort(h), np.argsort(h))],
            np.r_[0, np.flatnonzero(np.diff(np.sort(h))) + 1],
            0,
        ),
        np.r_[0, np.flatnonzero(np.diff(np.sort(h))) + 1],
        1,
    )
    block_bw = host_bw[np.ix_(h, h)]
    for got, want in (
        (infer_host_hierarchy(h, host_lat), infer_hierarchy(lat, hosts=hosts, linkage="single")),
        (
            infer_host_hierarchy(h, host_lat, host_bw),
            infer_hierarchy(lat, block_bw, hosts=hosts, linkage="single"),
        ),
        (
            infer_host_hierarchy(h, None, host_bw),
            infer_hierarchy(None, block_bw, hosts=hosts, linkage="single"),
        ),
    ):
        assert [lv.tolist() for lv in got] == [lv.tolist() for lv in want]


def test_tree_levels_of_the_spanning_tree_are_the_single_linkage_levels():
    from rankopt.probe.hierarchy import _minimum_spanning_tree, _single_levels, tree_levels

    gen = np.random.default_rng(4)
    for _ in range(10):
        n = int(gen.integers(3, 30))
        group = gen.integers(0, 4, n)
        d = np.where(group[:, None] == group[None, :], 1.0, 5.0) * gen.uniform(0.9, 1.1, (n, n))
        d = np.minimum(d, d.T)
        np.fill_diagonal(d, 0.0)
        a, b = _minimum_spanning_tree(d)
        want = [lv.tolist() for lv in _single_levels(d, 1.5)]
        assert [lv.tolist() for lv in tree_levels(a, b, d[a, b], n, 1.5)] == want


def _runner_up_by_hand(m, lab):
    """Each block's second largest off-diagonal entry (NaN the largest), by listing them."""
    g_count = int(lab.max()) + 1
    out = np.full((g_count, g_count), np.nan)
    for g in range(g_count):
        for h in range(g_count):
            vals = [m[i, j] for i in range(lab.size) for j in range(lab.size)
                    if i != j and lab[i] == g and lab[j] == h]  # fmt: skip
            if vals:
                vals.sort(key=lambda x: (np.isnan(x), x))
                out[g, h] = vals[-2] if len(vals) > 1 else vals[-1]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_block_runner_up_equals_the_entries_listed_by_hand(seed):
    from rankopt.probe.hierarchy import block_runner_up

    rng = np.random.default_rng(seed)
    for _ in range(60):
        n = int(rng.integers(1, 16))
        lab = rng.integers(0, int(rng.integers(1, n + 1)), n)  # labels may be missing
        m = [
            rng.random((n, n)),
            rng.integers(0, 3, (n, n)) * 1.0,
            rng.integers(-2, 3, (n, n)) * 1.0,
        ]
        m = m[int(rng.integers(0, 3))]
        if rng.random() < 0.3:
            m[rng.random((n, n)) < 0.1] = np.inf  # an unbounded rate: no scale to divide by
        if rng.random() < 0.1 and n > 1:
            m[0, n - 1] = np.nan
        before = m.copy()
        np.testing.assert_array_equal(block_runner_up(m, lab), _runner_up_by_hand(m, lab))
        np.testing.assert_array_equal(m, before)  # the input is left as it was


def test_alike_blocks_label_pairs_by_their_meet_level_and_groups_crossed():
    from rankopt.network.core import alike_blocks, meet_levels

    rng = np.random.default_rng(3)
    for _ in range(40):
        n = int(rng.integers(2, 30))
        host = np.sort(rng.integers(0, max(1, n // 2), n))
        levels = [host, host // 2, host // 4][: int(rng.integers(1, 4))]
        levels = [lv * 5 + 1 for lv in levels] if rng.random() < 0.5 else levels
        perm = rng.permutation(n)
        levels = [lv[perm] for lv in levels]
        hosts = [f"h{h}" for h in host[perm]]
        b = alike_blocks(levels, n, hosts)
        meet = meet_levels(levels, n)
        # by hand: the (meet, row group, column group) triple the definition names
        skip = 1
        triples = {}
        for i in range(n):
            for j in range(n):
                k = int(meet[i, j])
                if k - 1 >= skip:
                    t = (k, int(levels[k - 1][i]), int(levels[k - 1][j]))
                elif k < len(levels):
                    t = (k, int(levels[k][i]), 0)
                else:
                    t = (k, 0, 0)
                triples.setdefault(t, set()).add(int(b[i, j]))
        assert all(len(v) == 1 for v in triples.values())  # one label per triple
        assert len({next(iter(v)) for v in triples.values()}) == len(triples)  # and per label
        assert sorted({next(iter(v)) for v in triples.values()}) == list(range(len(triples)))
