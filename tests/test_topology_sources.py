"""Topology from providers and schedulers, read from samples in their documented formats."""

import json
from pathlib import Path

import numpy as np
import pytest

import rankopt
from rankopt import RankoptInputError
from rankopt.probe.topology_sources import (
    apply_topology,
    compare_with_bandwidth,
    expand_hostlist,
    from_aws_instances,
    from_kubernetes,
    from_slurm_conf,
    from_slurm_yaml,
    from_text,
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
    with pytest.raises(RankoptInputError, match=r"t.json: .*Instances\[0\]: `InstanceId` is None"):
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


# ---------------------------------------------------------------- Slurm topology.yaml
FABRIC_YAML = """\
---
# topology.yaml as written by hand: several topologies, the second is the default
- topology: "nvl"   # quoted name
  block:
    block_sizes: [2, 4]
    blocks:
      - {block: b1, nodes: "tux[00-01]"}
      - {block: b2, nodes: 'tux[02-03]'}
- topology: fabric
  cluster_default: true
  tree:
    switches:
      - switch: core
        children: [p0, p1]          # a flow list of switches
      - switch: p0
        children: s[0-1]
      - switch: p1
        children:
          - s2
          - s3
      - switch: s0
        nodes: [tux00, tux01]
      - switch: "s1"
        nodes:
          - tux02
          - 'tux03'
      - {switch: s2, nodes: "tux[04-05]"}
      - switch: s3
        nodes: tux[06-07]   # a hostlist
- topology: unused
  cluster_default: false
  flat: true
"""


def test_slurm_yaml_flow_and_block_lists_quoting_comments_and_the_default(tmp_path):
    path = tmp_path / "topology.yaml"
    path.write_text(FABRIC_YAML)
    t = read_topology(path)
    assert t.source == "slurm-tree"
    assert t.labels["tux03"] == ("s1", "p0", "core")
    assert t.labels["tux06"] == ("s3", "p1", "core")
    assert _levels(t, TUX) == [list(range(8)), RACKS, PODS]
    # the default moved to the block topology: its flow list of sizes and quoted hostlists
    moved = FABRIC_YAML.replace("cluster_default: true", "cluster_default: false").replace(
        '- topology: "nvl"   # quoted name', '- topology: "nvl"\n  cluster_default: yes'
    )
    blocks = from_slurm_yaml(moved)
    assert blocks.source == "slurm-block" and blocks.levels == ("block", "4-node block")
    assert blocks.labels["tux03"] == ("b2", "aggregate2:0")


def test_slurm_yaml_written_as_json_is_detected(tmp_path):
    path = tmp_path / "topology.json"
    path.write_text(
        '[{"topology": "t", "block": {"block_sizes": [2], "blocks": '
        '[{"block": "b1", "nodes": "n[1-2]"}, {"block": "b2", "nodes": "n[3-4]"}]}}]'
    )
    assert read_topology(path).labels["n3"] == ("b2",)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "- topology: t\n  tree:\n    switches:\n      - switch: s1\n     nodes: n1\n",
            r"topology.yaml is not valid YAML at line 5, column 6: ",
        ),
        ("- topology: t\n  tree: {switches: [\n", r"not valid YAML at line 3"),
        ("- topology: 'unterminated\n", r"not valid YAML at line 2"),
        ("- topology: t\n  tree:\n    switches: s1\n", r"tree.switches must be a list of map"),
        (
            "- topology: t\n  tree:\n    switches:\n      - {switch: s1, nodes: {a: 1}}\n",
            r"switch 1 `nodes` holds a mapping; expected a hostlist",
        ),
        ("- topology: t\n  block:\n    block_sizes: [2, x]\n", r"block_sizes .*positive whole"),
        ("- topology: t\n  flat: true\n", r"flat \(no groups\)"),
        ("- {topology: t, tree: {switches: [{switch: s, nodes: 'n[0-99999999]'}]}}\n", "more than"),
    ],
)
def test_slurm_yaml_errors_name_the_file_and_the_line(tmp_path, text, match):
    path = tmp_path / "topology.yaml"
    path.write_text(text)
    with pytest.raises(RankoptInputError, match=match) as info:
        read_topology(path)
    assert str(info.value).startswith(f"{path}: ")
    assert "\n" not in str(info.value)


def test_slurm_yaml_bombs_and_deep_nesting_fail_fast(tmp_path, monkeypatch):
    import time

    import rankopt.probe.topology_sources as ts

    laughs = ["- topology: t", "  x:", '    a: &a ["lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        laughs.append(f"    {name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    laughs += ["  tree:", "    switches:", "      - {switch: s, nodes: *i}"]
    start = time.perf_counter()
    with pytest.raises(RankoptInputError, match="holds a list; expected a hostlist"):
        from_slurm_yaml("\n".join(laughs) + "\n")
    with pytest.raises(RankoptInputError, match="not valid YAML|nested too deeply"):
        from_slurm_yaml("- topology: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert time.perf_counter() - start < 10
    monkeypatch.setattr(ts, "MAX_YAML_CHARS", 100)
    with pytest.raises(RankoptInputError, match="rankopt reads at most 100"):
        from_slurm_yaml(FABRIC_YAML)


# ---------------------------------------------------------------- Slurm topology.conf keys
def test_slurm_conf_keys_are_case_insensitive(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text(
        "# written by hand, keys in every case\n"
        "switchname=s0 nodes=tux[00-01]\n"
        "SWITCHNAME=s1 NODES=tux[02-03] LINKSPEED=100\n"
        "SwitchName = s2  Nodes = tux[04-05]\n"
        'switchName=s3 noDes="tux[06-07]"\n'
        "SwitchName=p0 switches=s[0-1]\n"
        "switchname=p1 SWITCHES=s[2-3]\n"
        "SWITCHNAME=core \\\n  Switches=p[0-1]\n"
    )
    t = read_topology(path)
    assert t.source == "slurm-tree" and t.labels["tux05"] == ("s2", "p1", "core")
    assert _levels(t, TUX) == [list(range(8)), RACKS, PODS]
    leveled = from_slurm_conf(
        (DATA / "scontrol_topology.txt")
        .read_text()
        .replace("Level", "level")
        .replace("Nodes", "NODES")
    )
    assert leveled.labels == read_topology(DATA / "scontrol_topology.txt").labels


def test_slurm_block_conf_keys_are_case_insensitive(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text(
        "# topology/block\n"
        "blockname=b1 nodes=tux[00-01]\n"
        "BLOCKNAME=b2 NODES=tux[02-03]\n"
        "BlockName=b3 Nodes=tux[04-05]\n"
        "blockName=b4 nodes=tux[06-07]\n"
        "blocksizes=2,4\n"
    )
    t = read_topology(path)
    assert t.source == "slurm-block" and t.levels == ("block", "4-node block")
    assert _levels(t, TUX) == [list(range(8)), RACKS, PODS]
    with pytest.raises(RankoptInputError, match=r"BlockSizes='2,x'; expected whole numbers"):
        from_slurm_conf("BlockName=b1 Nodes=n1\nBLOCKSIZES=2,x\n")


# ---------------------------------------------------------------- GCP shapes
def test_gcp_list_api_list_and_aggregated_list_give_the_same_groups(tmp_path):
    instances = json.loads((DATA / "gcp_instances.json").read_text())
    zone_b = "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-b"
    for inst in instances[4:]:
        inst["zone"] = zone_b
    shapes = {
        "gcloud": instances,
        "list": {
            "kind": "compute#instanceList",
            "id": "projects/p/zones/us-central1-a/instances",
            "items": instances,
            "selfLink": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instances",
        },
        "aggregated": {
            "kind": "compute#instanceAggregatedList",
            "id": "projects/p/aggregated/instances",
            "items": {
                "zones/us-central1-a": {"instances": instances[:4]},
                "zones/us-central1-b": {"instances": instances[4:]},
                "zones/us-east1-b": {
                    "warning": {
                        "code": "NO_RESULTS_ON_PAGE",
                        "message": "There are no results for scope 'zones/us-east1-b' on this page.",
                        "data": [{"key": "scope", "value": "zones/us-east1-b"}],
                    }
                },
            },
            "selfLink": "https://www.googleapis.com/compute/v1/projects/p/aggregated/instances",
        },
    }
    vms = [f"a3-vm-{i}" for i in range(8)]
    got = {}
    for name, doc in shapes.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        t = read_topology(path)
        assert t.source == "gcp"
        got[name] = t.labels
        assert _levels(t, vms) == [list(range(8)), RACKS, PODS]
    assert got["gcloud"] == got["list"] == got["aggregated"]
    # the host names GCP's DNS gives (vm.zone.c.project.internal) match the instance names
    fqdn = [f"{vm}.us-central1-a.c.my-project.internal" for vm in vms]
    assert _levels(t, fqdn) == [list(range(8)), RACKS, PODS]
    twice = shapes["aggregated"]
    twice["items"]["zones/us-central1-b"]["instances"][0]["name"] = "a3-vm-0"
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(twice))
    with pytest.raises(RankoptInputError, match="two instances named 'a3-vm-0'"):
        read_topology(path)


# ---------------------------------------------------------------- host names
def test_short_names_and_fqdns_match_both_ways():
    t = read_topology(DATA / "topology.conf")
    fqdn = [f"{h}.cluster.local" for h in TUX]
    assert _levels(t, fqdn) == [list(range(8)), RACKS, PODS]
    assert t.match(fqdn[:2]) == {"tux00.cluster.local": "tux00", "tux01.cluster.local": "tux01"}
    assert _levels(t, [h.upper() for h in TUX]) == [list(range(8)), RACKS, PODS]
    long = from_text(
        "".join(f"{h}.cluster.local r{r} p{p}\n" for h, r, p in zip(TUX, RACKS, PODS, strict=True))
    )
    assert _levels(long, TUX) == [list(range(8)), RACKS, PODS]
    assert _levels(long, [f"{h}.cluster.local." for h in TUX]) == [list(range(8)), RACKS, PODS]


def test_short_names_must_be_unique_on_both_sides():
    two = from_text("node1.a.local r1\nnode1.b.local r2\nnode2.a.local r2\n")
    with pytest.raises(
        RankoptInputError, match=r"'node1' matches both 'node1.a.local' and 'node1.b.local'"
    ):
        two.groups(["node1", "node2"])
    assert two.match(["node1.b.local", "node2"]) == {
        "node1.b.local": "node1.b.local",
        "node2": "node2.a.local",
    }
    one = from_text("node1 r1\nnode2 r2\n")
    with pytest.raises(
        RankoptInputError, match=r"job hosts 'node1.a.local' and 'node1.b.local' both match 'node1'"
    ):
        one.groups(["node1.a.local", "node1.b.local", "node2"])


@pytest.mark.parametrize(
    "host", ["tux:00", "-tux00", "tux00-", "tux..local", "a" * 64, "tux 00", "tux00/1", ""]
)
def test_host_names_outside_rfc_1123_are_rejected(host):
    t = from_text("tux00 r1\n")
    with pytest.raises(RankoptInputError, match="expected an RFC 1123 host name"):
        t.groups([host])


def test_ip_addresses_are_host_names():
    t = from_text("10.0.0.5 r1\n10.0.0.6 r2\nfe80::1 r2\n")
    assert _levels(t, ["10.0.0.5", "10.0.0.6", "fe80::1"]) == [[0, 1, 2], [0, 1, 1]]
    with pytest.raises(RankoptInputError, match="does not name 1 of the job's hosts: 10.0.0.7"):
        t.groups(["10.0.0.7"])  # never by "short name" (10)


def test_aws_hosts_match_instance_ids_through_describe_instances(tmp_path):
    aliases = DATA / "aws_describe_instances.json"
    t = read_topology(DATA / "aws_describe_instance_topology.json", aliases=aliases)
    # MPI reports the private DNS name, its first label, or the address; mixed here
    hosts = [
        "ip-10-0-0-10.ec2.internal",
        "ip-10-0-0-11",
        "10.0.0.12",
        "ip-10-0-0-13",
        "ip-10-0-0-14.ec2.internal",
        "ip-10-0-0-15",
        "10.0.0.16",
        "i-0000000000000007",
    ]
    assert _levels(t, hosts) == [list(range(8)), RACKS, PODS]
    assert t.match(hosts[:3]) == {
        "ip-10-0-0-10.ec2.internal": "i-0000000000000000",
        "ip-10-0-0-11": "i-0000000000000001",
        "10.0.0.12": "i-0000000000000002",
    }
    bare = read_topology(DATA / "aws_describe_instance_topology.json")
    with pytest.raises(RankoptInputError, match="give the EC2 DescribeInstances JSON"):
        bare.groups(hosts)
    # the same address in another VPC: ambiguous, both named
    doc = json.loads(aliases.read_text())
    doc["Reservations"][1]["Instances"][0]["PrivateIpAddress"] = "10.0.0.10"
    clash = tmp_path / "clash.json"
    clash.write_text(json.dumps(doc))
    t = read_topology(DATA / "aws_describe_instance_topology.json", aliases=clash)
    with pytest.raises(RankoptInputError, match="'10.0.0.10' matches both"):
        t.groups(["10.0.0.10"])
    # describe-instances given as the topology
    with pytest.raises(RankoptInputError, match="expected DescribeInstanceTopology"):
        read_topology(aliases)
    topology = DATA / "aws_describe_instance_topology.json"
    with pytest.raises(RankoptInputError, match=r"no EC2 instance \(InstanceId\) found"):
        read_topology(topology, aliases=DATA / "kubectl_nodes.json")
    with pytest.raises(RankoptInputError, match="hosts.txt: not valid EC2 describe-instances"):
        read_topology(topology, aliases=DATA / "hosts.txt")


def test_from_aws_instances_reads_query_shapes():
    doc = json.loads((DATA / "aws_describe_instances.json").read_text())
    whole = from_aws_instances(json.dumps(doc))
    listed = [i for r in doc["Reservations"] for i in r["Instances"]]
    assert from_aws_instances(json.dumps(listed)) == whole
    nested = [r["Instances"] for r in doc["Reservations"]]
    assert from_aws_instances(json.dumps(nested)) == whole
    assert ("ip-10-0-0-10.ec2.internal", "i-0000000000000000") in whole
    assert ("10.0.1.5", "i-00000000000000ff") in whole  # not in the topology: harmless


def test_kubernetes_node_names_with_a_domain_match_short_host_names(tmp_path):
    items = []
    for i in range(8):
        name = f"ip-10-0-1-{i + 20}.us-west-2.compute.internal"
        labels = {
            "kubernetes.io/hostname": name,
            "node.kubernetes.io/instance-type": "p5.48xlarge",
            "topology.kubernetes.io/region": "us-west-2",
            "topology.kubernetes.io/zone": "us-west-2a",
            "topology.k8s.aws/network-node-layer-1": f"nn-{PODS[i]}aaaaaaaaaaaaaaa",
            "topology.k8s.aws/network-node-layer-2": f"nn-{RACKS[i] // 2}bbbbbbbbbbbbbbb",
            "topology.k8s.aws/network-node-layer-3": f"nn-{RACKS[i]}ccccccccccccccc",
        }
        items.append(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        )
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"apiVersion": "v1", "items": items, "kind": "List"}))
    t = read_topology(path)
    assert t.levels[0] == "topology.k8s.aws/network-node-layer-3"
    hosts = [f"ip-10-0-1-{i + 20}" for i in range(8)]  # what MPI reports on the node
    assert _levels(t, hosts) == [list(range(8)), RACKS, PODS]
    gke = read_topology(DATA / "kubectl_nodes.json")
    fqdn = [f"gke-pool-{i}.us-central1-a.c.my-project.internal" for i in range(8)]
    assert _levels(gke, fqdn) == [list(range(8)), RACKS, PODS]


def test_apply_topology_records_the_hosts_matched_by_another_name():
    net = rankopt.Network.from_matrices(
        _net().latency, _net().bandwidth, hosts=[f"{h}.cluster.local" for h in TUX]
    )
    got = apply_topology(net, read_topology(DATA / "topology.conf"))
    assert got.level_sizes() == [[1] * 8, [2] * 4, [4, 4]]
    assert got.provenance["topology"]["matched"]["tux03.cluster.local"] == "tux03"


def test_cli_solve_takes_topology_aliases(tmp_path, capsys):
    from rankopt.cli import main

    hosts = [f"ip-10-0-0-{i + 10}" for i in range(8)]
    net = rankopt.Network.from_matrices(_net().latency, _net().bandwidth, hosts=hosts)
    path = tmp_path / "net.npz"
    net.save(path)
    topo = str(DATA / "aws_describe_instance_topology.json")
    aliases = str(DATA / "aws_describe_instances.json")
    argv = ["solve", str(path), "--topology", topo, "--topology-aliases", aliases, "-q"]
    assert main(argv) == 0
    order = [int(x) for x in capsys.readouterr().out.split()]
    assert sorted(order) == list(range(8))
    assert main(["solve", str(path), "--topology", topo, "-q"]) != 0
    assert "--topology-aliases" in capsys.readouterr().err
    assert main(["solve", str(path), "--topology-aliases", aliases, "-q"]) != 0
    assert "--topology-aliases needs --topology" in capsys.readouterr().err


def test_probe_keeps_its_measurement_when_the_topology_does_not_match(tmp_path, capsys):
    import argparse

    from rankopt import Measurement
    from rankopt.cli._probe import _probe_and_save

    lat = np.full((2, 2), 1e-5)
    np.fill_diagonal(lat, 0.0)
    m = Measurement(lat, None, ("h0", "h1"))
    out = tmp_path / "probe.npz"
    topo = DATA / "hosts.txt"
    args = argparse.Namespace(
        topology=topo, topology_labels=read_topology(topo), output=out, quiet=True
    )
    status = _probe_and_save(args, 0, 2, lambda **_: m, {}, lambda: None)
    assert status == 1 and out.exists()
    err = capsys.readouterr().err
    assert "does not name 2 of the job's hosts: h0, h1" in err
    assert "saved without the topology" in err
