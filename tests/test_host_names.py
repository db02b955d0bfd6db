"""One host-name rule (rankopt._validation.check_host_name) at every entry point."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankopt._validation import check_host_name, check_host_names
from rankopt.errors import RankoptInputError

# Names as real tools report them: hostname, hostname -f, DNS, Slurm, cloud
# metadata, Kubernetes, docker compose, ip addr.
REPORTED = [
    "node7",
    "NODE7",
    "node7.cluster.local",
    "node7.cluster.local.",
    "ip-10-0-0-5.ec2.internal",
    "ip-10-0-0-5.us-west-2.compute.internal",
    "gke-pool-1-3f9a2c1d-x7k2",
    "web-7d9f8b6c5d-x2x4z",
    "web-0.nginx.default.svc.cluster.local",
    "trainer-worker-12",
    "proj_node_1",
    "xn--bcher-kva.example",
    "r1n07",
    "123",
    "10.0.0.5",
    "10.0.0.5.",
    "255.255.255.255",
    "fe80::1",
    "fe80::1%eth0",
    "2001:db8::8a2e:370:7334",
    "::ffff:10.0.0.5",
    "a" * 63 + ".b",
]

# Names nothing reports, or that would break a rankfile, hostfile or Slurm
# host list, each with the reason the message gives.
REFUSED = [
    ("", "it is empty"),
    ("node1\n", r"it holds '\\n'"),
    ("node1\r", r"it holds '\\r'"),
    ("node 1", "it holds ' '"),
    ("node1\t", r"it holds '\\t'"),
    ("no\x00de", r"it holds '\\x00'"),
    ("node\u200b1", "non-ASCII"),
    ("nöde1", "non-ASCII"),
    ("node1:2", "':' appears only in an IPv6 address"),
    ("node1:22", "':' appears only in an IPv6 address"),
    ("fe80::g", "':' appears only in an IPv6 address"),
    ("fe80::1%e v", "IPv6 zone 'e v'"),
    ("node1%eth0", "'%' appears only before the zone"),
    ("rank0=node1", "it holds '='"),
    ("node1#2", "it holds '#'"),
    ("node1,node2", "it holds ','"),
    ("node[1-4]", r"it holds '\['"),
    ("node/1", "it holds '/'"),
    ("user@node1", "it holds '@'"),
    ("node*", r"it holds '\*'"),
    ("a..b", "empty label"),
    (".a", "empty label"),
    ("-node1", "starts or ends with '-'"),
    ("node1-.local", "starts or ends with '-'"),
    ("a" * 64, "64 characters long"),
    (".".join(["a" * 63] * 4) + "x", "256 characters long"),
    ("10.0.0.256", "IPv4"),
    ("1.2.3", "IPv4"),
]


@pytest.mark.parametrize("name", REPORTED)
def test_reported_names_are_accepted(name):
    assert check_host_name(name) == name


@pytest.mark.parametrize(("name", "reason"), REFUSED)
def test_refused_names_say_why(name, reason):
    with pytest.raises(RankoptInputError, match="expected an RFC 1123 host name") as info:
        check_host_name(name, "hosts[2]")
    msg = str(info.value)
    assert msg.startswith(f"hosts[2] {name!r}")
    assert re.search(reason, msg), msg


def test_non_str_is_refused_with_its_type():
    with pytest.raises(RankoptInputError, match=r"job host must be a str; got bytes b'a' .*decode"):
        check_host_name(b"a", "job host")
    with pytest.raises(
        RankoptInputError, match=r"`hosts` must hold host names \(str\); hosts\[1\]"
    ):
        check_host_names(["a", 7])


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
_LABELS = st.one_of(
    st.text(_ALNUM, min_size=1, max_size=1),
    st.builds(
        lambda a, mid, b: a + mid + b,
        st.text(_ALNUM, min_size=1, max_size=1),
        st.text(_ALNUM + "-", max_size=61),
        st.text(_ALNUM, min_size=1, max_size=1),
    ),
)
_NAMES = (
    st.lists(_LABELS, min_size=1, max_size=6)
    .map(".".join)
    .filter(lambda s: len(s) <= 253 and not (s.count(".") and s.replace(".", "").isdigit()))
)


@given(name=_NAMES, dot=st.booleans())
def test_any_name_of_valid_labels_is_accepted(name, dot):
    name += "." if dot else ""
    assert check_host_name(name) == name


@given(addr=st.ip_addresses())
def test_any_ip_address_is_accepted(addr):
    assert check_host_name(str(addr)) == str(addr)


_BREAKERS = list(" \t\n\r\x00\x0b\x1f\x7f=#,/@[]*:;%'\"\\|!$&()<>?{}~`+\u00a0\u200b\u00e9")


@given(name=_NAMES, bad=st.sampled_from(_BREAKERS), at=st.integers(0, 300))
def test_a_breaking_character_anywhere_is_refused(name, bad, at):
    k = at % (len(name) + 1)
    spoiled = name[:k] + bad + name[k:]
    with pytest.raises(RankoptInputError, match="expected an RFC 1123 host name"):
        check_host_name(spoiled)


def test_sequences_name_position_length_and_where():
    assert check_host_names(np.array([b"h0", b"h1"]), 2) == ("h0", "h1")
    assert check_host_names(np.array(["h0", "h1"])) == ("h0", "h1")
    with pytest.raises(RankoptInputError, match=r"`hosts` must name the host of each of the 3"):
        check_host_names(["a", "b"], 3)
    with pytest.raises(RankoptInputError, match=r"`hosts` must be a sequence of host names"):
        check_host_names("ab")
    with pytest.raises(
        RankoptInputError,
        match=r"`network.hosts` \(order file 'o.json'\) must hold host names; "
        r"network.hosts\[1\] is 'b c', expected .*; it holds ' '",
    ):
        check_host_names(["a", "b c"], 2, "network.hosts", where="order file 'o.json'")
    with pytest.raises(RankoptInputError, match=r"hosts\[0\] is not UTF-8 text"):
        check_host_names([b"\xff"])


# ------------------------------------------------------------ every entry point
def test_hierarchy_and_adapters_share_the_rule():
    from rankopt.adapters._common import check_hosts
    from rankopt.probe.hierarchy import infer_hierarchy

    lat = np.ones((4, 4))
    good = ["proj_node_1", "proj_node_1", "ip-10-0-0-5.ec2.internal", "fe80::1%eth0"]
    assert len(infer_hierarchy(lat, hosts=good)) >= 1
    assert check_hosts(good, 4) == tuple(good)
    for bad in ("node1:2", "node 1", "a..b"):
        hosts = ["a", bad, "b", "c"]
        for call in (lambda h=hosts: infer_hierarchy(lat, hosts=h), lambda h=hosts: check_hosts(h)):
            with pytest.raises(
                RankoptInputError, match=r"`hosts` must hold host names; hosts\[1\]"
            ):
                call()


def test_writers_refuse_what_would_break_their_lines():
    from rankopt.adapters.writers import format_rankfile

    assert "proj_node_1" in format_rankfile([0, 1], ["proj_node_1", "fe80::1"])
    with pytest.raises(RankoptInputError, match=r"hosts\[1\] is 'b slot=0'"):
        format_rankfile([0, 1], ["a", "b slot=0"])


def test_text_topology_names_the_line_and_file(tmp_path):
    from rankopt.probe.topology_sources import from_text, read_topology

    with pytest.raises(RankoptInputError, match=r"host name 'node:2' on line 3: expected"):
        from_text("# host rack\nnode1 r1\nnode:2 r1\n")
    path = tmp_path / "topo.txt"
    path.write_text("node1 r1\nnode,2 r2\n")
    with pytest.raises(RankoptInputError, match=r"topo\.txt: host name 'node,2' on line 2"):
        read_topology(path, "text")


def test_measurement_and_network_use_the_rule():
    import rankopt
    from rankopt.probe.measurement import Measurement

    with pytest.raises(RankoptInputError, match="`hosts` must name the host of each of the 2"):
        Measurement(np.zeros((2, 2)), None, ("a",))
    with pytest.raises(RankoptInputError, match=r"hosts\[1\] is 'b#'"):
        Measurement(np.zeros((2, 2)), None, ("a", "b#"))
    net = rankopt.Network(np.full((2, 2), 1e-5), hosts=("proj_a_1", "proj_b_1"))
    assert net.hosts == ("proj_a_1", "proj_b_1")


@pytest.mark.parametrize("check", [check_host_name, lambda h: check_host_names([h])])
def test_a_refused_name_as_long_as_a_file_is_shown_cut(check):
    """A whole line of another file read as a host name (a JSON file given as --hosts) is
    shown cut, not echoed whole into the one error line; a 256-character name is whole."""
    with pytest.raises(RankoptInputError) as info:
        check('{"order": [0, 1], "pad": "' + "x" * 5000 + '"}')
    assert len(str(info.value)) < 700 and "..." in str(info.value)
    long_name = ".".join(["a" * 63] * 4) + "x"
    with pytest.raises(RankoptInputError) as info:
        check(long_name)
    assert repr(long_name) in str(info.value)
