"""rankopt.Network: one object from the probe to the order, and the defaults it drives."""

import json
import subprocess
import sys

import numpy as np
import pytest

import rankopt
from rankopt import Measurement, Network
from rankopt.models.robust import speedup_interval
from rankopt.network import DEFAULT_NBYTES
from rankopt.network.core import meet_levels, uplink_directions
from rankopt.solvers.solve import LAUNCH_KEPT


def probed(racks, seed, *, in_rack=120e6, cross=(24e6, 30e6), shared=0.15, lat_sigma=1.5):
    """A probe's view of racks that differ only in bandwidth, launched in random order.

    Latency is noise (log-normal around 10 us, as on a busy shared host); some
    in-rack pairs were measured while sharing a link (30-70 % of their rate).
    """
    gen = np.random.default_rng(seed)
    rack = np.concatenate([np.full(k, i) for i, k in enumerate(racks)])
    rack = rack[gen.permutation(rack.size)]
    n = rack.size
    same = rack[:, None] == rack[None, :]
    bw = np.where(same, in_rack, gen.uniform(*cross, (n, n)))
    low = (gen.random((n, n)) < shared) & same
    bw = np.where(low, bw * gen.uniform(0.3, 0.7, (n, n)), bw)
    lat = 10e-6 * np.exp(gen.normal(0, lat_sigma, (n, n)))
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(bw, 0.0)
    m = Measurement(
        lat,
        bw,
        tuple(f"h{i}" for i in range(n)),
        latency_spread=0.2 * lat,
        bandwidth_spread=0.05 * bw,
        pair_counts=np.ones((n, n), int),
        bandwidth_counts=np.ones((n, n), int),
        backend="mpi",
        parameters={"repeats": 10, "bandwidth_repeats": 3},
    )
    return m, rack


def crossings(rack, order):
    return int(np.sum(rack[order] != rack[np.roll(order, -1)]))


@pytest.mark.parametrize("racks", [(4, 4), (3, 3, 3), (4, 3, 2), (5, 2), (6, 6, 6, 6)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_solve_sees_bandwidth_racks_through_noisy_latency(racks, seed):
    m, rack = probed(racks, seed)
    res = rankopt.solve(m)
    assert res.objective == "contention" and res.nbytes == DEFAULT_NBYTES
    assert crossings(rack, res.order) == len(racks)  # every rack contiguous around the ring
    assert sorted(res.network["level_sizes"][1]) == sorted(np.bincount(rack).tolist())
    lo, hi = res.speedup_interval
    if crossings(rack, np.arange(rack.size)) == len(racks):  # launched contiguous already
        assert res.order.tolist() == list(range(rack.size))
    else:
        assert 1.0 < lo <= hi and lo <= res.speedup * 1.0001
    assert any("modelled" in line for line in res.summary().splitlines())


def test_the_hierarchy_and_uplinks_come_from_bandwidth():
    m, rack = probed((4, 4), 3)
    net = Network.from_measurement(m)
    assert len(net.groups) == 2 and net.groups[0].tolist() == list(range(8))
    racks = net.groups[1]
    assert all((racks == racks[i]).tolist() == (rack == rack[i]).tolist() for i in range(8))
    # one transfer alone across the rack boundary: the best cross pair, 24-30 MB/s
    assert np.all((net.uplinks[1] > 24e6) & (net.uplinks[1] <= 30e6))
    assert np.all(net.uplinks[0] == 120e6)
    assert net.latency_samples.max() == 10 and net.bandwidth_samples.max() == 3
    assert net.provenance["hierarchy"].startswith("bandwidth, single linkage")


def test_a_gain_within_the_noise_keeps_the_launch_order():
    # one flat network: every difference between orders is noise
    gen = np.random.default_rng(4)
    n = 8
    lat = 20e-6 * np.exp(gen.normal(0, 0.5, (n, n)))
    bw = 100e6 * np.exp(gen.normal(0, 0.05, (n, n)))
    np.fill_diagonal(lat, 0)
    np.fill_diagonal(bw, 0)
    m = Measurement(
        lat, bw, tuple("abcdefgh"), latency_spread=0.1 * lat, bandwidth_spread=0.05 * bw
    )
    res = rankopt.solve(m)
    assert res.stop_reason == LAUNCH_KEPT and res.order.tolist() == list(range(n))
    assert res.speedup == 1.0 and res.extra["found_cost"] < res.baseline_cost
    assert any("the launch order is kept" in t for t in res.notes)
    # the same matrices as bare arrays carry no spread: the strict gain is taken
    bare = rankopt.solve(lat, bandwidth=bw, nbytes=DEFAULT_NBYTES)
    assert bare.stop_reason != LAUNCH_KEPT and bare.speedup > 1.0


def test_same_measurement_same_order_and_two_probes_same_quality():
    m, rack = probed((4, 3, 2), 5)
    a, b = rankopt.solve(m), rankopt.solve(m)
    assert a.order.tolist() == b.order.tolist() and a.seed == b.seed == 0
    # a second probe of the same network (other noise, same launch): same measured quality
    gen = np.random.default_rng(11)
    lat2 = m.latency * np.exp(gen.normal(0, 1.0, m.latency.shape))
    np.fill_diagonal(lat2, 0.0)
    m2 = Measurement(
        lat2,
        m.bandwidth * np.exp(gen.normal(0, 0.05, m.latency.shape)),
        m.hosts,
        latency_spread=m.latency_spread,
        bandwidth_spread=m.bandwidth_spread,
    )
    c = rankopt.solve(m2)
    assert crossings(rack, a.order) == crossings(rack, c.order) == 3


def test_objective_override_and_notes():
    m, _ = probed((4, 4), 0)
    res = rankopt.solve(m, objective="sum")
    assert res.objective == "sum" and res.nbytes is None
    assert any("bandwidth measured but not used" in t for t in res.notes)
    res = rankopt.solve(m, objective="time", nbytes=1e6)
    assert res.objective == "time" and res.nbytes == 1e6
    assert any("hierarchy found but not used" in t for t in res.notes)
    with pytest.raises(rankopt.RankoptInputError, match=r"the network has 2 levels \(8 groups"):
        rankopt.solve(m, uplink_bandwidth=[1e9, 1e8, 1e7])


def test_cost_with_the_default_model_matches_solve():
    m, _ = probed((3, 3, 3), 2)
    net = Network.from_measurement(m)
    res = rankopt.solve(net)
    kw = net.default_model()
    assert res.cost == pytest.approx(rankopt.cost(net.latency, res.order, **kw), rel=1e-12)


def test_cloud_network_keeps_its_true_hierarchy():
    cloud = rankopt.synthetic_cloud(2, 2, 3, rng=1)
    net = Network.from_cloud(cloud)
    assert [g.tolist() for g in net.groups] == [g.tolist() for g in cloud.groups]
    assert len(net.uplinks) == 3 and net.source == "cloud"
    one_pod = Network.from_cloud(rankopt.synthetic_cloud(1, 2, 3, rng=1))
    assert len(one_pod.groups) == 2  # a level of one group is no uplink


def test_save_and_load_round_trip(tmp_path):
    m, _ = probed((4, 3, 2), 1)
    net = Network.from_measurement(m)
    p = net.save(tmp_path / "net.npz")
    back = rankopt.load_network(p)
    assert back.source == net.source and back.hosts == net.hosts
    assert [g.tolist() for g in back.groups] == [g.tolist() for g in net.groups]
    assert all(np.array_equal(a, b) for a, b in zip(back.uplinks, net.uplinks, strict=True))
    assert np.array_equal(back.latency_samples, net.latency_samples)
    assert rankopt.solve(back).order.tolist() == rankopt.solve(net).order.tolist()
    # a probe file is read as a network with the hierarchy inferred
    m.save(tmp_path / "probe.npz")
    again = rankopt.load_network(tmp_path / "probe.npz")
    assert [g.tolist() for g in again.groups] == [g.tolist() for g in net.groups]


def test_interval_is_reproducible_and_brackets_noise():
    m, _ = probed((4, 4), 7)
    net = Network.from_measurement(m)
    res = rankopt.solve(net)
    model = {**net.default_model()}
    a = speedup_interval(net, res.order, model=model, rng=0)
    b = speedup_interval(net, res.order, model=model, rng=0)
    assert a == b and a[0] < a[1]
    assert meet_levels(net.groups, net.n)[0, 0] == 0


def test_cli_robust_reaches_solve(tmp_path, capsys):
    from rankopt.cli import main

    m, rack = probed((4, 4), 3)
    f = tmp_path / "net.npz"
    m.save(f)
    assert main(["solve", str(f), "--robust", "--json"]) == 0
    mean = json.loads(capsys.readouterr().out)
    assert mean["robust"]["statistic"] == "mean"
    assert mean["robust"]["draws"] == 16
    assert main(["solve", str(f), "--robust", "0.9", "--json"]) == 0
    q90 = json.loads(capsys.readouterr().out)
    assert q90["robust"]["statistic"] == 0.9
    # the same order as the library's robust solve on the same network
    lib = rankopt.solve(Network.from_measurement(m), robust={"statistic": 0.9})
    assert q90["order"] == lib.order.tolist()
    assert main(["solve", str(f), "--robust", "high"]) == 1
    assert "--robust takes 'mean' or a quantile" in capsys.readouterr().err


def test_cli_solve_probe_file_reports_what_was_modelled(tmp_path):
    m, rack = probed((4, 4), 0)
    f = tmp_path / "net.npz"
    m.save(f)
    p = subprocess.run(
        [sys.executable, "-m", "rankopt", "solve", str(f)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "objective=contention, message 16 MiB" in out
    assert "levels 8 groups of 1 (uplink 120 MB/s); 2 groups of 4, 4 (uplink" in out
    assert "modelled speedup" in out and "90% interval" in out
    assert "new rank  launch rank  host" in out
    order = [int(x) for x in out.strip().splitlines()[-1].split()]
    assert crossings(rack, np.array(order)) == 2
    p = subprocess.run(
        [sys.executable, "-m", "rankopt", "solve", str(f), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    d = json.loads(p.stdout)
    assert d["modelled"] is True and d["objective"] == "contention"
    assert d["order"] == order and len(d["speedup_interval"]) == 2


def test_launcher_solve_uses_the_network_and_ddp_bucket():
    from rankopt.adapters import _launch
    from rankopt.network import DDP_BUCKET_BYTES

    m, rack = probed((3, 3, 3), 4)
    args = _launch.LaunchOptions(granularity="rank", solve={"method": "auto", "rng": 0})
    order, text, network, result = _launch._solve(args, m.n, m.hosts, m)
    assert network.source == "probe:mpi" and result.nbytes == DDP_BUCKET_BYTES
    assert order[0] == 0 and crossings(rack, order) == 3
    assert f"message {DDP_BUCKET_BYTES / 2**20:g} MiB" in text and "modelled speedup" in text
    lib = rankopt.solve(m, nbytes=DDP_BUCKET_BYTES, keep_rank0=True)
    assert order.tolist() == lib.order.tolist()


def test_a_probe_file_keeps_the_hierarchy_it_was_saved_with(tmp_path):
    m, _ = probed((4, 3, 2), 6)
    net = Network.from_measurement(m)
    f = m.save(tmp_path / "probe.npz", network=net)
    with np.load(f) as z:
        assert z["groups"].shape == (2, 9) and z["uplinks"].shape == (2, 9)
    back = rankopt.load_network(f)
    assert back.provenance["hierarchy"] == "stored by the probe"
    assert [g.tolist() for g in back.groups] == [g.tolist() for g in net.groups]
    assert all(np.allclose(a, b) for a, b in zip(back.uplinks, net.uplinks, strict=True))
    assert rankopt.load_measurement(f).n == 9  # still a measurement file


def test_a_linear_probe_s_groups_and_measured_uplinks_are_used():
    m, rack = probed((4, 4), 2)
    labels = [list(range(8)), [int(r) for r in rack], [0] * 8]
    cap = [[None] * 8, [55e6, None], [None]]
    params = {**m.parameters, "groups": labels, "uplink_capacity": cap}
    m2 = Measurement(
        m.latency,
        m.bandwidth,
        m.hosts,
        latency_spread=m.latency_spread,
        bandwidth_spread=m.bandwidth_spread,
        parameters=params,
    )
    net = Network.from_measurement(m2)
    assert [g.tolist() for g in net.groups] == labels[:2]  # the one-group level is dropped
    out, into = uplink_directions(net.uplinks[1])
    assert out[0] == into[0] == 55e6  # measured with concurrent flows (both ways, as older files)
    assert 24e6 < min(out[1], into[1]) <= max(out[1], into[1]) <= 30e6  # the best pair each way
    assert net.provenance["hierarchy"].startswith("linear probe")


def test_an_order_file_from_solve_is_bound_to_its_network(tmp_path):
    from rankopt.adapters._common import check_binding, read_order_file

    m, _ = probed((4, 4), 1)
    f = tmp_path / "net.npz"
    m.save(f)
    out = tmp_path / "order.json"
    p = subprocess.run(
        [sys.executable, "-m", "rankopt", "solve", str(f), "--order-out", str(out), "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    of = read_order_file(out)
    assert of.network["n"] == 8 and of.network["hosts"] == list(m.hosts)
    check_binding(of, 8, list(m.hosts))
    with pytest.raises(rankopt.RankoptInputError, match="moved"):
        check_binding(of, 8, [*m.hosts[1:], m.hosts[0]])
    with pytest.raises(rankopt.RankoptInputError):
        check_binding(of, 9, [*m.hosts, "h9"])


@pytest.mark.parametrize(
    "make, given, kind",
    [
        (Network.from_measurement, "net.npz", "a rankopt.Measurement (rankopt.load_measurement"),
        (Network.from_measurement, None, "a rankopt.Measurement"),
        (Network.from_measurement, np.zeros((2, 2)), "a rankopt.Measurement"),
        (Network.from_cloud, None, "a rankopt.Cloud"),
        (Network.from_cloud, "cloud.npz", "a rankopt.Cloud"),
    ],
)
def test_constructors_refuse_what_is_no_measurement_or_cloud(make, given, kind):
    """A path, an array or None is refused with the argument named (was an AttributeError)."""
    name = "measurement" if make == Network.from_measurement else "cloud"
    with pytest.raises(rankopt.RankoptInputError) as exc:
        make(given)
    assert str(exc.value).startswith(f"`{name}` must be {kind}")
    assert f"got {type(given).__name__} " in str(exc.value)
