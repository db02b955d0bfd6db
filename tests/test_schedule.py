"""Schedules move the right data: symbolic execution of every algorithm."""

from collections import Counter

import numpy as np
import pytest

import rankopt
from rankopt import RankoptInputError
from rankopt.models._algorithms import ALGORITHM_SPECS, btree_parents
from rankopt.models.schedule import ALGORITHMS, chain_segments, schedule

PAIRS = [(c, a) for c, algs in ALGORITHMS.items() for a in algs]


def _initial(coll, n, layout):
    st = [{} for _ in range(n)]
    for r in range(n):
        if coll in ("allreduce", "reduce_scatter", "reduce"):
            for b in range(layout.nblocks):
                st[r][b] = Counter({r: 1})
        elif coll == "allgather":
            st[r][r] = Counter({r: 1})
        elif coll == "broadcast" and r == 0:
            for b in range(layout.nblocks):
                st[r][b] = Counter({0: 1})
        elif coll == "alltoall":
            for d in range(n):
                st[r][r * n + d] = Counter({r: 1})
    return st


def execute(s):
    """Run a schedule on symbolic data: each block holds the multiset of its contributors.

    A reduction adds the sender's multiset to the receiver's (so a
    contribution counted twice shows up), a copy replaces it. Every transfer
    must carry blocks the sender has, and its ``frac`` must equal their size.
    """
    st = _initial(s.collective, s.n, s.layout)
    for k in range(s.n_distinct):
        snap = [dict(x) for x in st]
        for e in range(s.step_ptr[k], s.step_ptr[k + 1]):
            x, y, blocks = int(s.src[e]), int(s.dst[e]), s.blocks[e]
            assert x != y
            assert s.frac[e] == pytest.approx(sum(s.layout.size(q) for q in blocks), abs=1e-12)
            for q in blocks:
                assert q in snap[x], f"rank {x} sends block {q} it does not have (step {k})"
                st[y][q] = (st[y].get(q, Counter()) + snap[x][q]) if s.reduce[k] else snap[x][q]
    return st


def check_result(s, st):
    n, c = s.n, s.collective
    everyone = Counter({r: 1 for r in range(n)})
    for r in range(n):
        if c == "allreduce":
            assert all(st[r].get(b) == everyone for b in range(s.layout.nblocks)), r
        elif c == "reduce_scatter":
            assert st[r].get(r) == everyone, r
        elif c == "allgather":
            assert all(st[r].get(b) == Counter({b: 1}) for b in range(n)), r
        elif c == "broadcast":
            assert all(st[r].get(b) == Counter({0: 1}) for b in range(s.layout.nblocks)), r
        elif c == "alltoall":
            assert all(st[r].get(x * n + r) == Counter({x: 1}) for x in range(n)), r
    if c == "reduce":
        assert st[0][0] == everyone


@pytest.mark.parametrize("collective,algorithm", PAIRS)
@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 12, 13, 16])
def test_every_rank_ends_with_its_blocks(collective, algorithm, n):
    kw = {"nbytes": 1000, "segment_size": 300} if algorithm == "chain" else {}
    s = schedule(collective, algorithm, n, blocks=True, **kw)
    check_result(s, execute(s))


@pytest.mark.parametrize(
    "groups",
    [
        [0, 0, 1, 1, 2, 2],
        [0, 1, 2, 0, 1, 2],
        [0, 0, 0, 1, 1, 2],
        [3, 1, 3, 1, 1, 3],
        [0] * 6,
        [0, 1, 2, 3, 4, 5],
    ],
)
def test_hierarchical_moves_the_right_data(groups):
    for inter in (None, "leaders"):
        s = schedule("allreduce", "hierarchical", 6, groups=groups, inter=inter, blocks=True)
        check_result(s, execute(s))


def test_hierarchical_rings_step_count():
    s = schedule("allreduce", "hierarchical", 12, groups=np.arange(12) // 4)
    assert s.n_steps == 2 * 3 + 2 * 2  # 2(s-1) intra + 2(m-1) inter


def test_compressed_equals_expanded():
    for c, a in PAIRS:
        kw = {"nbytes": 5000, "segment_size": 300} if a == "chain" else {}
        x = schedule(c, a, 9, **kw)
        y = schedule(c, a, 9, blocks=True, **kw)
        assert x.steps() == y.steps(), (c, a)
        assert x.n_steps == y.n_steps


def test_ring_is_one_step_repeated():
    s = schedule("allreduce", "ring", 1024)
    assert s.n_distinct == 2 and s.n_steps == 2046
    assert s.pattern() == [("shift", 1, 1 / 1024, 1023)] * 2


def test_open_mpi_rabenseifner_halves_at_distance_one_first():
    """Open MPI's redscat_allgather: the m/2 exchange is with rank XOR 1 (MPICH's at p/2)."""
    pat = schedule("allreduce", "rabenseifner_ompi", 8).pattern()
    assert [p[:3] for p in pat] == [
        ("xor", 1, 0.5),
        ("xor", 2, 0.25),
        ("xor", 4, 0.125),
        ("xor", 4, 0.125),
        ("xor", 2, 0.25),
        ("xor", 1, 0.5),
    ]
    # 5 ranks: ranks 0/1 swap halves, 1 returns its half to 0 and drops out, 0 sends back
    steps = schedule("allreduce", "rabenseifner_ompi", 5).steps()
    assert steps[0] == [(0, 1, 0.5), (1, 0, 0.5)] and steps[1] == [(1, 0, 0.5)]
    assert steps[2] == [(0, 2, 0.5), (2, 0, 0.5), (3, 4, 0.5), (4, 3, 0.5)]
    assert steps[-1] == [(0, 1, 1.0)]


def test_pattern_of_recursive_doubling():
    assert [p[:2] for p in schedule("allreduce", "rabenseifner", 8).pattern()] == [
        ("xor", 4),
        ("xor", 2),
        ("xor", 1),
        ("xor", 1),
        ("xor", 2),
        ("xor", 4),
    ]


@pytest.mark.parametrize("n", [2, 3, 5, 8, 11, 16])
def test_double_binary_tree_is_two_trees(n):
    for parent in btree_parents(n):
        assert (parent < 0).sum() == 1
        for v in range(n):  # every node reaches the root
            seen, u = 0, v
            while parent[u] >= 0:
                u = parent[u]
                seen += 1
                assert seen <= n


def test_chain_segments():
    k, fr = chain_segments(1000, 300)
    assert k == 4 and fr.tolist() == pytest.approx([0.3, 0.3, 0.3, 0.1])
    assert chain_segments(None, None)[0] == 1
    s = schedule("broadcast", "chain", 5, nbytes=3000, segment_size=100)
    assert s.n_steps == 5 - 2 + 30


def test_schedule_errors():
    with pytest.raises(RankoptInputError, match="`collective` must be one of"):
        schedule("gather", "ring", 4)
    with pytest.raises(RankoptInputError, match="`algorithm` must be one of 'ring'"):
        rankopt.schedule("reduce_scatter", "bruck", 4)
    with pytest.raises(RankoptInputError, match="`n` must be at least 2"):
        schedule("allreduce", "ring", 1)
    with pytest.raises(RankoptInputError, match="one label per rank"):
        schedule("allreduce", "hierarchical", 4, groups=[0, 1])
    with pytest.raises(RankoptInputError, match="equal size"):
        schedule("allreduce", "hierarchical", 4, groups=[0, 0, 0, 1], inter="rings")
    with pytest.raises(RankoptInputError, match="`inter` must be one of"):
        schedule("allreduce", "hierarchical", 4, inter="tree")


@pytest.mark.parametrize(
    "collective,algorithm", sorted(k for k, spec in ALGORITHM_SPECS.items() if spec.ring)
)
def test_ring_schedules_are_alike_steps_and_invariant_under_rotation(collective, algorithm):
    s = schedule(collective, algorithm, 7, nbytes=7e6)
    assert s.n_distinct == 1 or all(
        np.array_equal(s.src[s.step_ptr[k] : s.step_ptr[k + 1]], s.src[: s.step_ptr[1]])
        for k in range(s.n_distinct)
    )
    gen = np.random.default_rng(3)
    lat = gen.uniform(1e-6, 1e-4, (7, 7))
    rack = np.arange(7) % 3
    kw = {"bandwidth": gen.uniform(1e8, 1e9, (7, 7)), "nbytes": 7e6}
    kw |= {"groups": rack, "uplink_bandwidth": 1e8, "objective": "contention"}
    order = gen.permutation(7)
    base = rankopt.cost(lat, order, collective, algorithm, **kw)
    for k in range(1, 7):
        assert rankopt.cost(lat, np.roll(order, k), collective, algorithm, **kw) == pytest.approx(
            base, rel=1e-12
        )
