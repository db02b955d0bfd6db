"""Ring search details: the cached candidate weights and the repeated local-search passes."""

import numpy as np
from _rings import uniform as _uniform

import rankopt
from rankopt.solvers import _ring_search
from rankopt.solvers.ring import ALPHA_NEIGHBORS, LOCAL_PASS_GAIN, candidate_lists, greedy_ring


def test_candidate_weights_are_the_matrix_entries():
    w = _uniform(60, 0).astype(np.float32)
    nb = candidate_lists(w, ALPHA_NEIGHBORS, "alpha")
    cw = _ring_search._candidate_weights(w, nb)
    assert cw.dtype == np.float64
    assert np.array_equal(cw, np.take_along_axis(w, nb, 1).astype(np.float64))


def test_two_opt_passes_leave_no_large_gain():
    """After the default local search one more full pass gains at most the pass threshold."""
    w = _uniform(300, 1)
    r = rankopt.solve(w, method="two_opt", rng=0)
    tour = np.array(r.order, dtype=np.int64)
    nb = candidate_lists(w, 10, "nearest")
    gain = -_ring_search.local_search(w, tour, nb)[0]
    assert gain <= LOCAL_PASS_GAIN * r.cost + 1e-12


def test_passes_shorten_a_single_pass():
    w = _uniform(300, 2)
    nb = candidate_lists(w, 10, "nearest")
    tour = greedy_ring(w, nb)
    _ring_search.local_search(w, tour, nb)
    one_pass = w[tour, np.roll(tour, -1)].sum()
    r = rankopt.solve(w, method="two_opt", rng=0)
    assert r.cost <= one_pass + 1e-12
