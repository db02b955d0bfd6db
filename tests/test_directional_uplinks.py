"""Uplinks with a capacity per direction: ``uplink`` out of a group, ``uplink_in`` into it.

``uplink_bandwidth`` gives, per level, a ``(2, G)`` array (row 0 out of each
group, row 1 into it). Every compiled kernel that prices uplinks (the step
evaluator, the incremental contention kernel, the flow model) and the
concurrent model must read the out capacity for the transfers that leave a
group and the in capacity for those that enter it, as the specs
(:func:`~rankopt.models.network.reference_time`,
:func:`~rankopt.models.flow.flow_time`) do; on symmetric capacities nothing
changes, to the last bit.
"""

import dataclasses

import numpy as np
import pytest
from conftest import swapped
from hypothesis import given, settings
from hypothesis import strategies as st

from rankopt.models import ALGORITHMS, make_model
from rankopt.models.concurrent import ConcurrentTime
from rankopt.models.flow import FlowTime, flow_time
from rankopt.models.network import make_network, reference_time
from rankopt.models.schedule import schedule
from rankopt.models.step import StepModel

PAIRS = [(c, a) for c, algs in ALGORITHMS.items() for a in algs]


def _directional(rng, n, *, bw_kind="matrix"):
    """Latency and make_network keywords: racks of a pod, out != in on every group."""
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    bw = {"matrix": rng.uniform(1e8, 1e10, (n, n)), "scalar": 5e9, "none": None}[bw_kind]
    rack = rng.permutation(np.arange(n) % 3)
    pod = rack // 2
    g0, g1 = int(rack.max()) + 1, int(pod.max()) + 1
    # in and out a decade apart either way, so that each direction binds somewhere
    up = [
        np.stack([rng.uniform(1e7, 1e9, g0), rng.uniform(1e7, 1e9, g0)]),
        np.stack([rng.uniform(1e7, 1e9, g1), rng.uniform(1e7, 1e9, g1)]),
    ]
    kw = {"bandwidth": bw, "nbytes": 1e6, "groups": [rack, pod], "uplink_bandwidth": up}
    return lat, kw


def _spec(model, order):
    """The model's plain-Python spec, independent of the model's own ``reference_cost``."""
    if isinstance(model, StepModel):
        return reference_time(model.schedule, model.network, np.asarray(order))
    return model.reference_cost(order)


def test_directional_network_keeps_both_arrays():
    lat, kw = _directional(np.random.default_rng(0), 6)
    net = make_network(lat, **kw)
    assert net.uplink is not net.uplink_in
    assert not np.array_equal(net.uplink, net.uplink_in)
    sym = make_network(lat, **{**kw, "uplink_bandwidth": [u[0] for u in kw["uplink_bandwidth"]]})
    assert sym.uplink is sym.uplink_in


# ------------------------------------------------------ kernels == the specs
@pytest.mark.parametrize("c,a", PAIRS)
@pytest.mark.parametrize("n", [5, 8, 13])
@pytest.mark.parametrize(
    "straggle,elastic", [(1.0, 0.0), (1.35, 0.0), (1.2, 1.0), (1.0, 0.4), (1.1, 0.6)]
)
def test_compiled_matches_reference_with_directional_uplinks(c, a, n, straggle, elastic):
    rng = np.random.default_rng(n)
    lat, kw = _directional(rng, n, bw_kind="scalar" if n == 5 else "matrix")
    model = make_model(lat, c, a, objective="contention", straggle=straggle, elastic=elastic, **kw)
    orders = np.array([rng.permutation(n) for _ in range(4)])
    ref = [_spec(model, o) for o in orders]
    assert [model.cost(o) for o in orders] == pytest.approx(ref, rel=1e-12)
    assert model.batch_cost(orders) == pytest.approx(ref, rel=1e-12)
    kernel = getattr(model, "evaluator", None)
    if hasattr(kernel, "state_cost"):  # the incremental contention kernel
        assert [kernel.state_cost(o) for o in orders] == pytest.approx(ref, rel=1e-12)
    if a == "hierarchical":
        return
    o = orders[0].copy()
    for _ in range(12):  # deltas against the spec, following accepted swaps
        i, j = rng.choice(n, 2, replace=False)
        new = o.copy()
        new[[i, j]] = new[[j, i]]
        want = _spec(model, new) - _spec(model, o)
        assert model.swap_delta(o, i, j) == pytest.approx(want, rel=1e-9, abs=1e-15)
        if rng.random() < 0.5:
            o = new
        elif rng.random() < 0.3:
            o = rng.permutation(n)
    pairs = np.array([[0, 1], [2, n - 1], [1, 1]])
    got = model.swap_deltas(o, pairs)
    for (i, j), d in zip(pairs, got, strict=True):
        new = o.copy()
        new[[i, j]] = new[[j, i]]
        assert d == pytest.approx(model.cost(new) - model.cost(o), rel=1e-9, abs=1e-15)


@settings(deadline=None)
@given(
    st.integers(2, 12),
    st.integers(0, 2**31),
    st.sampled_from(PAIRS),
    st.sampled_from([1.0, 1.2, 2.0]),
    st.sampled_from([0.0, 0.5, 1.0, 0.25]),
)
def test_compiled_matches_reference_with_directional_uplinks_random(
    n, seed, pair, straggle, elastic
):
    rng = np.random.default_rng(seed)
    lat, kw = _directional(rng, n, bw_kind="none" if seed % 3 == 0 else "matrix")
    model = make_model(lat, *pair, objective="contention", straggle=straggle, elastic=elastic, **kw)
    o = rng.permutation(n)
    assert model.cost(o) == pytest.approx(_spec(model, o), rel=1e-12)
    if pair[1] == "hierarchical" or n < 2:
        return
    i, j = (int(x) for x in rng.choice(n, 2, replace=False))
    new = o.copy()
    new[[i, j]] = new[[j, i]]
    assert model.swap_delta(o, i, j) == pytest.approx(
        model.cost(new) - model.cost(o), rel=1e-9, abs=1e-15
    )


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(
        [
            ("broadcast", "binomial_gloo"),
            ("reduce", "binomial"),
            ("broadcast", "chain"),
            ("allgather", "recursive_doubling"),
        ]
    ),
    st.integers(2, 17),
    st.integers(0, 2**31),
    st.booleans(),
)
def test_flow_kernel_matches_spec_with_directional_uplinks(alg, n, seed, hosts_alone):
    # with hosts of their own (groups of one) the kernel folds each host uplink into
    # the process's link or the pair: the in direction into the receiving one
    rng = np.random.default_rng(seed)
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    bw = rng.uniform(1e8, 1e10, (n, n))
    rack = rng.integers(0, 3, n)
    g = len(np.unique(rack))  # groups are relabelled 0..G-1
    rack_up = np.stack([rng.uniform(1e8, 1e9, g), rng.uniform(1e8, 1e9, g)])
    if hosts_alone:
        host_up = np.stack([rng.uniform(5e7, 2e10, n), rng.uniform(5e7, 2e10, n)])
        kw = {"groups": [np.arange(n), rack], "uplink_bandwidth": [host_up, rack_up]}
    else:
        kw = {"groups": [rack, rack // 2], "uplink_bandwidth": [rack_up, 2e8]}
    net = make_network(lat, bandwidth=bw, nbytes=float(rng.uniform(1e3, 1e8)), **kw)
    m = FlowTime(schedule(*alg, n), net, "contention")
    for _ in range(3):
        o = rng.permutation(n)
        assert m.cost(o) == pytest.approx(flow_time(m.schedule, net, o, "contention"), rel=1e-12)


# ------------------------------------------------------------- hand-worked
LAT, BW, M = 1e-6, 1e10, 8e6
SMALL, LARGE = 1e8, 1e9


def _ring_cost(up, objective="contention", order=(0, 1, 2, 3)):
    lat = np.full((4, 4), LAT)
    rack = np.array([0, 0, 1, 1])
    m = make_model(lat, "allreduce", "ring", objective=objective, bandwidth=BW, nbytes=M,
                   groups=rack, uplink_bandwidth=up)  # fmt: skip
    return m, m.cost(np.array(order))


@pytest.mark.parametrize("narrow", ["out", "in"])
def test_ring_allreduce_on_two_racks_prices_each_direction(narrow):
    # ring 0 -> 1 -> 2 -> 3 -> 0 on racks {0, 1}, {2, 3}: every step 1 -> 2 leaves
    # rack 0 and enters rack 1, 3 -> 0 leaves rack 1 and enters rack 0, one flow
    # each. Rack 0 narrow one way: the transfer that crosses it that way runs at
    # SMALL, the rest at min(BW, LARGE); a step lasts as long as the slow one.
    row = 0 if narrow == "out" else 1
    caps = np.full((2, 2), LARGE)
    caps[row, 0] = SMALL
    m, t = _ring_cost([caps])
    want = 6 * (LAT + M / 4 / SMALL)  # 2 (p - 1) steps of nbytes / p
    assert t == pytest.approx(want, rel=1e-12)
    assert reference_time(m.schedule, m.network, np.arange(4)) == pytest.approx(want, rel=1e-12)
    _, big = _ring_cost([np.array([LARGE, LARGE])])
    assert big == pytest.approx(6 * (LAT + M / 4 / LARGE), rel=1e-12)
    assert t != pytest.approx(big, rel=1e-3)
    # the swap search sees the narrow direction too: interleaving doubles the flows
    o = np.array([0, 2, 1, 3])
    assert m.swap_delta(o, 1, 2) == pytest.approx(m.cost(np.arange(4)) - m.cost(o), rel=1e-9)
    assert m.cost(o) == pytest.approx(6 * (LAT + M / 4 / (SMALL / 2)), rel=1e-12)


def test_ring_allreduce_equal_directions_is_the_symmetric_network():
    # out == in given as (2, G) is the network of one rate per group, to the last bit
    per_group = np.array([SMALL, LARGE])
    _, sym = _ring_cost([per_group])
    _, both = _ring_cost([np.stack([per_group, per_group])])
    assert both == sym
    assert sym == pytest.approx(6 * (LAT + M / 4 / SMALL), rel=1e-12)


@pytest.mark.parametrize("c,a", PAIRS)
def test_symmetric_uplinks_in_a_separate_array_price_the_same(c, a):
    # every kernel reads uplink_in for the in direction: a copy of uplink there
    # changes no cost and no delta, bit for bit
    n = 8
    rng = np.random.default_rng(3)
    lat, kw = _directional(rng, n)
    kw["uplink_bandwidth"] = [u[0] for u in kw["uplink_bandwidth"]]
    net = make_network(lat, **kw)
    assert net.uplink_in is net.uplink
    apart = dataclasses.replace(net, uplink_in=net.uplink.copy())
    m1 = make_model(lat, c, a, objective="contention", **kw)
    if isinstance(m1, StepModel):
        m2 = StepModel(m1.schedule, apart, "contention")
    elif isinstance(m1, FlowTime):
        m2 = FlowTime(m1.schedule, apart, "contention")
    elif isinstance(m1, ConcurrentTime):
        m2 = ConcurrentTime(m1.schedule, apart, "contention")
    else:
        pytest.skip(f"{type(m1).__name__} is built from the network another way")
    for _ in range(3):
        o = rng.permutation(n)
        assert m2.cost(o) == m1.cost(o)
        if a != "hierarchical":
            assert m2.swap_delta(o, 1, n - 2) == m1.swap_delta(o, 1, n - 2)


def test_concurrent_alltoall_busiest_uplink_per_direction():
    # every group sends size * (n - size) blocks out and receives as many in:
    # the busiest uplink is the largest of load / out and load / in
    rng = np.random.default_rng(4)
    n, nbytes = 7, 7e6
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    bw = rng.uniform(1e9, 1e10, (n, n))
    out = np.array([2e7, 5e7, 1e8])
    in_ = np.array([9e7, 1e7, 3e8])
    groups = [np.array([0, 0, 0, 1, 1, 2, 2])]
    m = make_model(lat, "alltoall", "linear", objective="contention", bandwidth=bw,
                   nbytes=nbytes, groups=groups, uplink_bandwidth=[np.stack([out, in_])])  # fmt: skip
    assert isinstance(m, ConcurrentTime)
    block = nbytes / n
    t = block / bw
    np.fill_diagonal(t, 0.0)
    busiest = max(t.sum(axis=1).max(), t.sum(axis=0).max())
    sizes = np.array([3, 2, 2])
    load = sizes * (n - sizes) * block
    busiest = max(busiest, (load / out).max(), (load / in_).max())
    off = ~np.eye(n, dtype=bool)
    want = lat[off].max() + busiest
    assert (load / in_).max() > (load / out).max()  # the in direction binds here
    for _ in range(3):
        o = rng.permutation(n)
        assert m.reference_cost(o) == pytest.approx(want, rel=1e-12)
        assert m.cost(o) == pytest.approx(want, rel=1e-12)


def test_flow_single_transfer_is_capped_by_the_receivers_uplink_in():
    # 0 -> 1 across two hosts of their own: out of host 0 fast, into host 1 slow
    lat = np.full((2, 2), LAT)
    for up, rate in (
        ([np.array([[LARGE, LARGE], [LARGE, SMALL]])], SMALL),  # into 1 narrow
        ([np.array([[LARGE, LARGE], [SMALL, LARGE]])], LARGE),  # into 0 narrow: unused
        ([np.array([[SMALL, LARGE], [LARGE, LARGE]])], SMALL),  # out of 0 narrow
    ):
        net = make_network(lat, bandwidth=BW, nbytes=M, groups=[np.array([0, 1])],
                           uplink_bandwidth=up)  # fmt: skip
        m = FlowTime(schedule("broadcast", "binomial_gloo", 2), net, "contention")
        want = LAT + M / rate
        assert flow_time(m.schedule, net, np.arange(2), "contention") == pytest.approx(want)
        assert m.cost(np.arange(2)) == pytest.approx(want, rel=1e-12)


# --------------------------- swap deltas after accepted swaps, per direction
@pytest.mark.parametrize("c,a", PAIRS)
def test_swap_deltas_after_accepted_swaps_read_each_direction(c, a):
    """An evaluator that caches a transfer's pair rate must cache it for the direction
    the transfer runs: after accepted swaps, every delta equals the spec's."""
    n = 12
    gen = np.random.default_rng(12)
    lat, kw = _directional(gen, n)
    if a == "chain":
        kw["segment_size"] = kw["nbytes"] / 8
    m = make_model(lat, c, a, objective="contention", **kw)
    if not isinstance(m, StepModel):
        pytest.skip(f"{type(m).__name__} prices {c}/{a} without swap deltas")
    o = gen.permutation(n)
    for i, j in gen.integers(0, n, (120, 2)):
        new = swapped(o, i, j)
        want = _spec(m, new) - _spec(m, o)
        assert m.swap_delta(o, int(i), int(j)) == pytest.approx(want, rel=1e-9, abs=1e-15)
        if want <= 0 or gen.random() < 0.6:  # most swaps accepted: cached entries age
            o = new
    assert m.cost(o) == pytest.approx(_spec(m, o), rel=1e-12)
