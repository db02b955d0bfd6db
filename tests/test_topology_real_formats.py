"""Topology files as the real tools write them: the groups read and the errors on bad input."""

import json

import pytest

from rankopt import RankoptInputError
from rankopt.probe.topology_sources import (
    expand_hostlist,
    from_aws,
    from_gcp,
    from_kubernetes,
    from_slurm_yaml,
    read_topology,
)


def _levels(topology, hosts):
    return [g.tolist() for g in topology.groups(hosts)]


# ---------------------------------------------------------------------- Slurm
TREE_CONF = r"""
##################################################################
# topology/tree, as in topology.conf(5), keys in any case
##################################################################
SwitchName=s0 Nodes=dev[0-5] LinkSpeed=100   # leaf
switchname=s1 nodes=dev[6-11]
SWITCHNAME=s2 Nodes=dev[12-17],gpu[01-04]
SwitchName=s3 \
   Switches=s[0-2]
"""


def test_slurm_conf_tree_groups_and_fqdns(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text(TREE_CONF)
    t = read_topology(path)
    assert t.labels["gpu03"] == ("s2", "s3")
    assert t.levels == ("leaf switch", "switch level 1")
    # the top switch splits nothing among these hosts: only the leaf level is kept
    assert _levels(t, ["dev0", "dev1.cluster.local", "dev6", "gpu01"]) == [
        [0, 1, 2, 3],
        [0, 0, 1, 2],
    ]


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[2-3]\n",
            "node 'n2' is under leaf switch 'a' and under leaf switch 'b'",
        ),
        (
            "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[4-8]\n",
            "node 'n4' is under block 'b1' and under block 'b2'",
        ),
        ("SwitchName=a Nodes=n[1-\n", r"hostlist 'n\[1-': unbalanced"),
        ("SwitchName=a Nodes=n]1[\n", r"hostlist 'n\]1\[': unbalanced"),
        ("SwitchName=a Nodes=n[5-2]\n", r"hostlist 'n\[5-2\]': bad range '5-2'"),
        ("RingName=ring0 Nodes=node[01-08]\n", "RingName= .*topology/ring.* has no groups"),
    ],
)
def test_slurm_conf_errors_name_the_node_or_the_expression(tmp_path, text, match):
    path = tmp_path / "topology.conf"
    path.write_text(text)
    with pytest.raises(RankoptInputError, match=f"topology.conf: .*{match}"):
        read_topology(path)


def test_hostlist_brackets_must_balance():
    assert expand_hostlist("tux[0-3,7],gpu[01-02]") == [
        "tux0", "tux1", "tux2", "tux3", "tux7", "gpu01", "gpu02",
    ]  # fmt: skip
    for bad in ("n[1-", "n]1[", "n[[1-2]]", "a[1-2]]"):
        with pytest.raises(RankoptInputError, match="unbalanced or nested brackets"):
            expand_hostlist(bad)


def test_slurm_yaml_node_under_two_leaf_switches_is_an_error():
    text = """
- topology: fabric
  cluster_default: true
  tree:
    switches:
      - {switch: sw1, nodes: "node[01-04]"}
      - switch: sw2
        nodes: [node04, "node[05-08]"]   # node04 again
"""
    with pytest.raises(RankoptInputError, match="node 'node04' is under leaf switch 'sw1' and"):
        from_slurm_yaml(text)


def test_slurm_yaml_man_page_example_block_topology():
    text = """---
- topology: topo1
  cluster_default: True
  tree:
    switches:
    - switch: sw_root
      nodes: node[01-04]
- topology: topo2
  cluster_default: False
  block:
    block_sizes:
      - 4
      - 16
    blocks:
    - block: b1
      nodes: node[01-04]
    - block: b2
      nodes: node[05-08]
    - block: b3
      nodes: node[09-12]
    - block: b4
      nodes: node[13-16]
- topology: topo3
  cluster_default: False
  flat: True
"""
    assert from_slurm_yaml(text).labels["node03"] == ("sw_root",)
    blocks = from_slurm_yaml(
        text.replace("True", "False").replace(
            "topo2\n  cluster_default: False", "topo2\n  cluster_default: true"
        )
    )
    assert blocks.labels["node10"] == ("b3", "aggregate4:0")
    assert _levels(blocks, ["node01", "node05", "node09"]) == [[0, 1, 2]]


def test_slurm_topology_addr_without_its_pattern_is_detected(tmp_path):
    path = tmp_path / "addr.txt"
    path.write_text("node07 s0.s3.node07\nnode08 s0.s4.node08\nnode09 s1.s5.node09\n")
    t = read_topology(path)
    assert t.source == "slurm-addr"
    assert t.labels["node07"] == ("s3", "s0")
    assert _levels(t, ["node07", "node08", "node09"]) == [[0, 1, 2], [0, 0, 1]]


# ---------------------------------------------------------------------- AWS
def _instance(iid, nodes, itype="p5.48xlarge"):
    return {
        "InstanceId": iid,
        "InstanceType": itype,
        "GroupName": "ml-cluster",
        "NetworkNodes": nodes,
        "AvailabilityZone": "us-east-1b",
        "ZoneId": "use1-az2",
    }


def test_aws_three_and_four_layer_instances_share_the_layers_from_the_top():
    doc = {
        "Instances": [
            _instance("i-0001", ["nn-top", "nn-mid", "nn-l3a"]),
            _instance("i-0002", ["nn-top", "nn-mid", "nn-l3b"]),
            {
                **_instance(
                    "i-0003", ["nn-top", "nn-mid", "nn-l3a", "nn-l4a"], "p6e-gb200.36xlarge"
                ),
                "CapacityBlockId": "cr-0123456789abcdef0",
            },
            _instance("i-0004", ["nn-top", "nn-mid", "nn-l3a", "nn-l4a"], "p6e-gb200.36xlarge"),
            _instance("i-0005", [], "t3.micro"),
        ],
        "NextToken": "eyJ2IjoiMiJ9",
    }
    t = from_aws(json.dumps(doc))
    assert t.levels == ("layer 4", "layer 3", "layer 2", "layer 1")
    # i-0001 hangs off layer-3 node nn-l3a, as do i-0003 and i-0004 (through nn-l4a)
    assert _levels(t, ["i-0001", "i-0003", "i-0004", "i-0002"]) == [
        [0, 1, 2, 3],
        [0, 1, 1, 2],
        [0, 0, 0, 1],
    ]
    assert any("i-0005" in note for note in t.notes)


@pytest.mark.parametrize(
    "doc, match",
    [
        (
            {"Instances": [{"InstanceId": "i-1", "NetworkNodes": "nn-1"}]},
            "NetworkNodes of i-1 is 'nn-1'",
        ),
        ({"Instances": {"InstanceId": "i-1"}}, "`Instances` is dict"),
        ({"Instances": ["i-1"]}, r"Instances\[0\] is str 'i-1'"),
        (
            {"Instances": [{"NetworkNodes": ["a", "b", "c"]}]},
            r"Instances\[0\]: `InstanceId` is None",
        ),
        (
            {"Instances": [_instance("i-1", ["a", "b", "c"]), _instance("i-1", ["a", "b", "d"])]},
            "instance i-1 is listed twice with different NetworkNodes",
        ),
    ],
)
def test_aws_malformed_topology_names_the_field(tmp_path, doc, match):
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RankoptInputError, match=f"topology.json: EC2 topology: {match}"):
        read_topology(path)


def test_aws_malformed_describe_instances_names_the_instance(tmp_path):
    topo = tmp_path / "topology.json"
    topo.write_text(json.dumps({"Instances": [_instance("i-1", ["a", "b", "c"])]}))
    aliases = tmp_path / "instances.json"
    aliases.write_text(
        '{"Reservations": [{"Instances": [{"InstanceId": "i-1", "NetworkInterfaces": [null]}]}]}'
    )
    with pytest.raises(
        RankoptInputError,
        match=r"instances.json: EC2 instance i-1: NetworkInterfaces\[0\] is NoneType",
    ):
        read_topology(topo, aliases=aliases)


# ---------------------------------------------------------------------- GCP
def _vm(name, block, subblock, host, *, with_topology=True):
    zone = "us-central1-a"
    vm = {
        "kind": "compute#instance",
        "name": name,
        "zone": f"https://www.googleapis.com/compute/v1/projects/p/zones/{zone}",
        "status": "RUNNING",
        "networkInterfaces": [{"name": "nic0", "networkIP": "10.128.0.2"}],
        "resourceStatus": {"physicalHost": f"/{block}/{subblock}/{host}"},
    }
    if with_topology:
        vm["resourceStatus"]["physicalHostTopology"] = {
            "cluster": "cl1", "block": block, "subblock": subblock, "host": host,
        }  # fmt: skip
    return vm


def test_gcp_physical_host_alone_gives_host_subblock_and_block(tmp_path):
    vms = [
        _vm("c2-0", "CCCC", "BBBB", "AAAA", with_topology=False),
        _vm("c2-1", "CCCC", "BBBB", "AAAB", with_topology=False),
        _vm("c2-2", "CCCC", "BBBC", "AAAC", with_topology=False),
    ]
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(vms, indent=2))
    t = read_topology(path)
    assert t.source == "gcp"
    assert t.levels == ("host", "subblock", "block")
    assert t.labels["c2-1"] == ("AAAB", "BBBB", "CCCC")
    hosts = ["c2-0.us-central1-a.c.p.internal", "c2-1", "c2-2"]
    assert _levels(t, hosts) == [[0, 1, 2], [0, 0, 1]]


def test_gcp_physical_host_topology_is_preferred_and_bad_values_named():
    t = from_gcp(json.dumps([_vm("a", "b1", "s1", "h1"), _vm("b", "b1", "s2", "h2")]))
    assert t.labels["a"] == ("h1", "s1", "b1", "cl1")
    bad = _vm("a", "b1", "s1", "h1", with_topology=False)
    bad["resourceStatus"]["physicalHost"] = "/b1/h1"
    with pytest.raises(RankoptInputError, match="physicalHost of a is '/b1/h1'"):
        from_gcp(json.dumps([bad]))
    with pytest.raises(RankoptInputError, match=r"items\['zones/a'\] is"):
        from_gcp('{"items": {"zones/a": ["x"]}}')


def test_truncated_json_says_so(tmp_path):
    path = tmp_path / "instances.json"
    path.write_text(json.dumps([_vm("a", "b1", "s1", "h1")])[:150])
    with pytest.raises(RankoptInputError, match="instances.json: not valid JSON"):
        read_topology(path)


# ---------------------------------------------------------------------- Kubernetes
def _node(name, labels, ip="10.0.0.9"):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ]
        },
    }


def test_topograph_labels_of_every_version_are_read():
    old = {
        "network.topology.nvidia.com/accelerator": "nvl1",
        "network.topology.nvidia.com/block": "leaf1",
        "network.topology.nvidia.com/spine": "sp1",
        "network.topology.nvidia.com/datacenter": "core1",
    }
    t = from_kubernetes(json.dumps({"items": [_node("n1", old)]}))
    assert t.labels["n1"] == ("nvl1", "leaf1", "sp1", "core1")
    new = [
        _node(f"n{i}", {
            "accelerator.topograph.run/domain": f"nvl{i // 2}",
            "fabric.topograph.run/tier-0": f"leaf{i // 2}",
            "fabric.topograph.run/tier-1": f"spine{i // 4}",
            "topology.kubernetes.io/zone": "z1",
        })
        for i in range(6)
    ]  # fmt: skip
    t = from_kubernetes(json.dumps({"apiVersion": "v1", "kind": "List", "items": new}))
    assert t.levels == (
        "accelerator.topograph.run/domain",
        "fabric.topograph.run/tier-0",
        "fabric.topograph.run/tier-1",
        "topology.kubernetes.io/zone",
    )
    assert _levels(t, ["n0", "n1", "n2", "n4"]) == [[0, 1, 2, 3], [0, 0, 1, 2], [0, 0, 0, 1]]


def test_kubernetes_eks_nodes_match_by_short_name_and_address(tmp_path):
    def eks(k, l2, l3):
        return _node(f"ip-10-0-0-{k}.ec2.internal", {
            "topology.kubernetes.io/zone": "us-east-1b",
            "topology.kubernetes.io/region": "us-east-1",
            "topology.k8s.aws/network-node-layer-1": "nn-a",
            "topology.k8s.aws/network-node-layer-2": l2,
            "topology.k8s.aws/network-node-layer-3": l3,
        }, ip=f"10.0.0.{k}")  # fmt: skip

    path = tmp_path / "nodes.json"
    path.write_text(
        json.dumps(
            {
                "kind": "List",
                "items": [eks(5, "nn-b", "nn-c"), eks(6, "nn-b", "nn-d"), eks(7, "nn-e", "nn-f")],
            }
        )
    )
    t = read_topology(path)
    assert t.match(["ip-10-0-0-5", "10.0.0.6"]) == {
        "ip-10-0-0-5": "ip-10-0-0-5.ec2.internal",
        "10.0.0.6": "ip-10-0-0-6.ec2.internal",
    }
    assert _levels(t, ["ip-10-0-0-5", "10.0.0.6", "ip-10-0-0-7.ec2.internal"]) == [
        [0, 1, 2],
        [0, 0, 1],
    ]


def test_kubernetes_one_node_and_malformed_nodes(tmp_path):
    one = from_kubernetes(json.dumps(_node("n1", {"topology.kubernetes.io/zone": "z1"})))
    assert one.labels == {"n1": ("z1",)}
    for doc, match in [
        ({"items": [{"kind": "Node"}]}, r"items\[0\] has no `metadata`"),
        ({"items": [{"metadata": {"name": "a", "labels": ["x"]}}]}, "labels of node a are"),
        ({"items": [{"metadata": {"labels": {}}}]}, r"items\[0\]\.metadata: `name` is None"),
    ]:
        path = tmp_path / "nodes.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(RankoptInputError, match=f"nodes.json: Kubernetes nodes: {match}"):
            read_topology(path, kind="kubernetes")


@pytest.mark.parametrize("text", ["null\n", "h1\nh2\n", "# hosts\nnode-a\n"])
def test_a_text_topology_of_host_names_alone_is_refused(text):
    from rankopt.probe.topology_sources import from_text

    with pytest.raises(RankoptInputError, match=r"line \d+: '.*' alone; .*`host rack \[pod"):
        from_text(text)
