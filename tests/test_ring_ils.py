"""The symmetric ring search at sizes where its long-flip paths run.

The Lin-Kernighan move keeps the flips of a move under trial on a virtual
tour once one of them is longer than a few dozen positions; random matrices
of a few hundred processes make most trial flips that long.
"""

import numpy as np
import pytest
from _rings import is_perm as _is_perm
from _rings import uniform as _uniform

from rankopt.models.ring import ring_sum_reference
from rankopt.solvers import _ring_search as rs


def _two_opt_optimal(m, tour, nb):
    n = len(tour)
    pos = np.empty(n, dtype=np.int64)
    pos[tour] = np.arange(n)
    for a in range(n):
        for step in (1, -1):
            b = tour[(pos[a] + step) % n]
            for c in nb[a]:
                d = tour[(pos[c] + step) % n]
                if len({a, b, c, d}) == 4 and m[a, c] + m[b, d] - m[a, b] - m[c, d] < -1e-9:
                    return False
    return True


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("n", "seed"), [(150, 0), (333, 1)])
def test_search_with_long_flips_keeps_permutation_and_tracks_cost(n, seed, dtype):
    m = _uniform(n, seed, dtype)
    nb = rs.alpha_candidates(m, 8, 10)[0]
    tour = np.random.default_rng(seed).permutation(n).astype(np.int64)
    before = ring_sum_reference(m.astype(np.float64), tour)
    delta, *_ = rs.local_search(m, tour, nb)
    assert _is_perm(tour, n)
    mid = ring_sum_reference(m.astype(np.float64), tour)
    assert np.isclose(mid, before + delta, rtol=1e-5)
    assert _two_opt_optimal(m, tour, nb)
    d2, _, _, kicks, stop = rs.iterated_local_search(m, tour, nb, seed, 300)
    assert (kicks, stop) == (300, 2) and _is_perm(tour, n)
    assert d2 <= 0
    assert np.isclose(ring_sum_reference(m.astype(np.float64), tour), mid + d2, rtol=1e-5)


def test_same_seed_same_tour():
    m = _uniform(257, 3)
    nb = rs.knn_lists(m, 8)
    tours = []
    for _ in range(2):
        t = np.random.default_rng(3).permutation(257).astype(np.int64)
        rs.local_search(m, t, nb)
        rs.iterated_local_search(m, t, nb, 11, 200)
        tours.append(t)
    assert np.array_equal(*tours)


def test_local_search_from_a_random_ring_finds_the_optimum_of_points_in_convex_position():
    # on points in convex position a ring is optimal iff no two links cross, so
    # the local optimum is the hull order; a random start makes long trial flips
    n = 300
    ang = np.sort(np.random.default_rng(5).uniform(0, 2 * np.pi, n))
    pts = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    m = np.ascontiguousarray(np.linalg.norm(pts[:, None] - pts[None], axis=-1))
    optimum = ring_sum_reference(m, np.arange(n))
    nb = rs.knn_lists(m, 8)
    for seed in range(3):
        tour = np.random.default_rng(seed).permutation(n).astype(np.int64)
        rs.local_search(m, tour, nb)
        rs.iterated_local_search(m, tour, nb, seed, 50)
        assert _is_perm(tour, n)
        assert np.isclose(ring_sum_reference(m, tour), optimum, rtol=1e-9)


def _kicks_track_cost_and_repeat(n, seed, dtype, kicks, *kick_args):
    """Two ILS runs from one local optimum: a permutation whose length is the start
    plus the returned delta, the same ring both times."""
    m = _uniform(n, seed, dtype)
    nb = rs.alpha_candidates(m, 5, 10)[0]
    runs = []
    for _ in range(2):
        tour = np.random.default_rng(seed).permutation(n).astype(np.int64)
        rs.local_search(m, tour, nb)
        start = ring_sum_reference(m.astype(np.float64), tour)
        d, _, _, done, stop = rs.iterated_local_search(
            m, tour, nb, seed, kicks, 0.0, 150, None, 0, 0.0, *kick_args
        )
        assert (done, stop) == (kicks, 2) and _is_perm(tour, n) and d <= 0
        assert np.isclose(ring_sum_reference(m.astype(np.float64), tour), start + d, rtol=1e-5)
        runs.append(tour)
    assert np.array_equal(*runs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("n", "seed"), [(9, 4), (150, 0), (333, 1)])
def test_candidate_kicks_keep_permutation_track_cost_and_repeat(n, seed, dtype):
    _kicks_track_cost_and_repeat(n, seed, dtype, 300, 1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("n", "seed"), [(9, 4), (12, 2), (150, 0), (333, 1)])
@pytest.mark.parametrize("accept", [0.0, 0.5, 50.0])
def test_bridge_kicks_keep_permutation_track_cost_and_repeat(n, seed, dtype, accept):
    # every kick a double bridge (share 1): a wrong delta or flip shows as a
    # ring whose length is not start + delta; with ``accept`` the walk may end
    # above its best ring, and the best is what comes back
    _kicks_track_cost_and_repeat(n, seed, dtype, 200, 2, accept, 1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("n", "seed"), [(9, 4), (150, 0), (333, 1)])
@pytest.mark.parametrize(("pass_every", "breadth"), [(7, 1), (50, 3), (0, 3), (1, 2)])
def test_kicks_with_passes_and_breadth_track_cost_and_repeat(n, seed, dtype, pass_every, breadth):
    # candidate kicks with a full local-search pass every ``pass_every`` kicks and
    # a Lin-Kernighan move of first-step ``breadth``, and the same for the mixed kick
    _kicks_track_cost_and_repeat(n, seed, dtype, 120, 1, 0.0, 0.3, pass_every, breadth)
    _kicks_track_cost_and_repeat(n, seed, dtype, 60, 2, 0.5, 0.3, pass_every, breadth)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("n", "seed"), [(9, 4), (150, 0), (333, 1)])
@pytest.mark.parametrize(("breadth", "breadth2"), [(3, 2), (1, 3), (2, 2)])
def test_second_step_breadth_and_walk_track_cost_and_repeat(n, seed, dtype, breadth, breadth2):
    # a Lin-Kernighan move whose second step also goes on from ``breadth2`` partial
    # gains, under candidate kicks that walk (kept up to half a ring link above the
    # best ring, which is what comes back) with passes, and under the mixed kick
    _kicks_track_cost_and_repeat(n, seed, dtype, 120, 1, 0.5, 0.3, 7, breadth, breadth2)
    _kicks_track_cost_and_repeat(n, seed, dtype, 60, 2, 0.5, 0.3, 0, breadth, breadth2)


@pytest.mark.parametrize(("breadth", "breadth2"), [(3, 2), (1, 3)])
def test_second_step_breadth_local_search_shortens_to_a_narrow_local_optimum(breadth, breadth2):
    # each pass is a valid ring whose length is its start plus the returned delta,
    # never longer; where no pass moves, no pass at breadth 1 moves either
    m = _uniform(400, 6)
    nb = rs.alpha_candidates(m, 6, 10)[0]
    tour = np.random.default_rng(6).permutation(400).astype(np.int64)
    length = ring_sum_reference(m, tour)
    for _ in range(100):
        d, _, moves, _ = rs.local_search(m, tour, nb, True, 0.0, 0, 0.0, breadth, breadth2)
        assert d <= 0 and _is_perm(tour, 400)
        assert np.isclose(ring_sum_reference(m, tour), length + d)
        length = ring_sum_reference(m, tour)
        if moves == 0:
            break
    assert moves == 0
    assert rs.local_search(m, tour.copy(), nb)[2] == 0


def test_kick_walk_of_candidate_and_mixed_kicks():
    # candidate kicks walk with alpha candidates only (n <= 4096), the mixed kicks always,
    # the window kicks never
    from rankopt.solvers import ring

    assert ring.kick_walk(4096, 1) == ring.CANDIDATE_ACCEPT > 0
    assert ring.kick_walk(16384, 1) == 0.0
    assert ring.kick_walk(1024, 2) == ring.BRIDGE_ACCEPT > 0
    assert ring.kick_walk(1024, 0) == 0.0
    assert ring.alpha_neighbors(1024) == 5 and ring.alpha_neighbors(4096) == 6


@pytest.mark.parametrize("breadth", [2, 3])
def test_broader_lin_kernighan_local_optimum_is_a_narrow_one(breadth):
    # the first step tries its best partial gain first, then the next ones: a ring
    # where no pass at ``breadth`` moves is one where no pass at breadth 1 moves
    m = _uniform(400, 5)
    nb = rs.alpha_candidates(m, 5, 10)[0]
    tour = np.random.default_rng(5).permutation(400).astype(np.int64)
    start = ring_sum_reference(m, tour)
    total = 0.0
    for _ in range(100):
        d, _, moves, _ = rs.local_search(m, tour, nb, True, 0.0, 0, 0.0, breadth)
        total += d
        if moves == 0:
            break
    assert moves == 0 and _is_perm(tour, 400)
    assert np.isclose(ring_sum_reference(m, tour), start + total)
    assert rs.local_search(m, tour.copy(), nb)[2] == 0
    again = np.random.default_rng(5).permutation(400).astype(np.int64)
    for _ in range(100):
        if rs.local_search(m, again, nb, True, 0.0, 0, 0.0, breadth)[2] == 0:
            break
    assert np.array_equal(again, tour)


def test_bridge_kick_walk_returns_its_best_ring():
    # a walk that keeps every kick (accept huge) still returns the best ring it saw:
    # the callback's running totals bound it from above
    m = _uniform(200, 7)
    nb = rs.alpha_candidates(m, 5, 10)[0]
    tour = np.random.default_rng(7).permutation(200).astype(np.int64)
    rs.local_search(m, tour, nb)
    start = ring_sum_reference(m, tour)
    seen = []
    d, *_ = rs.iterated_local_search(
        m, tour, nb, 3, 400, 0.0, 150, lambda k, t: seen.append(t), 1, 0.0, 2, 1e6, 0.3
    )
    assert max(seen) > 0 > d  # it walked above the start, and came back with its best
    assert np.isclose(d, min(seen)) and np.isclose(ring_sum_reference(m, tour), start + d)


def test_kick_type_tells_uniform_weights_from_points_in_the_plane(monkeypatch):
    from rankopt.solvers import ring
    from rankopt.solvers.ring import candidate_lists, greedy_ring, kick_type

    pts = np.random.default_rng(0).random((400, 2))
    plane = np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1))
    for m, want in ((_uniform(400, 0), 2), (plane, 0)):
        nb = candidate_lists(m, 5, "nearest")
        tour = greedy_ring(m, nb)
        rs.local_search(m, tour, nb)
        assert kick_type(m, tour, 150) == want
        # above BRIDGE_MAX_N uniform weights get the candidate kicks alone
        monkeypatch.setattr(ring, "BRIDGE_MAX_N", 399)
        assert kick_type(m, tour, 150) == min(want, 1)
        monkeypatch.undo()
    assert rs.window_link_ratio(np.zeros((8, 8)), np.arange(8, dtype=np.int64), 3, 0) == 1.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_penalised_weights_are_symmetric_and_shift_every_ring_alike(dtype):
    from rankopt.solvers.ring import penalised_weights

    n = 300
    m = _uniform(n, 3, dtype)
    nb, pi, _ = rs.alpha_candidates(m, 5, 100, 16)
    assert np.ptp(pi) > 0
    ws, nbs = penalised_weights(m, pi, nb)
    # float64 whatever w's dtype: float32 sums turn ties broken by the penalties into
    # gains of a few ulps, and a local search on integer weights never ended
    assert ws.dtype == np.float64 and ws.flags.c_contiguous
    # exactly symmetric: the kernels read a link from either end (a matrix rounded
    # differently each way round let a 5-opt repair cycle)
    assert np.array_equal(ws, ws.T) and not np.diag(ws).any()
    off = ~np.eye(n, dtype=bool)
    tol = 1e-12
    np.testing.assert_allclose((ws - m)[off], (pi[:, None] + pi[None, :])[off], atol=tol)
    # the same candidates, sorted by the penalised weights
    assert all(set(a) == set(b) for a, b in zip(nb.tolist(), nbs.tolist(), strict=True))
    assert (np.diff(np.take_along_axis(ws, nbs, 1), axis=1) >= 0).all()
    # every ring is longer by the same 2 sum(pi): the shortest ring is the same
    gen = np.random.default_rng(0)
    for _ in range(5):
        t = gen.permutation(n)
        shift = ring_sum_reference(ws.astype(np.float64), t) - ring_sum_reference(
            m.astype(np.float64), t
        )
        assert shift == pytest.approx(2 * pi.sum(), abs=n * tol)


def test_kicks_search_the_penalised_weights_where_the_kicks_are_candidate_ones(monkeypatch):
    import rankopt
    from rankopt.solvers import ring

    def solve(m, on):
        monkeypatch.setattr(ring, "PENALISED_SEARCH", on)
        return rankopt.solve(m, method="ils", rng=0)

    # independent uniform weights (mixed kicks): a shorter ring on the penalised weights
    # (at n = 1,024 within 0.02% of LKH-3's on 12 seeds of 12, the raw weights' 0.05-0.3%
    # above it)
    for seed in (1, 2):
        m = _uniform(1024, seed, np.float32)
        raw, pen = solve(m, False), solve(m, True)
        assert _is_perm(pen.order, 1024)
        assert pen.cost < raw.cost * (1 - 3e-4)
        assert pen.cost == pytest.approx(ring_sum_reference(m.astype(np.float64), pen.order))
    # points in the plane (window kicks): the raw weights, the same ring
    pts = np.random.default_rng(0).random((300, 2))
    plane = np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1))
    assert np.array_equal(solve(plane, False).order, solve(plane, True).order)


def test_a_ring_as_short_as_the_one_tree_bound_ends_the_search():
    import rankopt

    # integer weights 0-5 with many zero links: a ring of zeros exists, the first local
    # search finds it, and it equals the 1-tree bound; the penalised search would only
    # reorder ties (at n = 513 its search on float32 sums never ended)
    for seed in (0, 1):
        m = np.round(5 * np.random.default_rng(seed).random((300, 300)))
        m = np.triu(m, 1)
        m = (m + m.T).astype(np.float32)
        r = rankopt.solve(m, rng=0)
        assert _is_perm(r.order, 300)
        assert r.cost == 0.0 and r.stop_reason == "optimal"


def test_the_ils_ring_visits_every_pod_in_one_piece(monkeypatch):
    """A synthetic cloud of 1,024 VMs in 4 pods whose default ILS ring (seed 0) visited
    one pod in two pieces far apart: 5 pod crossings where 4 suffice, 1.004x the best
    known ring. The exchanges at the ring's longest links after the kicks join it."""
    import rankopt
    import rankopt.solvers.ring as ring

    cloud = rankopt.synthetic_cloud(4, 8, 32, rng=1024)
    pod = np.asarray(cloud.groups[2])

    def crossings(order):
        seq = pod[np.asarray(order)]
        return int((seq != np.roll(seq, -1)).sum())

    res = rankopt.solve(cloud.latency, method="ils", rng=0)
    assert crossings(res.order) == 4
    monkeypatch.setattr(ring, "LONG_LINKS", 0)
    without = rankopt.solve(cloud.latency, method="ils", rng=0)
    assert crossings(without.order) == 5
    assert res.cost < without.cost * 0.998
