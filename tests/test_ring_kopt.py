"""The Lin-Kernighan move built of sequential k-opt steps (``kopt`` of the ring kernels).

A step's validity is decided from the runs the removed links cut and is made by
flips: a wrong decision or a wrong flip shows as a ring whose length is not its
start plus the returned delta, or as no permutation at all.
"""

import numpy as np
import pytest
from _rings import is_perm as _is_perm
from _rings import uniform as _uniform

from rankopt.models.ring import ring_sum_reference
from rankopt.solvers import _ring_search as rs
from rankopt.solvers import ring


def _converge(m, tour, nb, **kw):
    """Local-search passes until one moves nothing; every pass checked. Returns the
    moves of all passes."""
    n = len(tour)
    length = ring_sum_reference(m.astype(np.float64), tour)
    total = 0
    for _ in range(200):
        d, _, moves, stop = rs.local_search(m, tour, nb, True, 0.0, 0, 0.0, **kw)
        assert stop == 0 and d <= 0 and _is_perm(tour, n)
        now = ring_sum_reference(m.astype(np.float64), tour)
        assert np.isclose(now, length + d, rtol=1e-6, atol=1e-9)
        length = now
        total += moves
        if moves == 0:
            return total
    raise AssertionError("local search did not converge")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("n", "seed"), [(12, 0), (13, 1), (17, 2), (40, 3), (150, 4), (333, 5)])
@pytest.mark.parametrize(("kopt", "steps"), [(5, 5), (5, 1), (4, 3)])
def test_kopt_local_search_gives_rings_whose_length_is_tracked(n, seed, dtype, kopt, steps):
    m = _uniform(n, seed, dtype)
    nb = rs.alpha_candidates(m, min(6, n - 1), 10)[0]
    for start in range(3):
        tour = np.random.default_rng(100 * seed + start).permutation(n).astype(np.int64)
        _converge(m, tour, nb, kopt=kopt, kopt_steps=steps)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_five_opt_steps_improve_a_local_optimum_of_three_opt_steps(seed):
    # on independent uniform weights the rings no chain of 3-opt steps improves are
    # improved by chains of 5-opt steps (moves whose every 3-opt prefix splits the
    # ring): more moves and a shorter ring (on 11 of 12 such instances tried, n = 300
    # and 1,000; these are three of them)
    n = 300
    m = _uniform(n, 10 + seed)
    nb = rs.alpha_candidates(m, 5, 10)[0]
    tour = np.random.default_rng(seed).permutation(n).astype(np.int64)
    _converge(m, tour, nb)
    three = ring_sum_reference(m, tour)
    assert _converge(m, tour, nb, kopt=5) > 0
    assert ring_sum_reference(m, tour) < three - 1e-9


def test_kopt_needs_twelve_processes_and_falls_back_below():
    # below 2 * 5 + 2 processes the 3-opt chain runs instead: still a local optimum
    m = _uniform(9, 4)
    nb = rs.alpha_candidates(m, 5, 10)[0]
    tour = np.random.default_rng(4).permutation(9).astype(np.int64)
    _converge(m, tour, nb, kopt=5)
    assert rs.local_search(m, tour.copy(), nb)[2] == 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("n", "seed"), [(9, 4), (14, 2), (150, 0), (333, 1)])
@pytest.mark.parametrize(("kick", "accept", "pass_every"), [(1, 0.5, 7), (2, 0.5, 0), (2, 0.0, 5)])
def test_kicks_with_kopt_repairs_track_cost_and_repeat(n, seed, dtype, kick, accept, pass_every):
    m = _uniform(n, seed, dtype)
    nb = rs.alpha_candidates(m, min(5, n - 1), 10)[0]
    runs = []
    for _ in range(2):
        tour = np.random.default_rng(seed).permutation(n).astype(np.int64)
        rs.local_search(m, tour, nb)
        start = ring_sum_reference(m.astype(np.float64), tour)
        d, _, _, done, stop = rs.iterated_local_search(
            m, tour, nb, seed, 80, 0.0, 150, None, 0, 0.0, kick, accept, 0.3, pass_every,
            1, 1, 5, 5,
        )  # fmt: skip
        assert (done, stop) == (80, 2) and _is_perm(tour, n) and d <= 0
        assert np.isclose(ring_sum_reference(m.astype(np.float64), tour), start + d, rtol=1e-5)
        runs.append(tour)
    assert np.array_equal(*runs)


def test_kick_move_is_five_opt_for_candidate_and_mixed_kicks_only():
    assert ring.kick_move(0) == 0
    assert ring.kick_move(1) == ring.kick_move(2) == ring.KOPT_MOVE == 5


def _flipped(tour, flips):
    """The array after ``reverse_path`` of each (i, j), in NumPy: ring positions i .. j
    reversed, or their complement when that is shorter."""
    t = tour.copy()
    n = len(t)
    for i, j in flips:
        length = (j - i) % n + 1
        if 2 * length > n:
            i, length = (j + 1) % n, n - length
        idx = (i + np.arange(length)) % n
        t[idx] = t[idx[::-1]]
    return t


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13, 64, 127, 128, 129, 1000, 5000])
def test_virtual_tour_answers_as_the_flipped_array(n):
    # random reversals of ring positions (wrapping ones, ones longer than half the ring
    # whose complement is reversed, single positions, the whole ring), each made on the
    # array and on the virtual tour: position, successor, predecessor and process at
    # each position agree after every one, also after starting again; the virtual
    # ring at the end is the one NumPy makes
    rng = np.random.default_rng(n)
    for reset_every in (0, 5, 16):
        tour = rng.permutation(n).astype(np.int64)
        flips = rng.integers(0, n, size=(64, 2)).astype(np.int64)
        flips[::9, 1] = (flips[::9, 0] - 1) % n  # the whole ring
        flips[::7, 1] = flips[::7, 0]  # one position
        bad, most, ring = rs.vtour_mismatches(tour, flips, reset_every)
        assert bad == 0
        assert most > 1 or n <= 3
        last = flips[(len(flips) - 1) // reset_every * reset_every :] if reset_every else flips
        assert np.array_equal(ring, _flipped(tour, last))


@pytest.mark.parametrize(("n", "seed"), [(12, 0), (13, 1), (40, 2), (301, 3), (700, 4)])
@pytest.mark.parametrize("kick", [1, 2])
def test_chains_on_the_virtual_tour_make_the_same_rings(n, seed, kick):
    # a chain's moves made on the virtual tour (virtual_n 0) or on the array (a huge
    # virtual_n): the same local optimum, the same kicks kept, the same counts
    m = _uniform(n, seed)
    nb = rs.alpha_candidates(m, 5, 10)[0]
    start = np.random.default_rng(seed).permutation(n).astype(np.int64)
    out = []
    for virtual_n in (0, 10**9):
        tour = start.copy()
        r1 = rs.local_search(m, tour, nb, True, 0.0, 0, 0.0, 1, 1, 5, 5, virtual_n)
        r2 = rs.iterated_local_search(
            m, tour, nb, seed, 120, 0.0, 50, None, 0, 0.0, kick, 0.5, 0.3, 7, 1, 1, 5, 5,
            virtual_n,
        )  # fmt: skip
        assert _is_perm(tour, n)
        out.append((tour.tolist(), r1, r2))
    assert out[0] == out[1]


def test_the_virtual_tour_is_used_on_large_rings_and_tracks_the_length():
    # above KOPT_VIRTUAL_N by default: a ring whose length is the start plus the delta
    n = rs.KOPT_VIRTUAL_N + 40
    m = _uniform(n, 7, np.float32)
    nb = rs.knn_lists(m, 8)
    tour = np.random.default_rng(7).permutation(n).astype(np.int64)
    rs.local_search(m, tour, nb, True, 0.0, 0, 0.0, 1, 1, 5, 5)
    start = ring_sum_reference(m.astype(np.float64), tour)
    d, _, _, done, _ = rs.iterated_local_search(
        m, tour, nb, 1, 60, 0.0, 50, None, 0, 0.0, 1, 0.5, 0.3, 0, 1, 1, 5, 5
    )
    assert done == 60 and _is_perm(tour, n) and d < 0
    assert np.isclose(ring_sum_reference(m.astype(np.float64), tour), start + d, rtol=1e-5)
