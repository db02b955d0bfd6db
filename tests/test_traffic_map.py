"""Method ``map``: process mapping of point-to-point traffic (rankopt/solvers/mapping.py)."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

import rankopt
from rankopt import RankoptInputError
from rankopt.models.traffic import Traffic, TrafficModel
from rankopt.solvers import METHODS, auto_method, show_options
from rankopt.solvers import _traffic_map as kernels
from rankopt.solvers._base import SolveContext
from rankopt.solvers.mapping import _near, _time_arrays, distance_tiers, partition_order
from rankopt.solvers.spec import MODEL_FIELDS

needs_solve_traffic = pytest.mark.skipif(
    "traffic" not in MODEL_FIELDS, reason="solve() takes no traffic in this checkout"
)


def grid_traffic(a, b):
    """4-point halo of an a x b grid: one unit each way between neighbouring cells."""
    rows, cols = [], []
    for i in range(a):
        for j in range(b):
            k = i * b + j
            if i + 1 < a:
                rows.append(k), cols.append(k + b)
            if j + 1 < b:
                rows.append(k), cols.append(k + 1)
    w = sp.coo_array((np.ones(len(rows)), (rows, cols)), shape=(a * b, a * b))
    return (w + w.T).tocsr()


def tiered(sizes, dists):
    """Distance of a hierarchy: ``sizes`` finest first (4, 4, 4: 4 per group,
    4 groups per group of groups, 4 of those), ``dists`` per level."""
    n = int(np.prod(sizes))
    p = np.arange(n)
    d = np.full((n, n), float(dists[-1]))
    block = np.cumprod(sizes[:-1])
    for b, dist in reversed(list(zip(block, dists[:-1], strict=True))):
        d[p[:, None] // b == p[None, :] // b] = dist
    np.fill_diagonal(d, 0.0)
    return d


def run(model, seed=0, **ctx):
    c = SolveContext(gen=np.random.default_rng(seed), seed=seed, **ctx)
    return METHODS["map"].fn(model, c)


def stencil_problem(seed=1):
    """8x8 halo on a 4:4:4 hierarchy (1:10:100) whose processes were launched in a
    random order; the hand-placed layout (2x2 cells per group of 4, 4x4 per 16)."""
    w = grid_traffic(8, 8)
    slot = np.random.default_rng(seed).permutation(64)  # process i sits at slot[i]
    d = tiered([4, 4, 4], [1, 10, 100])[np.ix_(slot, slot)]
    r, c = np.divmod(np.arange(64), 8)
    block_slot = 16 * (2 * (r // 4) + c // 4) + 4 * (2 * (r % 4 // 2) + c % 4 // 2) + 2 * (r % 2)
    block_slot += c % 2
    inv = np.argsort(slot)
    return d, Traffic.from_weights(w), inv[block_slot]


def test_stencil_reaches_the_block_layout_which_is_optimal():
    # Lower bound: a 4-set of grid cells spans at most 4 halo edges and a 16-set
    # at most 24, so with E1 edges inside groups of 4 (<= 64) and E1 + E10 inside
    # groups of 16 (<= 96) of the 112, the undirected cost 11200 - 9 E1 - 90 (E1 +
    # E10) is at least 1984: the block layout's, twice that directed.
    d, t, block = stencil_problem()
    model = TrafficModel(d, t)
    assert model.cost(block) == 2 * 1984
    out = run(model)
    assert sorted(out.order.tolist()) == list(range(64))
    assert model.cost(out.order) == pytest.approx(2 * 1984, rel=1e-12)
    assert model.cost(np.arange(64)) > 3 * model.cost(block)  # the launch order is far off


@needs_solve_traffic
def test_solve_finds_the_block_layout_and_auto_picks_map():
    d, t, block = stencil_problem(seed=4)
    for method in ("map", "auto"):
        res = rankopt.solve(d, traffic=t, method=method, rng=0)
        assert res.method == "map"
        assert res.cost == pytest.approx(2 * 1984, rel=1e-12)
        assert res.cost == pytest.approx(TrafficModel(d, t).cost(res.order), rel=1e-12)
        assert res.baseline_cost > res.cost


@needs_solve_traffic
def test_solve_same_seed_same_order():
    rng = np.random.default_rng(3)
    d = tiered([4, 8, 4], [1, 10, 100])
    slot = rng.permutation(128)
    d = d[np.ix_(slot, slot)]
    w = sp.random_array((128, 128), density=0.05, rng=5)
    t = Traffic.from_weights(w)
    a = rankopt.solve(d, traffic=t, method="map", rng=11)
    b = rankopt.solve(d, traffic=t, method="map", rng=11)
    np.testing.assert_array_equal(a.order, b.order)
    assert a.cost == b.cost
    assert a.cost < a.baseline_cost


def test_same_seed_same_order_on_the_method():
    d, t, _ = stencil_problem(seed=2)
    w = sp.random_array((64, 64), density=0.1, rng=2)
    model = TrafficModel(d, Traffic.from_weights(w + grid_traffic(8, 8)))
    a, b = run(model, seed=5), run(model, seed=5)
    np.testing.assert_array_equal(a.order, b.order)
    assert a.evaluations == b.evaluations


def _random_model(n, seed, objective="time", bandwidth=True):
    gen = np.random.default_rng(seed)
    rack = gen.permutation(np.arange(n) % 3)
    same = rack[:, None] == rack[None, :]
    lat = np.where(same, 2e-6, 5e-5) * gen.uniform(0.7, 1.4, (n, n))
    np.fill_diagonal(lat, 0.0)
    bw = np.where(same, 1e10, 1e9) * gen.uniform(0.7, 1.4, (n, n)) if bandwidth else None
    w = gen.uniform(0, 1e6, (n, n)) * (gen.uniform(size=(n, n)) < 0.35)
    msg = np.ceil(w / 2e5)
    kw = {}
    if objective == "contention":
        kw = {"groups": [rack], "uplink": np.array([[3e9, 2e9, 4e9]])}
    t = Traffic.from_matrix(w, msg)
    return TrafficModel(lat, t, bandwidth=bw, objective=objective, **kw)


@pytest.mark.parametrize("n", [5, 7, 8])
@pytest.mark.parametrize("bandwidth", [True, False])
def test_refinement_ends_at_a_local_optimum_of_all_swaps(n, bandwidth):
    for seed in range(3):
        model = _random_model(n, 10 * n + seed, bandwidth=bandwidth)
        out = run(model, seed=seed)
        order = np.asarray(out.order)
        cost = model.reference_cost(order)
        for i, j in itertools.combinations(range(n), 2):
            p = order.copy()
            p[i], p[j] = p[j], p[i]
            assert model.reference_cost(p) >= cost * (1 - 1e-9), (seed, i, j)
        best = min(model.cost(np.array(p)) for p in itertools.permutations(range(n)))
        assert cost >= best * (1 - 1e-12)
        assert out.stop_reason == "local_optimum"


def test_random_traffic_beats_the_launch_order():
    model = _random_model(48, 3)
    out = run(model)
    assert model.cost(out.order) < 0.9 * model.cost(np.arange(48))
    # the greedy start and the refinement, each no worse than what it started from
    d = np.asarray(out.order)
    assert model.cost(d) == pytest.approx(model.reference_cost(d), rel=1e-12)


def test_kernels_match_the_model():
    model = _random_model(12, 7)
    t = _time_arrays(model.capabilities.traffic, model.latency, model.bandwidth)
    gen = np.random.default_rng(0)
    for _ in range(20):
        o = gen.permutation(12)
        assert t.cost(o) == pytest.approx(model.reference_cost(o), rel=1e-12)
        i, j = (int(x) for x in gen.choice(12, 2, replace=False))
        assert kernels.swap_delta(*t.net(), o, i, j) == pytest.approx(
            model.swap_delta(o, i, j), rel=1e-9, abs=1e-18
        )


@pytest.mark.parametrize("size_a", [1, 7, 16, 31])
def test_bisection_keeps_exact_sizes_and_reports_its_cut(size_a):
    w = grid_traffic(4, 8)
    t = _time_arrays(Traffic.from_weights(w), tiered([32], [1]), None)
    members = np.arange(32, dtype=np.int64)
    loc = np.full(32, -1, dtype=np.int64)
    side, cut = kernels.bisect(t.xadj, t.adj, t.w, members, size_a, 3, 4, 8, loc)
    assert int((side == 0).sum()) == size_a
    assert (loc == -1).all()
    sym = (w + w.T).toarray() * t.w.max() / 2  # every edge has one weight
    assert cut == pytest.approx(sym[np.ix_(side == 0, side == 1)].sum(), rel=1e-12)
    if size_a == 16:
        assert cut == pytest.approx(4 * t.w.max())  # the 4x4 halves: 4 edges cut


@pytest.mark.parametrize("cycles", [1, 3])
def test_multilevel_bisection_keeps_exact_sizes_and_finds_a_small_cut(cycles):
    w = grid_traffic(16, 16)
    t = _time_arrays(Traffic.from_weights(w), tiered([256], [1]), None)
    loc = np.full(256, -1, dtype=np.int64)
    sym = (w + w.T).toarray() * t.w.max() / 2  # every edge has one weight
    gen = np.random.default_rng(0)
    for members, size_a in ((np.arange(256, dtype=np.int64), 128),
                            (np.sort(gen.choice(256, 150, replace=False)), 61)):  # fmt: skip
        args = (t.xadj, t.adj, t.w, members, size_a, 7, 4, 8, loc, 16, 0, cycles)
        side, cut = kernels.bisect(*args)
        assert int((side == 0).sum()) == size_a
        assert (loc == -1).all()
        a, b = members[side == 0], members[side == 1]
        assert cut == pytest.approx(sym[np.ix_(a, b)].sum(), rel=1e-12)
        again, cut2 = kernels.bisect(*args)
        np.testing.assert_array_equal(side, again)  # same seed, same sides
        if size_a == 128:
            assert cut <= 20 * t.w.max()  # the two 8x16 halves cut 16 edges


def test_kicks_never_end_worse_than_the_descent_they_start_from():
    d, t, _ = stencil_problem(seed=3)
    w = sp.random_array((64, 64), density=0.05, rng=4)
    model = TrafficModel(d, Traffic.from_weights(w + grid_traffic(8, 8)))
    ta = _time_arrays(model.capabilities.traffic, model.latency, None)
    near = _near(distance_tiers(d), ta.lat)
    start = np.random.default_rng(8).permutation(64).astype(np.int64)
    costs = []
    for kicks in (0, 300):
        o = start.copy()
        _, _, stop = kernels.refine_time(
            *ta.net(), near[0], near[1], o, 5, 0, 0, 0.0, False, 1e-12, False, kicks
        )
        assert stop == 0 and sorted(o.tolist()) == list(range(64))
        assert ta.cost(o) == pytest.approx(model.reference_cost(o), rel=1e-12)
        costs.append(ta.cost(o))
    # the same seed reaches the same first local optimum; a kick is kept only if no dearer
    assert costs[1] <= costs[0]


def test_partition_follows_unequal_groups():
    sizes = np.array([5, 3, 8, 6])
    lab = np.repeat(np.arange(4), sizes)
    d = np.where(lab[:, None] == lab[None, :], 1.0, 10.0)
    np.fill_diagonal(d, 0.0)
    w = grid_traffic(2, 11)
    t = _time_arrays(Traffic.from_weights(w), d, None)
    order, _ = partition_order(t, [lab], np.random.default_rng(0))
    assert sorted(order.tolist()) == list(range(22))


def test_contention_objective_runs_and_never_loses():
    for n in (9, 24):
        model = _random_model(n, n, objective="contention")
        out = run(model)
        order = np.asarray(out.order)
        assert sorted(order.tolist()) == list(range(n))
        assert model.cost(order) <= model.cost(np.arange(n)) * (1 + 1e-12)
        assert model.cost(order) == pytest.approx(model.reference_cost(order), rel=1e-12)


def test_keep_rank0_pins_rank_0_on_process_0():
    d, t, _ = stencil_problem(seed=6)
    out = run(TrafficModel(d, t), keep_rank0=True)
    assert out.order[0] == 0
    init = np.random.default_rng(1).permutation(64)
    model = TrafficModel(d, t)
    out = run(model, init=init)
    assert model.cost(out.order) <= model.cost(init)


def test_auto_picks_map_exactly_for_traffic():
    d, t, _ = stencil_problem()
    assert auto_method(TrafficModel(d, t)) == "map"
    assert auto_method(TrafficModel(d[:8, :8], Traffic.from_weights(np.ones((8, 8))))) == "map"
    assert auto_method(rankopt.models.make_model(d, "allreduce", "ring")) != "map"
    assert auto_method(rankopt.models.make_model(d[:6, :6], "allreduce", "ring")) != "map"


def test_map_refuses_a_model_without_traffic_and_checks_its_options():
    model = rankopt.models.make_model(tiered([4, 2], [1, 10]), "allreduce", "ring")
    with pytest.raises(RankoptInputError, match="method 'map' needs a model with point-to-point"):
        run(model)
    d, t, _ = stencil_problem()
    with pytest.raises(RankoptInputError, match="`tries`"):
        run(TrafficModel(d, t), options={"tries": 0})
    assert "map: " in show_options("map")
    with pytest.raises(RankoptInputError, match="`cycles`"):
        run(TrafficModel(d, t), options={"cycles": 0})
    with pytest.raises(RankoptInputError, match="`kicks`"):
        run(TrafficModel(d, t), options={"kicks": -1})
    assert "coarsen_to, cycles, fm_passes, kicks, max_evals, restarts, tries" in show_options("map")


def test_distance_tiers():
    d = tiered([2, 3, 2], [1, 5, 9])
    levels = distance_tiers(d)
    assert [int(lab.max()) + 1 for lab in levels] == [6, 2]
    noisy = d * np.random.default_rng(0).uniform(0.9, 1.1, d.shape)
    assert distance_tiers(noisy) is None


def test_budget_stops_the_refinement():
    model = _random_model(40, 1)
    out = run(model, options={"max_evals": 50})
    assert out.stop_reason == "max_evals"
    assert model.cost(out.order) <= model.cost(np.arange(40))


def test_a_spent_time_limit_stops_the_partitions_after_the_first(monkeypatch):
    """Under ``time_limit`` the starts are made only while time is left: the first
    partition always, no more once it is spent (each costs O(E) work: 60 ms for a
    dense traffic at n = 256), and no greedy start; without a limit, all of them."""
    import rankopt.solvers.mapping as mapping

    calls = {"partition": 0, "greedy": 0}
    partition, greedy = mapping.partition_order, mapping._k.greedy_place

    def counted_partition(*a, **k):
        calls["partition"] += 1
        return partition(*a, **k)

    class CountedKernels:
        def __getattr__(self, name):
            return getattr(kernels, name)

        def greedy_place(self, *a, **k):
            calls["greedy"] += 1
            return greedy(*a, **k)

    monkeypatch.setattr(mapping, "partition_order", counted_partition)
    monkeypatch.setattr(mapping, "_k", CountedKernels())
    model = _random_model(40, 2)
    out = run(model, time_limit=1e-9)
    assert calls == {"partition": 1, "greedy": 0}
    assert out.stop_reason == "time_limit"
    assert sorted(np.asarray(out.order).tolist()) == list(range(40))
    assert model.cost(out.order) <= model.cost(np.arange(40))
    calls.update(partition=0, greedy=0)
    run(model)
    assert calls == {"partition": mapping.RESTARTS, "greedy": 1}


def _dense_qap(n, seed, symmetric=True):
    gen = np.random.default_rng(seed)
    a, b = gen.random((n, n)), gen.random((n, n))
    if symmetric:
        a, b = a + a.T, b + b.T
    np.fill_diagonal(a, 0.0)
    np.fill_diagonal(b, 0.0)
    return a, b


@pytest.mark.parametrize("symmetric", [True, False])
def test_the_relaxation_is_scipys_faq(symmetric):
    """Frank–Wolfe from the barycentre with the exact line search, as SciPy's FAQ:
    the same order on symmetric and asymmetric instances (its line search reads no
    product of its own), and with rank 0 pinned the same as FAQ's ``partial_match``."""
    import warnings

    from scipy.optimize import quadratic_assignment

    from rankopt.solvers._relax import relaxed_order

    for seed in range(3):
        a, b = _dense_qap(30, seed, symmetric)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            faq = quadratic_assignment(a, b, method="faq")
        order, steps = relaxed_order([(a, b)], None, 30, 0.03)
        assert sorted(order.tolist()) == list(range(30))
        assert (a * b[np.ix_(order, order)]).sum() == pytest.approx(faq.fun, rel=1e-12)
        assert steps == faq.nit
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            faq = quadratic_assignment(a, b, method="faq", options={"partial_match": [[0, 0]]})
        linear = np.outer(a[0, 1:], b[0, 1:]) + np.outer(a[1:, 0], b[1:, 0])
        order, steps = relaxed_order([(a[1:, 1:], b[1:, 1:])], linear, 30, 0.03)
        order = np.concatenate([[0], order + 1])
        assert (a * b[np.ix_(order, order)]).sum() == pytest.approx(faq.fun, rel=1e-12)
        assert steps == faq.nit


def test_the_relaxed_problem_prices_every_order_as_the_kernels():
    """The quadratic form the relaxation minimises is the α-β time of the traffic
    (messages by latency, bytes by inverse bandwidth), rank 0 pinned or not."""
    from rankopt.solvers.mapping import _relaxed_problem

    model = _random_model(9, 4, bandwidth=True)
    t = _time_arrays(model.capabilities.traffic, model.latency, model.bandwidth)
    gen = np.random.default_rng(1)
    full, _ = _relaxed_problem(t, False)
    own = sum(a[0, 0] * b[0, 0] for a, b in full)  # rank 0 with itself on process 0
    for pinned in (False, True):
        terms, linear = _relaxed_problem(t, pinned)
        assert len(terms) == 2 and (linear is None) == (not pinned)
        for _ in range(10):
            order = gen.permutation(9)
            if pinned:
                order = np.concatenate([[0], 1 + gen.permutation(8)])
            free = order[1:] - 1 if pinned else order
            p = np.zeros((free.size, free.size))
            p[np.arange(free.size), free] = 1.0
            value = sum(np.vdot(a @ p @ b.T, p) for a, b in terms)
            if pinned:
                value += np.vdot(linear, p) + own
            assert value == pytest.approx(t.cost(order), rel=1e-12)


def test_a_dense_traffic_starts_from_the_relaxation_and_ends_below_faq(monkeypatch):
    """Dense traffic (every pair talks) from ``RELAX_MIN_N`` processes: the first start
    is FAQ's order and the swaps only lower it, so ``map`` never ends above FAQ; a
    sparse traffic, or a smaller one, makes no such start."""
    import warnings

    from scipy.optimize import quadratic_assignment

    import rankopt.solvers.mapping as mapping

    n = mapping.RELAX_MIN_N
    lat = rankopt.synthetic_cloud(2, 4, n // 32, 4, rng=2).latency
    w, _ = _dense_qap(n, 5)
    model = TrafficModel(lat, Traffic.from_weights(w))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        faq = quadratic_assignment(w, lat, method="faq")
    out = run(model, options={"restarts": 1, "kicks": 0})
    assert model.cost(out.order) <= faq.fun * (1 + 1e-12)
    assert out.evaluations >= faq.nit  # the relaxation's steps are counted

    import rankopt.solvers._relax as relax

    def refused(*a, **k):
        raise AssertionError("no relaxed start expected")

    monkeypatch.setattr(relax, "relaxed_order", refused)
    sparse = w * (np.random.default_rng(0).random((n, n)) < 0.3)
    run(TrafficModel(lat, Traffic.from_weights(sparse)), options={"restarts": 1, "kicks": 0})
    monkeypatch.setattr(mapping, "RELAX_MIN_N", n + 1)
    run(model, options={"restarts": 1, "kicks": 0})
