"""Step schedules on hierarchical networks at scale: incremental kernels and the ``layout`` solve.

* the compiled deltas stay equal to the NumPy reference after long runs of
  accepted swaps (shared uplinks with many groups, so that a step's list of
  largest uplink terms is partial and refilled; the α-β time without uplinks);
* the guided descent and the sum of evaluators (workloads) agree with the reference;
* ``solve(method="auto")`` takes ``layout`` for these models above
  ``AUTO_LAYOUT_MIN_N`` and prices no higher than today's ``anneal`` on uneven
  networks of two and three levels (above ``ANNEAL_MAX_N``, where ``layout``
  does without ``anneal``'s order, at least 3% lower); same seed, same order.

``bench/bench_solve_scale.py`` measures the speed (never asserted here).
"""

import itertools

import numpy as np
import pytest
from _scale_networks import uneven_network
from conftest import swapped

import rankopt
import rankopt.solvers.layout as layout_module
from rankopt.models import make_model
from rankopt.models.contention import _merge_alike
from rankopt.models.schedule import schedule
from rankopt.solvers import auto_method
from rankopt.solvers.layout import ANNEAL_MAX_N, RACE, _guide, contiguous_order, packed_order
from rankopt.solvers.solve import AUTO_LAYOUT_MIN_N


def _many_groups(n, seed):
    """Hosts of 2, uneven racks of 2-4 hosts, pods of 2-3 racks: many uplinks per step."""
    gen = np.random.default_rng(seed)
    host = np.arange(n) // 2
    rack_of_host = np.repeat(np.arange(n), gen.integers(2, 5, n))[: host.max() + 1]
    rack = rack_of_host[host]
    pod_of_rack = np.repeat(np.arange(n), gen.integers(2, 4, n))[: rack.max() + 1]
    pod = pod_of_rack[rack]
    perm = gen.permutation(n)
    groups = [host[perm], rack[perm], pod[perm]]
    lat = gen.uniform(1e-6, 1e-4, (n, n))
    bw = gen.uniform(1e9, 1e10, (n, n))
    ups = [gen.uniform(5e8, 2e9, int(g.max()) + 1) for g in groups]
    return lat, bw, groups, ups


@pytest.mark.parametrize(
    "algorithm", ["rabenseifner_ompi", "rabenseifner", "recursive_doubling", "binomial"]
)
@pytest.mark.parametrize("n", [32, 40])
def test_contention_deltas_equal_the_reference_after_accepted_swaps(algorithm, n):
    lat, bw, groups, ups = _many_groups(n, 3)
    m = make_model(
        lat, "allreduce", algorithm, objective="contention", bandwidth=bw, nbytes=1e7,
        groups=groups, uplink_bandwidth=ups,
    )  # fmt: skip
    assert type(m.evaluator).__name__ == "StepContention"
    rng = np.random.default_rng(11)
    o = rng.permutation(n)
    accepted = 0
    for step, (i, j) in enumerate(rng.integers(0, n, (250, 2))):
        new = swapped(o, i, j)
        want = m.reference_cost(new) - m.reference_cost(o)
        assert m.swap_delta(o, i, j) == pytest.approx(want, rel=1e-9, abs=1e-15)
        if want < 0 or rng.random() < 0.5:
            o, accepted = new, accepted + 1
        if step % 25 == 0:
            assert m.evaluator.state_cost(o) == pytest.approx(m.reference_cost(o), rel=1e-12)
    assert accepted > 100
    assert m.evaluator.state_cost(o) == pytest.approx(m.reference_cost(o), rel=1e-12)


@pytest.mark.parametrize("algorithm", ["rabenseifner_ompi", "recursive_doubling", "bruck"])
def test_time_deltas_equal_the_reference_after_accepted_swaps(algorithm):
    n = 24
    gen = np.random.default_rng(4)
    lat = gen.uniform(1e-6, 1e-4, (n, n))
    bw = gen.uniform(1e9, 1e10, (n, n))
    coll = "allgather" if algorithm == "bruck" else "allreduce"
    m = make_model(lat, coll, algorithm, objective="time", bandwidth=bw, nbytes=1e6)
    assert type(m.evaluator).__name__ == "StepEval"
    o = gen.permutation(n)
    for i, j in gen.integers(0, n, (300, 2)):
        new = swapped(o, i, j)
        want = m.reference_cost(new) - m.reference_cost(o)
        assert m.swap_delta(o, i, j) == pytest.approx(want, rel=1e-9, abs=1e-15)
        if want <= 0 or gen.random() < 0.6:  # most swaps accepted: the lists run low
            o = new
    assert m.cost(o) == pytest.approx(m.reference_cost(o), rel=1e-12)


def test_partners_are_the_schedule_rank_graph():
    s = schedule("allreduce", "rabenseifner_ompi", 12)
    ptr, idx, w = s.partners()
    want = np.zeros((12, 12))
    for step in s.steps():
        for a, b, f in step:
            want[a, b] += f
            want[b, a] += f
    got = np.zeros((12, 12))
    for k in range(12):
        got[k, idx[ptr[k] : ptr[k + 1]]] = w[ptr[k] : ptr[k + 1]]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def _guided(m, order, seed, fixed0=False, kick=4, evals=3000):
    tables = _guide(m, m.n)
    return m.capabilities.swap_search.guided(
        order, seed, evals, 0.0, fixed0, 1e-12, 200, kick, *tables, 0.1, 0.5, True
    )


@pytest.mark.parametrize("kick", [0, 4])
def test_guided_descent_agrees_with_the_reference(kick):
    lat, bw, groups, ups = _many_groups(48, 5)
    m = make_model(
        lat, "allreduce", "rabenseifner_ompi", objective="contention", bandwidth=bw,
        nbytes=1e7, groups=groups, uplink_bandwidth=ups,
    )  # fmt: skip
    start = np.random.default_rng(2).permutation(48)
    o = start.copy()
    moves, evals, stop = _guided(m, o, 7, kick=kick)
    assert sorted(o.tolist()) == list(range(48))
    assert moves > 0 and evals > 0 and stop in (0, 2)
    assert m.cost(o) < m.cost(start)
    assert m.cost(o) == pytest.approx(m.reference_cost(o), rel=1e-12)
    assert m.evaluator.state_cost(o) == pytest.approx(m.reference_cost(o), rel=1e-12)
    again = start.copy()
    assert _guided(m, again, 7, kick=kick) == (moves, evals, stop)
    np.testing.assert_array_equal(again, o)  # same seed, same order
    pinned = start.copy()
    pinned[[0, int(np.flatnonzero(start == 0)[0])]] = [0, start[0]]
    first = pinned[0]
    _guided(m, pinned, 9, fixed0=True, kick=kick)
    assert pinned[0] == first


def test_workload_sum_of_evaluators_follows_accepted_swaps():
    lat, bw, groups, ups = _many_groups(32, 8)
    from rankopt.models.workload import PricedCall

    calls = (
        PricedCall("allreduce", 16e6, 3.0, "rabenseifner_ompi", {}),
        PricedCall("allreduce", 6.4e4, 10.0, "recursive_doubling", {}),
    )
    m = make_model(lat, workload=calls, bandwidth=bw, groups=groups, uplink_bandwidth=ups)
    assert type(m.capabilities.swap_search).__name__ == "SwapSum"
    assert len(m.capabilities.groups) == 3 and m.capabilities.partners is not None
    rng = np.random.default_rng(1)
    o = rng.permutation(32)
    for i, j in rng.integers(0, 32, (120, 2)):
        new = swapped(o, i, j)
        want = m.reference_cost(new) - m.reference_cost(o)
        assert m.swap_delta(o, i, j) == pytest.approx(want, rel=1e-9, abs=1e-15)
        # a part moved on its own (another caller) does not confuse the sum
        m.parts[0][1].swap_delta(rng.permutation(32), 0, 1)
        if want < 0 or rng.random() < 0.5:
            o = new
    start = o.copy()
    _guided(m, o, 3)
    assert m.cost(o) <= m.cost(start)
    assert m.capabilities.swap_search.cost(o) == pytest.approx(m.reference_cost(o), rel=1e-12)


def test_packed_order_puts_power_of_two_groups_on_aligned_blocks():
    gen = np.random.default_rng(0)
    rack = gen.permutation(np.repeat(np.arange(6), [8, 4, 16, 2, 2, 32]))
    order = packed_order([rack])
    assert sorted(order.tolist()) == list(range(64))
    for g, size in enumerate([8, 4, 16, 2, 2, 32]):
        where = np.flatnonzero(rack[order] == g)
        assert where[0] % size == 0 and where[-1] - where[0] == size - 1
    # uneven sizes and three levels: still a permutation, groups cut into few pieces
    net = uneven_network(200, levels=3, per_host=2, seed=1)
    for o in (packed_order(net.groups), contiguous_order(net.groups, by_size=True)):
        assert sorted(o.tolist()) == list(range(200))
    runs = np.count_nonzero(np.diff(net.groups[1][packed_order(net.groups)])) + 1
    assert runs <= 4 * (int(net.groups[1].max()) + 1)


def test_auto_rule_takes_layout_for_step_schedules_with_groups():
    n = AUTO_LAYOUT_MIN_N + 8
    net = uneven_network(n, levels=2, per_host=2, seed=0)
    kw = net.default_model()

    def model(algorithm, **extra):
        return make_model(net.latency, "allreduce", algorithm, **{**kw, **extra})

    assert auto_method(model("rabenseifner_ompi")) == "layout"
    assert auto_method(model("recursive_doubling")) == "layout"
    assert auto_method(model("ring")) == "anneal"  # ring schedules keep their ring moves
    assert auto_method(model("rabenseifner_ompi", objective="time")) == "anneal"  # no groups
    small = uneven_network(AUTO_LAYOUT_MIN_N, levels=2, per_host=2, seed=0)
    m = make_model(small.latency, "allreduce", "rabenseifner_ompi", **small.default_model())
    assert auto_method(m) == "anneal"


#: (n, levels, processes per host, seed, algorithm): uneven racks and pods, launch order
#: random; above ANNEAL_MAX_N the layouts and the descent alone, below with anneal's order
NETWORKS = [
    (96, 3, 1, 0, "rabenseifner_ompi"),
    (128, 2, 1, 1, "rabenseifner_ompi"),
    (200, 2, 1, 11, "recursive_doubling"),  # anneal's basin is the better start here
    (300, 3, 1, 20, "rabenseifner_ompi"),
    (300, 2, 2, 21, "recursive_doubling"),
    (320, 3, 4, 5, "rabenseifner_ompi"),
    (400, 2, 1, 20, "recursive_doubling"),
]


@pytest.mark.parametrize("n, levels, per_host, seed, algorithm", NETWORKS)
def test_auto_prices_no_higher_than_todays_anneal(n, levels, per_host, seed, algorithm):
    net = uneven_network(n, levels=levels, per_host=per_host, seed=seed)
    new = rankopt.solve(net, "allreduce", algorithm, rng=0)
    old = rankopt.solve(net, "allreduce", algorithm, method="anneal", rng=0)
    assert new.method == "layout"
    assert new.cost <= old.cost * (1 + 1e-9)
    if n > ANNEAL_MAX_N:  # the fast path on its own: a clear margin
        assert new.cost <= 0.97 * old.cost
    order = np.asarray(new.order)
    model = make_model(net.latency, "allreduce", algorithm, **net.default_model())
    assert new.cost == pytest.approx(model.reference_cost(order), rel=1e-12)
    again = rankopt.solve(net, "allreduce", algorithm, rng=0)
    np.testing.assert_array_equal(again.order, new.order)  # same seed, same order


def test_engine_path_and_keep_rank0_take_layout():
    net = uneven_network(130, levels=3, per_host=2, seed=6)
    res = rankopt.solve(net, engine="openmpi", rng=1)  # 16 MiB: Open MPI's Rabenseifner
    assert res.method == "layout" and res.algorithm == "rabenseifner_ompi"
    assert res.speedup > 1.0
    pinned = rankopt.solve(net, "allreduce", "rabenseifner_ompi", keep_rank0=True, rng=1)
    assert pinned.method == "layout" and pinned.order[0] == 0
    big = uneven_network(300, levels=2, per_host=2, seed=6)
    out = rankopt.solve(big, "allreduce", "rabenseifner_ompi", rng=1, options={"max_evals": 500})
    assert out.method == "layout" and out.evaluations <= 500 + 16  # layouts priced on top


@pytest.mark.parametrize("starts", [1, 2, 3])
def test_layout_starts_race_within_the_budget(starts):
    # the starts descend on a share of the budget each, the cheapest goes on with
    # the rest: every evaluation counted once, the budget spent but for the
    # shares of starts left out of the race (a layout far costlier than the
    # cheapest), same seed same order
    net = uneven_network(300, levels=2, per_host=2, seed=3)
    opts = {"max_evals": 6000, "starts": starts}
    out = rankopt.solve(net, "allreduce", "rabenseifner_ompi", rng=2, options=opts)
    assert out.method == "layout"
    share = 6000 // (RACE * starts) if starts > 1 else 6000
    assert 6000 - (starts - 1) * (share + 1) <= out.evaluations <= 6000 + 16
    again = rankopt.solve(net, "allreduce", "rabenseifner_ompi", rng=2, options=opts)
    np.testing.assert_array_equal(again.order, out.order)
    model = make_model(net.latency, "allreduce", "rabenseifner_ompi", **net.default_model())
    assert out.cost == pytest.approx(model.reference_cost(np.asarray(out.order)), rel=1e-12)


@pytest.mark.parametrize(
    "algorithm, n, distinct",
    [("rabenseifner_ompi", 32, 5), ("rabenseifner_ompi", 40, 8), ("recursive_doubling", 32, 5)],
)
def test_contention_kernel_stores_identical_steps_once(algorithm, n, distinct):
    # Rabenseifner's allgather replays its reduce-scatter (same pairs, same
    # sizes): each pair of steps is stored once with its repeats summed, the
    # fold's steps (n = 40: three of them, all different) stay apart
    s = schedule("allreduce", algorithm, n)
    ptr, src, dst, frac, rep = _merge_alike(
        s.step_ptr, s.src, s.dst, s.frac, s.repeat.astype(np.float64)
    )
    assert len(rep) == distinct and rep.sum() == s.repeat.sum()

    def steps(p, a, b, f):
        return [
            sorted(zip(a[p[k] : p[k + 1]], b[p[k] : p[k + 1]], f[p[k] : p[k + 1]], strict=True))
            for k in range(len(p) - 1)
        ]

    merged = steps(ptr, src, dst, frac)
    every = steps(s.step_ptr, s.src, s.dst, s.frac)
    for st in every:  # every step is one of the merged ones ...
        assert st in merged
    for k, st in enumerate(merged):  # ... which are distinct, repeated as often as it is
        assert merged.count(st) == 1
        assert rep[k] == sum(int(s.repeat[q]) for q, e in enumerate(every) if e == st)


@pytest.mark.parametrize(
    "n, levels, per_host, seed", [(8, 3, 1, 0), (8, 3, 2, 1), (8, 2, 2, 2), (7, 3, 1, 3)]
)
def test_layout_finds_the_exhaustive_optimum_at_tiny_n(n, levels, per_host, seed):
    net = uneven_network(
        n, levels=levels, per_host=per_host, rack_hosts=(1, 3), pod_racks=(2, 2), seed=seed
    )
    model = make_model(net.latency, "allreduce", "rabenseifner_ompi", **net.default_model())
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    best = float(model.batch_cost(perms).min())
    out = rankopt.solve(net, "allreduce", "rabenseifner_ompi", rng=0, method="layout")
    assert out.cost == pytest.approx(best, rel=1e-12)


@pytest.mark.parametrize("n, levels, per_host, seed", [(200, 3, 2, 5), (520, 2, 4, 6)])
def test_layout_is_a_seeded_permutation_no_costlier_than_its_starts(n, levels, per_host, seed):
    net = uneven_network(n, levels=levels, per_host=per_host, seed=seed)
    model = make_model(net.latency, "allreduce", "rabenseifner_ompi", **net.default_model())
    opts = {"max_evals": 20_000}
    out = rankopt.solve(net, "allreduce", "rabenseifner_ompi", rng=4, options=opts)
    order = np.asarray(out.order)
    assert out.method == "layout"
    assert sorted(order.tolist()) == list(range(n))
    assert out.cost == pytest.approx(model.reference_cost(order), rel=1e-12)
    groups = list(net.groups)
    starts = [np.arange(n), packed_order(groups), contiguous_order(groups)]
    assert out.cost <= min(model.cost(o) for o in starts) * (1 + 1e-12)
    if n <= 256:  # the greedy-cluster order is a start there
        greedy = rankopt.solve(
            net, "allreduce", "rabenseifner_ompi", rng=4, method="greedy_cluster"
        )
        assert out.cost <= greedy.cost * (1 + 1e-12)
    again = rankopt.solve(net, "allreduce", "rabenseifner_ompi", rng=4, options=opts)
    np.testing.assert_array_equal(again.order, out.order)
    other = rankopt.solve(net, "allreduce", "rabenseifner_ompi", rng=5, options=opts)
    assert sorted(np.asarray(other.order).tolist()) == list(range(n))


def test_a_far_costlier_start_is_left_out_of_the_race(monkeypatch):
    # synthetic cloud of 576: the second-cheapest layout costs several times the
    # cheapest; left out, its share is not spent and the winner descends exactly
    # as it did when it raced (same seeds, same shares)
    net = rankopt.Network.from_cloud(rankopt.synthetic_cloud(2, 2, 16, 9, rng=1))
    opts = {"max_evals": 8000}
    out = rankopt.solve(net, "allreduce", "rabenseifner_ompi", rng=0, options=opts)
    monkeypatch.setattr(layout_module, "RACE_GAP", float("inf"))
    raced = rankopt.solve(net, "allreduce", "rabenseifner_ompi", rng=0, options=opts)
    assert out.method == raced.method == "layout"
    np.testing.assert_array_equal(out.order, raced.order)
    assert out.evaluations <= 8000 - 8000 // (2 * RACE) < raced.evaluations
