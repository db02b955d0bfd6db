"""Topology from providers and schedulers, read from samples in their documented formats."""

from pathlib import Path

import numpy as np
import pytest

import rankopt
from rankopt import RankoptInputError
from rankopt.probe.topology_sources import (
    apply_topology,
    compare_with_bandwidth,
    expand_hostlist,
    from_kubernetes,
    from_slurm_conf,
    read_topology,
)

DATA = Path(__file__).parent / "data" / "topology"
TUX = [f"tux0{i}" for i in range(8)]
RACKS = [0, 0, 1, 1, 2, 2, 3, 3]
PODS = [0, 0, 0, 0, 1, 1, 1, 1]


def _levels(labels, hosts):
    return [g.tolist() for g in labels.groups(hosts)]


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("topology.conf", "slurm-tree"),
        ("scontrol_topology.txt", "slurm-tree"),
        ("slurm_addr.txt", "slurm-addr"),
        ("hosts.txt", "text"),
    ],
)
def test_two_level_sources_give_racks_and_pods(name, source):
    t = read_topology(DATA / name)
    assert t.source == source
    assert _levels(t, TUX) == [list(range(8)), RACKS, PODS]


def test_slurm_yaml_uses_the_default_topology_blocks_and_aggregates():
    t = read_topology(DATA / "topology.yaml")
    assert t.source == "slurm-block" and t.levels == ("block", "4-node block")
    assert t.labels["tux05"][0] == "b3"
    assert _levels(t, TUX) == [list(range(8)), RACKS, PODS]


def test_slurm_yaml_tree():
    text = (DATA / "topology.yaml").read_text().replace("cluster_default: true", "")
    from rankopt.probe.topology_sources import from_slurm_yaml

    t = from_slurm_yaml(text.replace("- topology: nvl", "- topology: nvl\n  x: 1", 1))
    # no default: the first topology (block); the tree on its own
    tree = from_slurm_yaml(text.split("- topology: fabric", 1)[1].join(["- topology: f", ""]))
    assert t.source == "slurm-block"
    assert tree.source == "slurm-tree" and tree.labels["tux06"] == ("s3", "p1", "core")


def test_aws_instance_topology_bottom_layer_first_and_aliases():
    t = read_topology(DATA / "aws_describe_instance_topology.json")
    assert t.source == "aws" and t.levels == ("layer 3", "layer 2", "layer 1")
    ids = sorted(t.labels)
    aliases = {f"ip-10-0-0-{i}": ids[i] for i in range(8)}
    hosts = list(aliases)
    assert [g.tolist() for g in t.groups(hosts, aliases=aliases)] == [
        list(range(8)),
        RACKS,
        PODS,
    ]
    with pytest.raises(RankoptInputError, match="does not name 8 of the job's hosts"):
        t.groups(hosts)


def test_gcp_physical_host_topology():
    t = read_topology(DATA / "gcp_instances.json")
    assert t.levels == ("host", "subblock", "block", "cluster")
    vms = [f"a3-vm-{i}" for i in range(8)]
    # host = VM here, one cluster: both levels split nothing new and are left out
    assert _levels(t, vms) == [list(range(8)), RACKS, PODS]


def test_kubernetes_node_labels_known_keys_and_explicit_keys():
    t = read_topology(DATA / "kubectl_nodes.json")
    assert t.levels == (
        "cloud.google.com/gce-topology-host",
        "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-block",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
    )
    nodes = [f"gke-pool-{i}" for i in range(8)]
    assert _levels(t, nodes) == [list(range(8)), RACKS, PODS]
    zone = from_kubernetes(
        (DATA / "kubectl_nodes.json").read_text(), ["topology.kubernetes.io/zone"]
    )
    assert _levels(zone, nodes) == [list(range(8))]


def test_several_processes_per_host():
    t = read_topology(DATA / "hosts.txt")
    hosts = [h for h in TUX for _ in range(2)]
    levels = _levels(t, hosts)
    assert levels[0] == [i // 2 for i in range(16)]
    assert levels[1] == [RACKS[i // 2] for i in range(16)]


def test_expand_hostlist_and_errors(tmp_path):
    assert expand_hostlist("a,b[1-2],c[08-09]x") == ["a", "b1", "b2", "c08x", "c09x"]
    with pytest.raises(RankoptInputError, match="bad range"):
        expand_hostlist("n[a-b]")
    with pytest.raises(RankoptInputError, match="no SwitchName= or BlockName="):
        from_slurm_conf("# nothing\n")
    bad = tmp_path / "t.json"
    bad.write_text('{"Instances": [{"NetworkNodes": ["a"]}]}')
    with pytest.raises(RankoptInputError, match="not a valid aws topology"):
        read_topology(bad)
    ragged = tmp_path / "h.txt"
    ragged.write_text("a r1 p1\nb r1\n")
    with pytest.raises(RankoptInputError, match="line 2: 2 columns"):
        read_topology(ragged)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_topology(tmp_path / "missing.txt")


def _net(bw_rack=10e9, bw_pod=2e9, bw_far=1e9):
    rack, pod = np.array(RACKS), np.array(PODS)
    bw = np.where(pod[:, None] == pod[None], bw_pod, bw_far)
    bw = np.where(rack[:, None] == rack[None], bw_rack, bw)
    return rankopt.Network.from_matrices(np.full((8, 8), 3e-5), bw, hosts=TUX)


def test_apply_topology_keeps_the_probe_capacities():
    net = apply_topology(_net(), read_topology(DATA / "topology.conf"))
    assert net.level_sizes() == [[1] * 8, [2] * 4, [4, 4]]
    np.testing.assert_allclose(net.uplinks[1], 2e9)  # racks: the best pair across racks
    np.testing.assert_allclose(net.uplinks[2], 1e9)
    assert net.provenance["topology"]["source"] == "slurm-tree"
    assert net.provenance["topology"]["disagreements"] == []


def test_disagreement_is_reported():
    net = _net()
    bw = np.array(net.bandwidth)
    bw[0, 1] = bw[1, 0] = 1e9  # tux00 and tux01 share rack 0 but measure like far apart
    net = rankopt.Network.from_matrices(net.latency, bw, hosts=TUX)
    got = apply_topology(net, read_topology(DATA / "hosts.txt"))
    lines = got.provenance["topology"]["disagreements"]
    assert any("processes 0 and 1 share the group" in ln for ln in lines), lines
    flat = compare_with_bandwidth([np.arange(8), np.array(RACKS)], np.full((8, 8), 1e9))
    assert flat == [
        "level 1: no bandwidth difference between inside and across groups "
        "(median 1 GB/s inside, 1 GB/s to siblings)"
    ]


def test_cli_solve_and_probe_take_a_topology(tmp_path, capsys):
    from rankopt.cli import main

    path = tmp_path / "net.npz"
    _net().save(path)
    assert main(["solve", str(path), "--topology", str(DATA / "topology.conf"), "-q"]) == 0
    order = [int(x) for x in capsys.readouterr().out.split()]
    assert sorted(order) == list(range(8))
