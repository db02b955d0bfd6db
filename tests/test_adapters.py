"""Adapters without processes: writers, launcher environment, NCCL prediction, launcher plumbing."""

from __future__ import annotations

import argparse
import json
import os
import stat

import numpy as np
import pytest
from _launcher_env import detected, world_env

from rankopt._validation import RankoptInputError
from rankopt.adapters import (
    format_hostfile,
    format_rankfile,
    launch_options,
    node_ranks,
    rank_hosts,
    write_deepspeed_hostfile,
    write_hostfile,
    write_rankfile,
    write_slurm_hostfile,
)
from rankopt.adapters._common import atomic_write_text, load_order, node_index, save_order
from rankopt.adapters._env import detect, first_slurm_host
from rankopt.adapters._launch import (
    LaunchDecision,
    LaunchOptions,
    _solve,
    add_arguments,
    child_env,
)
from rankopt.adapters.nccl import (
    btree,
    dtree,
    expand_node_order,
    is_node_contiguous,
    node_matrix,
    node_traffic,
    predict,
    solve_nodes,
)
from rankopt.cli._mpi_main import split_argv


class _Meas:
    def __init__(self, hosts, latency=None, bandwidth=None):
        self.hosts = tuple(hosts)
        self.latency = latency
        self.bandwidth = bandwidth


# ---------------------------------------------------------------------------------- writers
def test_rankfile_lines_follow_the_order():
    hosts = ["a", "a", "b", "b"]
    assert format_rankfile([2, 0, 3, 1], hosts, comment=False).splitlines() == [
        "rank 0=b",
        "rank 1=a",
        "rank 2=b",
        "rank 3=a",
    ]  # no slot unless it is a real binding
    text = format_rankfile([2, 0, 3, 1], hosts, slots="original", comment=False)
    # new rank k runs where original rank order[k] ran, on that process's original slot
    assert text.splitlines() == [
        "rank 0=b slot=0",
        "rank 1=a slot=0",
        "rank 2=b slot=1",
        "rank 3=a slot=1",
    ]
    new = format_rankfile([2, 0, 3, 1], hosts, slots="new", comment=False)
    assert new.splitlines()[2] == "rank 2=b slot=1"
    explicit = format_rankfile([1, 0], ["h", "h"], slots=["0-1", 3], comment=False)
    assert explicit.splitlines() == ["rank 0=h slot=3", "rank 1=h slot=0-1"]
    assert format_rankfile([0, 1], _Meas(["x", "y"])).startswith("# rank order for 2")


@pytest.mark.parametrize(
    ("order", "hosts", "kw", "match"),
    [
        ([0, 0], ["a", "b"], {}, "permutation"),
        ([0, 1, 2], ["a", "b"], {}, "one entry per process"),
        ([0, 1], ["a", "b c"], {}, r"hosts\[1\] is 'b c'"),
        ([0, 1], ["a", "x=y"], {}, r"hosts\[1\] is .x=y., expected an RFC 1123 host name"),
        ([0, 1], "ab", {}, "sequence of host names"),
        ([0, 1], _Meas(["a"]), {}, "one entry per process"),
        ([0, 1], ["a", "b"], {"slots": "core"}, "'original', 'new'"),
        ([0, 1], ["a", "b"], {"slots": [0]}, "one entry per process"),
        ([0, 1], ["a", "b"], {"slots": [0, "1 2"]}, r"slots\[1\]"),
    ],
)
def test_rankfile_errors(order, hosts, kw, match):
    with pytest.raises(RankoptInputError, match=match):
        format_rankfile(order, hosts, **kw)


def test_hostfiles(tmp_path):
    hosts = ["n1", "n2", "n3"]
    assert rank_hosts([2, 0, 1], hosts) == ["n3", "n1", "n2"]
    assert format_hostfile([2, 0, 1], hosts) == "n3\nn1\nn2\n"
    p = write_hostfile(tmp_path / "hf", [1, 2, 0], hosts)
    lines = p.read_text().splitlines()
    assert lines[0].startswith("#") and lines[1:] == ["n2", "n3", "n1"]
    s = write_slurm_hostfile(tmp_path / "slurm", [1, 2, 0], _Meas(hosts))
    assert s.read_text() == "n2\nn3\nn1\n"  # no comments for Slurm


def test_deepspeed_hostfile_and_node_ranks(tmp_path):
    hosts = ["a", "b", "a", "b", "c", "c"]
    order = [4, 5, 1, 3, 0, 2]  # c, b, a
    assert node_ranks(order, hosts) == {"c": 0, "b": 1, "a": 2}
    p = write_deepspeed_hostfile(tmp_path / "hf", order, hosts)
    assert p.read_text() == "c slots=2\nb slots=2\na slots=2\n"
    with pytest.raises(RankoptInputError, match="host 'a' reappears at new rank 2"):
        node_ranks(range(6), hosts)


def test_writes_are_atomic_and_clean(tmp_path):
    target = tmp_path / "rankfile"
    target.write_text("old\n")
    write_rankfile(target, [1, 0], ["a", "b"], comment=False)
    assert target.read_text() == "rank 0=b\nrank 1=a\n"
    assert sorted(os.listdir(tmp_path)) == ["rankfile"]  # no temporary left behind
    mode = stat.S_IMODE(target.stat().st_mode)
    assert mode & 0o044  # readable by others (umask applied), not mkstemp's 0600
    with pytest.raises(RankoptInputError, match="permutation"):
        write_rankfile(target, [1, 1], ["a", "b"])
    assert target.read_text().startswith("rank 0=b")  # failed write left the file untouched
    with pytest.raises(RankoptInputError, match="does not exist"):
        write_rankfile(tmp_path / "missing" / "rf", [0, 1], ["a", "b"])
    with pytest.raises(RankoptInputError, match="is a directory"):
        atomic_write_text(tmp_path, "x")


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_writers_refuse_what_is_not_a_regular_file(tmp_path, kind):
    """A FIFO, a planted link or a folder at the target is refused and left as it was."""
    target = tmp_path / "target"
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        target.symlink_to(victim)
    else:
        target.mkdir()
    order, hosts = [1, 0], ["a", "b"]
    writers = {
        "--rankfile": lambda: write_rankfile(target, order, hosts, what="--rankfile"),
        "hostfile": lambda: write_hostfile(target, order, hosts),
        "Slurm hostfile": lambda: write_slurm_hostfile(target, order, hosts),
        "DeepSpeed hostfile": lambda: write_deepspeed_hostfile(target, order, hosts),
        "--order-out": lambda: save_order(target, order, what="--order-out"),
    }
    said = {"fifo": "a FIFO, not a regular file", "directory": "a directory, not a regular file"}
    for what, write in writers.items():
        expected = said.get(kind, "a symbolic link; rankopt does not write through links")
        with pytest.raises(RankoptInputError, match=rf"^{what} '{target}' is {expected}"):
            write()
    assert os.path.islink(target) == (kind == "symlink") and victim.read_text() == "keep\n"
    assert stat.S_ISFIFO(os.lstat(target).st_mode) == (kind == "fifo")
    assert sorted(os.listdir(tmp_path)) == ["target", "victim"]  # no temporary left behind


def test_order_file_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "order.txt"
    os.mkfifo(fifo)
    with pytest.raises(RankoptInputError, match=r"order file '.*order\.txt' is a FIFO"):
        load_order(fifo)


def test_launch_options():
    assert launch_options("f") == ["--map-by", "rankfile:file=f"]
    assert launch_options("f", openmpi=4) == ["--rankfile", "f"]
    assert launch_options("f", "hostfile") == ["--hostfile", "f", "--map-by", "seq"]
    assert launch_options("f", "slurm") == ["--distribution=arbitrary"]
    with pytest.raises(RankoptInputError, match="`kind` must be"):
        launch_options("f", "pbs")
    with pytest.raises(RankoptInputError, match="`openmpi` must be 4 or 5"):
        launch_options("f", openmpi=3)


@pytest.mark.parametrize("suffix", [".npy", ".json", ".txt"])
def test_order_files_round_trip(tmp_path, suffix):
    path = save_order(tmp_path / f"order{suffix}", [3, 0, 2, 1])
    np.testing.assert_array_equal(load_order(path), [3, 0, 2, 1])


def test_order_file_errors(tmp_path):
    with pytest.raises(RankoptInputError, match="does not exist"):
        load_order(tmp_path / "nope.txt")
    (tmp_path / "bad.json").write_text('{"perm": [0]}')
    with pytest.raises(RankoptInputError, match="no 'order' key"):
        load_order(tmp_path / "bad.json")
    (tmp_path / "bad.txt").write_text("0 1\n2 x\n")
    with pytest.raises(RankoptInputError, match=r"bad.txt', line 2: 'x' is not a whole number"):
        load_order(tmp_path / "bad.txt")
    (tmp_path / "empty.txt").write_text("# nothing yet\n\n")
    with pytest.raises(RankoptInputError, match="holds no order"):
        load_order(tmp_path / "empty.txt")
    (tmp_path / "half.txt").write_text("0 1.5\n")
    with pytest.raises(RankoptInputError, match="'1.5' is not a whole number"):
        load_order(tmp_path / "half.txt")
    # as a JSON order may: whole numbers written as floats, commas, a byte-order mark
    (tmp_path / "ok.txt").write_bytes("\ufeff# from a spreadsheet\n2, 0.0\n1 3e0\n".encode())
    assert load_order(tmp_path / "ok.txt").tolist() == [2, 0, 1, 3]
    (tmp_path / "dup.txt").write_text("0 0\n")
    with pytest.raises(RankoptInputError, match="permutation"):
        load_order(tmp_path / "dup.txt")


def test_node_index():
    assert node_index(["b", "a", "b", "c"]).tolist() == [0, 1, 0, 2]


# ---------------------------------------------------------------------- launcher environment
def test_detect_torchrun():
    env = {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "h0",
        "MASTER_PORT": "29400",
        "TORCHELASTIC_RUN_ID": "job",
        "TORCHELASTIC_RESTART_COUNT": "2",
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "OMPI_COMM_WORLD_RANK": "0",
    }
    e = detected(env, rank=5, world_size=8, local_rank=1, master_addr="h0", master_port=29400)
    assert e.launcher == "torchrun" and e.agent_store and e.job_id == "job.2"
    e2 = detect(env, master_addr="x", master_port=1234)
    assert (e2.master_addr, e2.master_port) == ("x", 1234)


def test_detect_mpi_and_slurm():
    ompi = {**world_env("OMPI", 2, 8, 2, 4), "MASTER_ADDR": "n0"}
    e = detected(ompi, rank=2, world_size=8, local_rank=2, launcher="openmpi", master_port=29500)
    assert not e.agent_store
    mpich = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    assert detect(mpich).master_addr == "127.0.0.1"
    slurm = {
        "SLURM_PROCID": "3",
        "SLURM_NTASKS": "4",
        "SLURM_LOCALID": "1",
        "SLURM_JOB_NODELIST": "gpu[07-08]",
        "SLURM_NNODES": "2",
        "MASTER_PORT": "1",
    }
    detected(slurm, rank=3, master_addr="gpu07", master_port=1, launcher="slurm")


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({}, "no launcher found"),
        ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK must be an integer; got 'x'"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "rank 2 of world size 2"),
        (
            {
                "OMPI_COMM_WORLD_RANK": "0",
                "OMPI_COMM_WORLD_SIZE": "4",
                "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            },
            "MASTER_ADDR is not set",
        ),
        (
            {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "70000"},
            "MASTER_PORT must be in 1..65535",
        ),
    ],
)
def test_detect_errors(env, match):
    with pytest.raises(RankoptInputError, match=match):
        detect(env)


def test_first_slurm_host():
    assert first_slurm_host("a[1-3],b") == "a1"
    assert first_slurm_host("solo") == "solo"
    with pytest.raises(RankoptInputError, match="Slurm node list"):
        first_slurm_host("[1-2]")


# ---------------------------------------------------------------------------- NCCL trees
def _tree_edges(n: int, which: int) -> set[tuple[int, int]]:
    """(parent, child) pairs from the children side; checked against the parent side."""
    down, up = set(), set()
    for x in range(n):
        parent, children = dtree(n, x)[which]
        if parent != -1:
            up.add((parent, x))
        down |= {(x, c) for c in children}
    assert down == up, (n, which)
    return up


def test_btree_matches_nccl_drawing_14():
    # the tree drawn in NCCL's trees.cc for 14 ranks
    expected = {
        (0, 8),
        (8, 4),
        (8, 12),
        (4, 2),
        (4, 6),
        (12, 10),
        (12, 13),
        (2, 1),
        (2, 3),
        (6, 5),
        (6, 7),
        (10, 9),
        (10, 11),
    }
    assert _tree_edges(14, 0) == expected


def test_dtree_mirror_12_and_shift_13():
    # even n: tree 1 is the mirror image x -> n-1-x, rooted at 11 (NCCL's drawing for 12)
    t0 = _tree_edges(12, 0)
    assert (0, 8) in t0 and (8, 10) in t0 and (10, 11) in t0
    assert _tree_edges(12, 1) == {(11 - a, 11 - b) for a, b in t0}
    assert dtree(12, 11)[1][0] == -1 and dtree(12, 3)[1][0] == 11
    # odd n: tree 1 is shifted by one, rooted at 1 (NCCL's drawing for 13)
    t0 = _tree_edges(13, 0)
    assert (12, 10) in t0 and not any(p == 12 and c == 13 for p, c in t0)
    assert _tree_edges(13, 1) == {((a + 1) % 13, (b + 1) % 13) for a, b in t0}
    assert {c for p, c in _tree_edges(13, 1) if p == 9} == {5, 0}


@pytest.mark.parametrize("n", range(1, 70))
def test_dtree_is_two_spanning_trees(n):
    for which, root in ((0, 0), (1, (1 if n % 2 and n > 1 else n - 1))):
        edges = _tree_edges(n, which)
        assert len(edges) == n - 1
        children = {c for _, c in edges}
        assert children == set(range(n)) - {root}
        assert all(sum(p == x for p, _ in edges) <= 2 for x in range(n))
    if n % 2 == 0:  # mirror: no node is a leaf in both trees
        leaves = [{x for x in range(n) if not dtree(n, x)[w][1]} for w in (0, 1)]
        assert not leaves[0] & leaves[1]


def test_btree_errors():
    with pytest.raises(RankoptInputError, match="`node` must be in 0..3"):
        btree(4, 4)
    with pytest.raises(RankoptInputError, match="`n` must be >= 1"):
        btree(0, 0)


def test_predict_ring_and_trees():
    hosts = ["a", "b", "a", "b", "c", "c", "d", "d"]
    p = predict([6, 7, 0, 2, 1, 3, 4, 5], hosts)
    assert p.nodes == ("d", "a", "b", "c")  # numbered by lowest new rank
    assert p.node_ranks == ((0, 1), (2, 3), (4, 5), (6, 7)) and p.contiguous
    assert p.ring == ((0, 1), (1, 2), (2, 3), (3, 0))
    assert p.host_pairs(p.ring) == [("d", "a"), ("a", "b"), ("b", "c"), ("c", "d")]
    # 4 nodes: tree 0 is 0 -> 2 -> {1, 3}; tree 1 its mirror 3 -> 1 -> {2, 0}
    assert p.trees == (((0, 2), (2, 1), (2, 3)), ((1, 0), (1, 2), (3, 1)))
    launch = predict(range(8), hosts)
    assert launch.nodes == ("a", "b", "c", "d") and not launch.contiguous
    assert launch.node_ranks[0] == (0, 2)
    assert predict([0, 1], ["x", "x"]).ring == ()
    assert is_node_contiguous([0, 2, 1, 3], ["a", "b", "a", "b"])


def test_node_matrix_and_expand():
    lat = np.array([[0, 1, 4, 6], [1, 0, 5, np.nan], [4, 5, 0, 1], [6, 7, 1, 0]], float)
    m, nodes = node_matrix(lat, ["x", "x", "y", "y"])
    assert nodes == ("x", "y") and m[0, 1] == 5.0 and m[1, 0] == 5.5  # NaN ignored
    assert node_matrix(lat, ["x", "x", "y", "y"], reduce="min")[0][1, 0] == 4.0
    with pytest.raises(RankoptInputError, match="`reduce` must be one of"):
        node_matrix(lat, ["x", "x", "y", "y"], reduce="p99")
    with pytest.raises(RankoptInputError, match="no measured pair"):
        node_matrix(np.full((2, 2), np.nan), ["x", "y"])
    assert expand_node_order([1, 0], ["a", "b", "a", "b"]).tolist() == [1, 3, 0, 2]
    with pytest.raises(RankoptInputError, match="node_order"):
        expand_node_order([0, 0], ["a", "b"])


def test_solve_nodes_orders_whole_nodes():
    # 4 nodes, 2 ranks each, interleaved at launch; cheap node ring a-c-b-d
    hosts = ["a", "b", "c", "d", "a", "b", "c", "d"]
    node_lat = np.full((4, 4), 1e-3)
    for x, y in [(0, 2), (2, 1), (1, 3), (3, 0)]:
        node_lat[x, y] = node_lat[y, x] = 1e-5
    np.fill_diagonal(node_lat, 0)
    node_of = node_index(hosts)
    lat = node_lat[np.ix_(node_of, node_of)] + 1e-7
    np.fill_diagonal(lat, 0)
    order, res = solve_nodes(_Meas(hosts, lat), rng=0)
    assert order[0] == 0 and is_node_contiguous(order, hosts)
    visit = predict(order, hosts).nodes
    assert visit in (("a", "c", "b", "d"), ("a", "d", "b", "c"))
    assert res is not None and res.order[0] == 0
    two, none = solve_nodes(
        lat[:4, :4][np.ix_([0, 1, 0, 1], [0, 1, 0, 1])] + 1e-6, ["a", "b", "a", "b"]
    )
    assert none is None and two.tolist() == [0, 2, 1, 3]


def _pipeline(n, nbytes=8e6):
    """Rank k sends to k + 1 and back: a pipeline of ``n`` stages."""
    from rankopt.models.traffic import Traffic

    k = np.arange(n - 1)
    return Traffic.from_pairs(n, np.r_[k, k + 1], np.r_[k + 1, k], [nbytes] * (2 * n - 2))


def test_node_traffic_is_between_the_blocks_of_ranks_each_node_receives():
    hosts = ["a", "b", "c", "a", "b", "c"]  # 3 nodes, 2 ranks each, interleaved
    blocks = node_traffic(_pipeline(6), hosts)
    # ranks 0-1, 2-3 and 4-5 form the blocks; 0<->1, 2<->3, 4<->5 stay inside a node
    assert blocks.n == 3 and blocks.bytes.toarray().tolist() == [
        [0.0, 8e6, 0.0], [8e6, 0.0, 8e6], [0.0, 8e6, 0.0]
    ]  # fmt: skip
    with pytest.raises(RankoptInputError, match=r"same number of ranks on every node; got 1 to 2"):
        node_traffic(_pipeline(5), ["a", "b", "c", "a", "b"])
    with pytest.raises(RankoptInputError, match="traffic"):
        node_traffic(_pipeline(4), hosts)  # traffic of 4 ranks, 6 hosts


def test_solve_nodes_places_the_pipeline_stages_of_each_rack_together():
    # 6 nodes of 2 ranks in 2 racks (nodes a, c, e and b, d, f), launched interleaved
    hosts = [h for _ in range(2) for h in "abcdef"]
    rack = np.array([0, 1, 0, 1, 0, 1])
    node_lat = np.where(rack[:, None] == rack[None, :], 1e-5, 1e-4)
    node_bw = np.where(rack[:, None] == rack[None, :], 1e10, 1e9)
    node_of = node_index(hosts)
    lat = node_lat[np.ix_(node_of, node_of)]
    bw = node_bw[np.ix_(node_of, node_of)]
    t = _pipeline(12)
    order, res = solve_nodes(_Meas(hosts, lat, bw), traffic=t, rng=0)
    assert res is not None and res.model_spec.traffic is not None
    assert order[0] == 0 and is_node_contiguous(order, hosts)
    # the pipeline crosses between the racks once: stages 0-5 in one, 6-11 in the other
    rack_of_stage = rack[node_of[order]]
    assert np.count_nonzero(np.diff(rack_of_stage)) == 1
    launch = np.count_nonzero(np.diff(rack[node_of]))
    assert launch == 11 and res.speedup > 1.5


# ------------------------------------------------------------------------ launcher plumbing
def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def _options(*argv: str) -> LaunchOptions:
    return LaunchOptions.from_args(_args(*argv))


def test_launcher_arguments():
    a = _args("--backend", "nccl", "--seed", "3", "--", "python", "t.py", "--seed", "4")
    assert a.backend == "nccl" and a.seed == 3
    assert a.program == ["--", "python", "t.py", "--seed", "4"]
    with pytest.raises(SystemExit):
        _args("--order", "a", "--latency", "b")


def test_launch_options_default_to_the_command_line_defaults():
    import dataclasses

    p = argparse.ArgumentParser(prog="rankopt run")
    add_arguments(p)
    parsed = LaunchOptions.from_args(p.parse_args([]))
    assert dataclasses.replace(parsed, solve=None) == LaunchOptions()
    # with no flags the backend's engine prices every call, from the command line or not
    assert parsed.solve["engine"] == "gloo"
    nccl = LaunchOptions.from_args(p.parse_args(["--backend", "nccl"]))
    assert nccl.solve["engine"] == "nccl" and nccl.backend == "nccl"


def test_launcher_solve_on_rank0(tmp_path):
    hosts = ("h",) * 4
    save_order(tmp_path / "o.txt", [0, 3, 1, 2])
    order, summary, _, _ = _solve(_options("--order", str(tmp_path / "o.txt")), 4, hosts, None)
    assert order.tolist() == [0, 3, 1, 2] and "o.txt" in summary
    # an order file bound to other hosts is refused
    from rankopt import Network

    net = Network.from_matrices(np.full((4, 4), 1e-5), hosts=("a", "b", "c", "d"))
    save_order(tmp_path / "bound.json", [0, 3, 1, 2], network=net)
    with pytest.raises(RankoptInputError, match="moved"):
        _solve(_options("--order", str(tmp_path / "bound.json")), 4, hosts, None)
    save_order(tmp_path / "bad.txt", [1, 0, 2, 3])
    with pytest.raises(RankoptInputError, match="keep rank 0 first"):
        _solve(_options("--order", str(tmp_path / "bad.txt")), 4, hosts, None)
    lat = np.full((5, 5), 1e-3)
    for x, y in [(0, 3), (3, 1), (1, 4), (4, 2), (2, 0)]:
        lat[x, y] = lat[y, x] = 1e-6
    np.fill_diagonal(lat, 0)
    np.save(tmp_path / "lat.npy", lat)
    order, _, network, result = _solve(
        _options("--latency", str(tmp_path / "lat.npy"), "--seed", "0"), 5, ("h",) * 5, None
    )
    assert network.n == 5 and result.order.tolist() == order.tolist()
    assert order.tolist() in ([0, 3, 1, 4, 2], [0, 2, 4, 1, 3])
    nodes = ("a", "b", "a", "b", "c")
    order, summary, _, _ = _solve(
        _options("--latency", str(tmp_path / "lat.npy"), "--backend", "nccl"), 5, nodes, None
    )
    assert order[0] == 0 and is_node_contiguous(order, nodes) and "3 nodes" in summary


def test_launcher_nccl_prices_a_profiled_pipeline_between_nodes(tmp_path, monkeypatch):
    """``rankopt run --backend nccl --workload profile.json``: node order by the traffic."""
    monkeypatch.delenv("RANKOPT_WORKLOAD", raising=False)
    hosts = tuple(h for _ in range(2) for h in "abcdef")
    rack = np.array([0, 1, 0, 1, 0, 1])[node_index(hosts)]
    lat = np.where(rack[:, None] == rack[None, :], 1e-5, 1e-4)
    np.save(tmp_path / "lat.npy", lat)
    prof = tmp_path / "profile.json"
    body = {
        "rankopt_profile": 1,
        "engine": "nccl",
        "workload": [],
        "traffic": _pipeline(12).to_dict(),
    }
    prof.write_text(json.dumps(body))
    opts = _options(
        "--latency", str(tmp_path / "lat.npy"), "--backend", "nccl", "--workload", str(prof)
    )
    order, summary, _, result = _solve(opts, 12, hosts, None)
    assert "6 nodes" in summary and is_node_contiguous(order, hosts)
    assert np.count_nonzero(np.diff(rack[order])) == 1  # the pipeline crosses once
    assert result.model_spec.traffic.n == 6


def test_child_env_renumbers_rank_only():
    env = {
        "RANK": "3",
        "ROLE_RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "h",
        "MASTER_PORT": "9",
        "CUDA_VISIBLE_DEVICES": "1",
    }
    d = LaunchDecision(3, 1, np.array([0, 3, 1, 2]), ("h",) * 4, "")
    out = child_env(env, detect(env), d)
    assert out["RANK"] == "1" and out["ROLE_RANK"] == "1" and out["RANKOPT_LAUNCH_RANK"] == "3"
    assert out["LOCAL_RANK"] == "1" and out["CUDA_VISIBLE_DEVICES"] == "1"
    ompi = world_env("OMPI", 2, 4, 2, 4)
    out = child_env(
        ompi, detect(ompi), LaunchDecision(2, 3, np.array([0, 1, 3, 2]), ("h",) * 4, "")
    )
    assert (
        out["RANK"],
        out["WORLD_SIZE"],
        out["LOCAL_RANK"],
        out["MASTER_ADDR"],
        out["MASTER_PORT"],
    ) == ("3", "4", "2", "127.0.0.1", "29500")
    assert out["OMPI_COMM_WORLD_RANK"] == "2"  # launcher variables keep the launch numbering


def test_mpi_runner_argv_split():
    assert split_argv(["--order", "f", "prog.py", "-v"]) == (["--order", "f"], ["prog.py", "-v"])
    assert split_argv(["--seed=3", "-c", "print(1)"]) == (["--seed=3"], ["-c", "print(1)"])
    assert split_argv(["-v", "--", "--weird.py"]) == (["-v"], ["--weird.py"])
    assert split_argv(["-v"]) == (["-v"], [])


def test_writers_and_nodes_take_a_measurement(tmp_path):
    from rankopt import Measurement

    hosts = ("a", "b", "a", "b", "c", "c")
    node_lat = np.array([[0, 9, 1], [9, 0, 1], [1, 1, 0]], float) * 1e-4
    node_of = node_index(hosts)
    lat = node_lat[np.ix_(node_of, node_of)] + 1e-6
    np.fill_diagonal(lat, 0)
    m = Measurement(latency=lat, bandwidth=None, hosts=hosts)
    order, res = solve_nodes(m, rng=0)
    assert res is not None and order[0] == 0 and is_node_contiguous(order, m)
    text = write_rankfile(tmp_path / "rf", order, m, comment=False).read_text()
    assert text.splitlines()[0] == "rank 0=a"
    assert rank_hosts(order, m)[:2] == ["a", "a"]
    assert list(node_ranks(order, m)) == [h for h in predict(order, m).nodes]


def test_rank0_decision_is_published_for_every_outcome(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    import json

    from rankopt.adapters._launch import _decide

    def store(n, failed=()):
        s = dist.HashStore()
        for r in range(n):
            s.set(f"host/{r}", f"h{r % 2}")
        s.add("probed", n)
        for r, msg in failed:
            s.set(f"failed/{r}", msg)
        return s

    save_order(tmp_path / "o.txt", [0, 2, 1, 3])
    ok = _decide(_options("--order", str(tmp_path / "o.txt")), store(4), 4, None, 0.0)
    assert ok["order"] == [0, 2, 1, 3] and ok["hosts"] == ["h0", "h1", "h0", "h1"]
    assert "error" not in ok and json.loads(json.dumps(ok)) == ok
    assert ok["trial"] is None  # a given order is applied as given: nothing to time
    bad = _decide(_options(), store(4, [(2, "ProbeTimeoutError: rank 3 silent")]), 4, None, 0.0)
    assert bad["order"] == [0, 1, 2, 3]
    assert (
        bad["error"] == "probe failed on 1 rank(s), first rank 2: ProbeTimeoutError: rank 3 silent"
    )
    late = dist.HashStore()
    late.add("probed", 3)
    out = _decide(_options(), late, 4, None, 0.0)
    assert (
        out["error"] == "only 3 of 4 ranks finished the probe in time" and out["hosts"] == ["?"] * 4
    )


def test_wait_listening_tries_a_refused_port_until_the_deadline_and_stops_at_a_listener():
    import socket
    import time

    from rankopt.adapters._launch import _wait_listening

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: every connection is refused
        t0 = time.monotonic()
        _wait_listening("127.0.0.1", port, t0 + 0.3)
        assert time.monotonic() - t0 >= 0.29  # kept trying, then gave up at the deadline
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        s.settimeout(5)
        _wait_listening("127.0.0.1", s.getsockname()[1], time.monotonic() + 60)
        conn, _ = s.accept()  # it connected once and returned
        conn.close()
