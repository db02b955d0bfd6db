"""Probe schedules: round robin, bandwidth slots and the inferred link hierarchy."""

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rankopt
from rankopt import RankoptInputError
from rankopt.probe._topology import host_labels, infer_link_levels, pair_links
from rankopt.probe.schedule import bandwidth_slots, partner_table, round_robin


def _same_partition(a, b) -> bool:
    """Two label arrays describe the same grouping (up to renaming)."""
    return (
        len(set(zip(a.tolist(), b.tolist(), strict=True)))
        == len(set(a.tolist()))
        == len(set(b.tolist()))
    )


@given(st.integers(1, 64))
def test_round_robin_is_a_proper_round_robin(n):
    rounds = round_robin(n)
    expected_rounds = 0 if n < 2 else (n - 1 if n % 2 == 0 else n)
    assert len(rounds) == expected_rounds
    seen = []
    for pairs in rounds:
        procs = [p for pair in pairs for p in pair]
        assert len(procs) == len(set(procs)), "a process meets two partners in one round"
        assert len(pairs) == n // 2, "every round has n // 2 pairs (one bye for odd n)"
        assert all(0 <= a < b < n for a, b in pairs)
        seen.extend(pairs)
    assert sorted(seen) == list(combinations(range(n), 2)), "every pair exactly once"
    assert round_robin(n) == rounds, "deterministic"


@given(st.integers(2, 64))
def test_partner_table_matches_rounds(n):
    rounds = round_robin(n)
    table = partner_table(rounds, n)
    assert table.shape == (len(rounds), n)
    for r, pairs in enumerate(rounds):
        for a, b in pairs:
            assert table[r, a] == b and table[r, b] == a
        assert (table[r] == -1).sum() == n % 2
    # an odd n gives every process exactly one bye
    if n % 2:
        assert sorted(np.nonzero(table == -1)[1].tolist()) == list(range(n))


def test_round_robin_small_cases():
    assert round_robin(1) == []
    assert round_robin(2) == [[(0, 1)]]
    assert round_robin(4) == [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]


@pytest.mark.parametrize("bad", [0, -3, 2.5, "4", True])
def test_round_robin_rejects_bad_n(bad):
    with pytest.raises(RankoptInputError, match="`n` must be"):
        round_robin(bad)


def _check_slots(slots, n, levels, concurrency):
    seen = [pair for slot in slots for pair in slot]
    assert sorted(seen) == list(combinations(range(n), 2)), "every pair exactly once"
    for slot in slots:
        procs = [p for pair in slot for p in pair]
        assert len(procs) == len(set(procs))
        load = {}
        for a, b in slot:
            for link in pair_links(levels, a, b):
                load[link] = load.get(link, 0) + 1
        assert max(load.values()) <= concurrency, "a suspected link is overloaded"


@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 2),
    st.integers(1, 3),
    st.integers(0, 2**16),
)
def test_bandwidth_slots_never_share_a_link(pods, racks, hosts, per_host, conc, seed):
    if pods * racks * hosts * per_host < 2:
        return
    cloud = rankopt.synthetic_cloud(
        pods, racks, hosts, per_host, congested=0.0, shuffle=True, rng=seed
    )
    levels = infer_link_levels(cloud.latency, cloud.hosts)
    slots = bandwidth_slots(cloud.latency, cloud.hosts, concurrency=conc)
    _check_slots(slots, cloud.n, levels, conc)


def test_bandwidth_slots_cost_extremes():
    n = 8
    lat = np.full((n, n), 1e-5)
    one_host = bandwidth_slots(lat, ["h"] * n)
    assert len(one_host) == n * (n - 1) // 2, "one host: everything shares the bus"
    flat = bandwidth_slots(lat, [f"h{i}" for i in range(n)])
    assert len(flat) == n * (n - 1) // 2, "no tier seen: the hosts may share a core"
    flat4 = bandwidth_slots(lat, [f"h{i}" for i in range(n)], concurrency=n // 2)
    assert len(flat4) == n - 1, "core shared by n / 2 pairs: the round-robin rounds"
    assert all(len(s) == n // 2 for s in flat4)
    # 2 pods of 2 racks of 2 hosts: pairs inside different racks run together
    near, mid, far = 1e-5, 3e-5, 9e-5
    pod = np.arange(n) // 4
    rack = np.arange(n) // 2
    lat = np.where(pod[:, None] == pod[None], mid, far)
    lat = np.where(rack[:, None] == rack[None], near, lat)
    slots = bandwidth_slots(lat, [f"h{i}" for i in range(n)])
    assert 16 <= len(slots) < n * (n - 1) // 2  # the 16 cross-pod pairs one at a time
    for slot in slots:
        assert sum(pod[a] != pod[b] for a, b in slot) <= 1
        assert all(sum(rack[a] != rack[b] and pod[a] == p for a, b in slot) <= 1 for p in (0, 1))
    assert max(len(s) for s in slots) == 3  # e.g. a cross-pod pair beside two in-rack pairs


def test_bandwidth_slots_separate_cross_rack_flows():
    # 2 racks of 2 hosts: two flows crossing the rack boundary must never run together
    cloud = rankopt.synthetic_cloud(
        1, 2, 2, 1, noise=0.0, asymmetry=0.0, congested=0.0, shuffle=False
    )
    levels = infer_link_levels(cloud.latency, cloud.hosts)
    rack = levels[1]
    for slot in bandwidth_slots(cloud.latency, cloud.hosts):
        crossing = [p for p in slot if rack[p[0]] != rack[p[1]]]
        assert len(crossing) <= 1


def test_bandwidth_slots_rejects_bad_concurrency():
    with pytest.raises(RankoptInputError, match="`concurrency` must be at least 1"):
        bandwidth_slots(np.zeros((2, 2)), ["a", "b"], concurrency=0)


def test_infer_link_levels_recovers_the_hierarchy():
    cloud = rankopt.synthetic_cloud(2, 3, 4, 2, congested=0.0, rng=7)
    levels = infer_link_levels(cloud.latency, cloud.hosts)
    assert len(levels) == 3
    for inferred, true in zip(levels, cloud.groups, strict=True):
        assert _same_partition(inferred, np.asarray(true))


def test_infer_link_levels_flat_and_small():
    lat = np.full((6, 6), 2e-5)
    assert len(infer_link_levels(lat, [f"h{i}" for i in range(6)])) == 1
    assert infer_link_levels(lat[:2, :2], ["a", "b"])[0].tolist() == [0, 1]


def test_host_labels_and_pair_links():
    assert host_labels(["x", "y", "x"]).tolist() == [0, 1, 0]
    levels = [np.array([0, 0, 1, 2]), np.array([0, 0, 0, 1])]
    assert pair_links(levels, 0, 1) == [(0, 0, 1)]
    assert pair_links(levels, 0, 2) == [(0, 0, 0), (0, 1, 0)]
    assert pair_links(levels, 0, 3) == [(0, 0, 0), (0, 2, 0), (1, 0, 0), (1, 1, 0), (2, 0, 0)]
    assert pair_links(levels, 0, 2) == [(0, 0, 0), (0, 1, 0)]


# -- the linear bandwidth schedule and the plan ------------------------------------------
def _run_planner(latency, hosts, bandwidth):
    from rankopt.probe.linear import LinearPlanner

    planner = LinearPlanner(latency, hosts, infer_link_levels(latency, hosts))
    while (stage := planner.next_stage()) is not None:
        for slot in stage:
            procs = [p for pair in slot for p in pair]
            assert len(procs) == len(set(procs)), "a process in two transfers of one slot"
        planner.record(
            {(a, b): (bandwidth[a, b], bandwidth[b, a], 0.0, 0.0) for s in stage for a, b in s}
        )
    return planner


@pytest.mark.parametrize(("hosts", "per_host"), [(2, 1), (7, 1), (16, 1), (16, 4), (33, 2)])
def test_linear_schedule_size_flat_network(hosts, per_host):
    from rankopt.probe.plan import plan_probe

    n = hosts * per_host
    names = [f"h{i // per_host}" for i in range(n)]
    plan = plan_probe(np.full((n, n), 3e-5), names, mode="linear", latency_mode="all-pairs")
    found = [s for name, s in plan.bandwidth_stages if name == "discovery"]
    # star H - 1 (+1 for the bus of the star's own host), then the test of the other
    # m = H - 1 hosts: every pair up to 8, else a star and 4 (2 beyond 32) matchings of
    # the rest; one uplink test per shared host, one interference slot
    m = hosts - 1
    test = m * (m - 1) // 2 if m <= 8 else (m - 1) + (4 if m <= 32 else 2) * ((m - 1) // 2)
    assert found[0] <= hosts - 1 + (per_host > 1)
    assert sum(found) <= hosts - 1 + (per_host > 1) + test
    assert plan.bandwidth_slots <= sum(found) + (hosts if per_host > 1 else 0) + 1
    if hosts > 9:
        assert plan.bandwidth_slots <= 4 * hosts + (hosts if per_host > 1 else 0) + 1
    assert plan.latency_rounds == (n - 1 if n % 2 == 0 else n)


def test_linear_schedule_with_latency_tiers_runs_racks_side_by_side():
    from rankopt.probe.plan import plan_probe

    cloud = rankopt.synthetic_cloud(2, 4, 4, 2, congested=0.0, shuffle=True, rng=3)
    plan = plan_probe(cloud.latency, cloud.hosts, mode="linear")
    all_pairs = plan_probe(cloud.latency, cloud.hosts, mode="all-pairs")
    assert plan.levels == [32, 8, 2]
    # racks of 4 hosts discover side by side: a star of 3, not 31
    assert plan.bandwidth_stages[0][1] < 16
    assert plan.bandwidth_slots < all_pairs.bandwidth_slots / 4
    # bound: 2 t (H_d - 1) + 1 + sum_P (c_P - 1 + c_P // 2) + G + 1 with t = 1
    reps = 2 * (4 - 1 + 2) + (2 - 1 + 1)
    assert plan.bandwidth_slots <= 2 * 3 + 1 + reps + (32 + 8 + 2) + 1


@pytest.mark.parametrize("seed", [1, 2])
def test_linear_planner_finds_bandwidth_tiers_latency_hides(seed):
    cloud = rankopt.synthetic_cloud(2, 3, 4, 2, congested=0.0, noise=0.02, rng=seed)
    flat = np.full((cloud.n, cloud.n), 3e-5)
    planner = _run_planner(flat, cloud.hosts, cloud.bandwidth)
    bw, _, counts, info = planner.result()
    assert len(info["groups"]) == 3
    for found, true in zip(info["groups"], cloud.groups, strict=True):
        assert _same_partition(np.array(found), np.asarray(true))
    off = ~np.eye(cloud.n, dtype=bool)
    assert counts.sum() < 0.3 * off.sum()  # most entries filled, not measured
    measured = counts > 0
    np.testing.assert_array_equal(bw[measured], cloud.bandwidth[measured])
    rel = np.abs(bw[off] - cloud.bandwidth[off]) / cloud.bandwidth[off]
    assert np.median(rel) < 0.05 and rel.max() < 0.25  # the fill: group-pair rates
    net = rankopt.Network.from_matrices(flat, bw, hosts=cloud.hosts)
    assert [len(s) for s in net.level_sizes()] == [24, 6, 2]


def _racks_behind_noisy_latency(seed, sizes, sigma):
    """Racks that differ only in bandwidth, launched at random, behind latency noise."""
    gen = np.random.default_rng(seed)
    rack = gen.permutation(np.repeat(np.arange(len(sizes)), sizes))
    n = rack.size
    bw = np.where(rack[:, None] == rack[None, :], 120e6, 24e6)
    lat = 250e-6 * np.exp(sigma * gen.standard_normal((n, n)))
    lat = np.minimum(lat, lat.T)
    np.fill_diagonal(lat, 0.0)
    return lat, bw, rack, [f"h{i}" for i in range(n)]


@pytest.mark.parametrize(
    ("seed", "sizes", "sigma"),
    [
        (6, (4, 4, 4), 0.4),  # two matchings of the 8 slow hosts paired only across racks
        (16, (4, 4, 4), 0.4),
        (75, (3, 3, 3, 3), 0.05),  # the 9 slow hosts: every matched pair across racks
        (23, (4, 4, 4), 0.4),  # noise made a latency tier: 11 "groups", one of 2 hosts
        (2, (5, 5), 0.8),  # a latency tier of 9 + 1 hosts; the representatives' star saw it
        (118, (2, 2, 2, 2, 2), 0.4),  # a lone host split off by latency
    ],
)
def test_linear_planner_finds_racks_behind_noisy_latency(seed, sizes, sigma):
    lat, bw, rack, hosts = _racks_behind_noisy_latency(seed, sizes, sigma)
    info = _run_planner(lat, hosts, bw).result()[3]
    assert any(_same_partition(np.array(g), rack) for g in info["groups"]), info["groups"]


def test_linear_planner_drops_latency_groups_the_bandwidth_contradicts():
    # racks of 4 launched at random; latency says hosts 0 and 11 are close (noise)
    rack = np.array([1, 0, 2, 0, 0, 2, 1, 2, 1, 2, 0, 1])
    bw = np.where(rack[:, None] == rack[None, :], 120e6, 24e6)
    lat = np.full((12, 12), 280e-6)
    lat[0, 11] = lat[11, 0] = 90e-6
    np.fill_diagonal(lat, 0.0)
    hosts = [f"h{i}" for i in range(12)]
    assert len(infer_link_levels(lat, hosts)) == 2  # a latency tier, 3x apart
    planner = _run_planner(lat, hosts, bw)
    info = planner.result()[3]
    assert info["latency_groups_used"] is False
    assert _same_partition(np.array(info["groups"][-1]), rack)
    # a latency tier the bandwidth agrees with is kept: racks side by side
    lat = np.where(rack[:, None] == rack[None, :], 20e-6, 60e-6)
    np.fill_diagonal(lat, 0.0)
    info = _run_planner(lat, hosts, bw).result()[3]
    assert info["latency_groups_used"] is True
    assert _same_partition(np.array(info["groups"][-1]), rack)


@pytest.mark.parametrize("seed", [268, 84, 164, 216])
def test_linear_planner_discards_side_by_side_rates_of_contradicted_groups(seed):
    """Transfers that ran side by side on a rack uplink latency did not show share it."""
    from rankopt.probe.linear import LinearPlanner

    lat, _, rack, hosts = _racks_behind_noisy_latency(seed, (4, 4, 4), 0.5)
    lat *= 280 / 250
    levels = infer_link_levels(lat, hosts)
    planner = LinearPlanner(lat, hosts, levels)
    shared = 0
    while (stage := planner.next_stage()) is not None:
        rates = {}
        for slot in stage:
            # a rack's uplink is shared by every transfer of the slot that crosses it
            users = np.zeros(3)
            for a, b in slot:
                if rack[a] != rack[b]:
                    users[[rack[a], rack[b]]] += 1
            for a, b in slot:
                r = 120e6 if rack[a] == rack[b] else 24e6 / max(users[rack[a]], users[rack[b]])
                shared += r < 24e6
                rates[(a, b)] = (r, r, 0.0, 0.0)
        planner.record(rates)
    info = planner.result()[3]
    if len(levels) > 1:  # noise made latency tiers: side by side transfers shared uplinks
        assert shared > 0 and info["latency_groups_used"] is False
    assert [max(g) + 1 for g in info["groups"]] == [12, 3]
    assert _same_partition(np.array(info["groups"][-1]), rack)


def test_uplink_capacity_from_concurrent_round_trips():
    from rankopt.probe.linear import LinearPlanner

    hosts = [f"h{i}" for i in range(8)]
    planner = LinearPlanner(np.full((8, 8), 3e-5), hosts, [np.arange(8)])
    flows = [(0, 4), (1, 5), (2, 6), (3, 7)]
    alone = np.full((8, 8), 24e6)
    # four flows through a 24 MB/s uplink, their round trips out of step: 10-11 MB/s each
    slowed = [(10.5e6, 10e6, 0.0, 0.0), (11e6, 10e6, 0.0, 0.0)] * 2
    assert planner._capacity(flows, slowed, alone) == pytest.approx((24e6, 24e6))
    # a wide uplink: each flow keeps its own rate, the capacity is at least their sum
    wide = planner._capacity(flows, [(120e6, 118e6, 0.0, 0.0)] * 4, np.full((8, 8), 120e6))
    assert wide == pytest.approx((480e6, 472e6))
    # contended but wider than one flow: half the sum
    got = [(60e6, 50e6, 0.0, 0.0)] * 4
    assert planner._capacity(flows, got, np.full((8, 8), 120e6)) == pytest.approx((120e6, 120e6))
    # another tenant loads the uplink out of the group: 10 of 24 MB/s are left that way,
    # as the transfers alone from hosts 0-3 to hosts 4-7 showed
    alone = np.full((8, 8), 24e6)
    alone[:4, 4:] = 10e6
    loaded = [(4.5e6, 11e6, 0.0, 0.0)] * 4
    out, back = planner._capacity(flows, loaded, alone)
    assert out == pytest.approx(10e6) and back == pytest.approx(24e6)


def test_fill_bandwidth_is_the_widest_path():
    from rankopt.probe.linear import fill_bandwidth

    edges = {(0, 1): (10.0, 1.0), (2, 3): (10.0, 1.0), (1, 2): (2.0, 0.5), (0, 3): (1.0, 0.1)}
    rate, spread, measured = fill_bandwidth(4, edges)
    assert rate[0, 2] == rate[1, 3] == 2.0  # through (1, 2)
    assert rate[0, 3] == 1.0 and measured[0, 3] and not measured[0, 2]
    assert spread[0, 2] == 0.5
    np.testing.assert_array_equal(rate, rate.T)


def test_plan_rejects_bad_input():
    from rankopt.probe.plan import plan_probe

    with pytest.raises(RankoptInputError, match="`mode` must be"):
        plan_probe(np.zeros((2, 2)), ["a", "b"], mode="some")
    with pytest.raises(RankoptInputError, match="`link_rate` must be a positive"):
        plan_probe(np.zeros((2, 2)), ["a", "b"], link_rate=0)
    with pytest.raises(RankoptInputError, match="`hosts` must name"):
        plan_probe(np.zeros((3, 3)), ["a", "b"])


def test_cli_plan_json(tmp_path, capsys):
    import json

    from rankopt.cli import main

    hosts = tmp_path / "hosts.txt"
    hosts.write_text("".join(f"node{i}\n" for i in range(8)))
    lat = tmp_path / "lat.npy"
    np.save(lat, np.full((32, 32), 2e-5))
    argv = ["probe", "--plan", "-n", "32", "--hosts", str(hosts), "--latency", str(lat)]
    assert main([*argv, "--bandwidth-mode", "linear", "--link-rate", "1.25e9", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert {"latency_rounds", "bandwidth_slots", "estimated_seconds"} <= set(plan)
    assert plan["n"] == 32 and plan["hosts"] == 8 and plan["latency_rounds"] == 31
    assert plan["mode"] == "linear" and plan["link_rate"] == 1.25e9
    assert main([*argv, "--repeats", "20"]) == 0
    text = capsys.readouterr().out
    assert "bandwidth mode sampled" in text and "estimated" in text
    assert main(["probe", "--plan", "--no-bandwidth", "-n", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bandwidth_slots"] == 0
    assert main(["probe", "--plan"]) == 1
    assert "--plan needs -n N or --hosts FILE" in capsys.readouterr().err
    assert main(["probe", "-o", str(tmp_path / "x.npz")]) == 1
    assert "--backend and -o/--output are required" in capsys.readouterr().err


def test_cli_plan_hosts_file_errors_name_the_file(tmp_path, capsys):
    """One host name alone is one process, said so (was "got -n 1" without any -n); a line
    that is no host name is refused with the file named."""
    from rankopt.cli import main

    one, bad = tmp_path / "one.txt", tmp_path / "bad.txt"
    one.write_text("node0\n")
    bad.write_text("node0\nnode 1\n")
    assert main(["probe", "--plan", "--hosts", str(one)]) == 1
    err = capsys.readouterr().err
    assert f"--hosts {one}: 1 host name, 1 process; the probe needs at least 2" in err
    assert "-n 1" not in err
    assert main(["probe", "--plan", "--hosts", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"(the lines of '{bad}') must hold host names; hosts[1] is 'node 1'" in err


@pytest.mark.parametrize("argv", [["-n", "4", "--ranks-per-host", "4"], ["-n", "3", "--hosts"]])
def test_cli_plan_of_processes_on_one_host(tmp_path, capsys, argv):
    """Every process on one host is a job to plan (was an error about a (1, 1) --latency
    the user never gave)."""
    import json

    from rankopt.cli import main

    if argv[-1] == "--hosts":
        (tmp_path / "one.txt").write_text("node0\n")
        argv = [*argv, str(tmp_path / "one.txt")]
    assert main(["probe", "--plan", *argv, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["hosts"] == 1 and plan["n"] == int(argv[1])


def test_cli_plan_with_a_bandwidth_matrix(tmp_path, capsys):
    import json

    from rankopt.cli import main

    # racks the latency does not show: the linear plan reacts to the rates' tiers
    lat, bw, rack, hosts = _racks_behind_noisy_latency(6, (4, 4, 4), 0.05)
    (tmp_path / "hosts.txt").write_text("".join(h + "\n" for h in hosts))
    np.save(tmp_path / "lat.npy", lat)
    np.save(tmp_path / "bw.npy", bw)
    argv = ["probe", "--plan", "--hosts", str(tmp_path / "hosts.txt"), "--latency"]
    argv += [str(tmp_path / "lat.npy"), "--bandwidth-mode", "linear", "--json"]
    assert main([*argv, "--link-rate", "120e6"]) == 0
    uniform = json.loads(capsys.readouterr().out)
    assert main([*argv, "--bandwidth-matrix", str(tmp_path / "bw.npy")]) == 0
    tiers = json.loads(capsys.readouterr().out)
    assert tiers["levels"] == [12, 3] and uniform["levels"] == [12]
    assert tiers["bandwidth_slots"] > uniform["bandwidth_slots"]
    assert tiers["estimated_seconds"] > uniform["estimated_seconds"]  # slower links, more slots
    bad = bw.copy()
    bad[0, 1] = 0.0
    np.save(tmp_path / "bad.npy", bad)
    assert main([*argv, "--bandwidth-matrix", str(tmp_path / "bad.npy")]) == 1
    assert "rates must be positive bytes/s; [0, 1] is 0.0" in capsys.readouterr().err


def _timed_measurement(n, per_step, *, hosts_of=2):
    """A probe result whose phases took the exchange time plus ``per_step`` a step."""
    from rankopt.probe.plan import plan_probe

    hosts = tuple(f"h{i // hosts_of}" for i in range(n))
    lat = np.full((n, n), 2e-5)
    np.fill_diagonal(lat, 0.0)
    bw = np.full((n, n), 1e9)
    np.fill_diagonal(bw, 0.0)
    base = plan_probe(lat, hosts, mode="all-pairs", link_rate=1e9, step_overhead=0.0)
    lat_s = base.latency_seconds + base.latency_rounds * per_step
    bw_s = base.estimated_seconds - base.latency_seconds + base.bandwidth_slots * per_step
    params = {
        "bandwidth_mode": "all-pairs",
        "phase_seconds": [
            ["latency", base.latency_rounds, lat_s],
            ["bandwidth", base.bandwidth_slots, bw_s],
        ],
    }
    return rankopt.Measurement(lat, bw, hosts, parameters=params)


@pytest.mark.parametrize("per_step", [0.0, 2e-3, 0.05])
def test_calibrated_overhead_recovers_the_per_step_cost(per_step):
    from rankopt.probe.plan import calibrate_step_overhead

    m = _timed_measurement(8, per_step)
    assert calibrate_step_overhead(m) == pytest.approx(per_step, rel=1e-6, abs=1e-9)


def test_calibrate_needs_phase_times():
    from rankopt.probe.plan import calibrate_step_overhead

    lat = np.full((4, 4), 1e-5)
    m = rankopt.Measurement(lat, None, ("a", "b", "c", "d"))
    with pytest.raises(RankoptInputError, match="no phase times"):
        calibrate_step_overhead(m)


def test_cli_plan_calibrate_and_step_overhead(tmp_path, capsys):
    import json

    from rankopt.cli import main

    m = _timed_measurement(8, 0.01)
    path = tmp_path / "probe.npz"
    m.save(path)
    argv = ["probe", "--plan", "-n", "64", "--ranks-per-host", "2", "--json"]
    assert main(argv) == 0
    default = json.loads(capsys.readouterr().out)["estimated_seconds"]
    assert main([*argv, "--calibrate", str(path)]) == 0
    calibrated = json.loads(capsys.readouterr().out)
    assert main([*argv, "--step-overhead", "0.01"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert calibrated["estimated_seconds"] == pytest.approx(given["estimated_seconds"], rel=1e-6)
    steps = given["latency_rounds"] + given["bandwidth_slots"]
    assert given["estimated_seconds"] - default > 0.01 * steps * 0.9
    assert main([*argv, "--step-overhead", "-1"]) == 1
    assert "--step-overhead must be seconds >= 0" in capsys.readouterr().err
    bare = tmp_path / "old.npz"
    rankopt.Measurement(np.full((4, 4), 1e-5), None, tuple("abcd")).save(bare)
    assert main([*argv, "--calibrate", str(bare)]) == 1
    assert "no phase times" in capsys.readouterr().err


def test_auto_bandwidth_mode_samples_up_to_32_hosts():
    # auto is the sampled schedule up to 32 hosts; planned without a bandwidth matrix
    # no group shows, and it is every pair: the most it takes
    from rankopt.probe._common import AUTO_ALL_PAIRS_MAX_HOSTS, ProbeParams
    from rankopt.probe.plan import plan_probe

    assert ProbeParams().bandwidth_mode == "auto" and AUTO_ALL_PAIRS_MAX_HOSTS == 32
    for hosts in (32, 33):
        names = [f"h{i}" for i in range(hosts)]
        lat = np.full((hosts, hosts), 3e-5)
        auto = plan_probe(lat, names)
        explicit = plan_probe(lat, names, mode="sampled" if hosts <= 32 else "linear")
        assert auto.bandwidth_slots == explicit.bandwidth_slots
        assert auto.bandwidth_stages == explicit.bandwidth_stages
    assert plan_probe(lat[:32, :32], names[:32]).bandwidth_slots == 32 * 31 // 2
    assert plan_probe(lat[:32, :32], names[:32], mode="all-pairs").bandwidth_slots == 496


# -- the sampled schedule ----------------------------------------------------------------


def _run_sampled(rate, hosts=None, **kw):
    """Drive a SampledPlanner on the model ``rate``: its result, its stages' slots."""
    from rankopt.probe.schedule import SampledPlanner

    n = len(rate)
    hosts = [f"h{i}" for i in range(n)] if hosts is None else hosts
    planner = SampledPlanner(hosts, **kw)
    stages = []
    while (stage := planner.next_stage()) is not None:
        stages.append(stage)
        ran = np.zeros((n, n), dtype=np.int64)
        for slot in stage:
            for a, b in slot:
                assert not ran[a, b], "a pair measured twice in one stage"
                ran[a, b] = ran[b, a] = 1
        planner.record(np.where(ran > 0, rate, 0.0), np.where(ran > 0, 0.01 * rate, 0.0), ran)
    return planner.result(), stages, planner


def _racks(sizes, inside=100e6, across=25e6):
    rack = np.repeat(np.arange(len(sizes)), sizes)
    return rack, np.where(rack[:, None] == rack[None, :], inside, across)


@pytest.mark.parametrize("sizes", [(4, 4, 4), (2, 4, 3), (3, 3, 3), (5, 2, 6, 3)])
def test_sampled_schedule_finds_the_racks_and_fills_each_block_from_its_pairs(sizes):
    rack, rate = _racks(sizes)
    n = rate.shape[0]
    (bw, spread, counts, found), stages, planner = _run_sampled(rate)
    off = ~np.eye(n, dtype=bool)
    np.testing.assert_allclose(bw[off], rate[off])  # measured, or filled from alike pairs
    # the racks as the stars found them (labels in order of first appearance)
    assert found["sampled_groups"] is not None
    assert (
        np.array(found["sampled_groups"])[:, None] == np.array(found["sampled_groups"])
    ).tolist() == (rack[:, None] == rack).tolist()
    measured = (counts > 0) & (counts.T > 0)
    assert measured[(rack[:, None] == rack) & off].all()  # every pair inside a rack
    for g in range(len(sizes)):
        for h in range(len(sizes)):
            if g == h:
                continue
            block = measured[np.ix_(rack == g, rack == h)]
            want = min(sizes[g] * sizes[h], max(8, sizes[g], sizes[h]))
            # the stars' pairs count; a host no star reached gets one more
            assert want <= block.sum() <= want + max(sizes), (g, h, block.sum())
            assert block.any(axis=1).all() and block.any(axis=0).all()  # every host in one
    assert found["filled_pairs"] == (off & ~measured).sum() // 2
    assert [name for name, _ in planner.stages][-1] == "blocks"
    # pairs that share no rack run side by side: fewer slots than pairs after the stars
    blocks = stages[-1]
    assert len(blocks) < sum(len(s) for s in blocks) or len(sizes) < 3
    for slot in blocks:  # never two pairs through one rack, nor two across racks
        touched = [int(rack[a]) for a, b in slot] + [
            int(rack[b]) for a, b in slot if rack[b] != rack[a]
        ]
        assert len(touched) == len(set(touched)), slot


def test_sampled_schedule_measures_every_pair_where_no_groups_show():
    from rankopt.probe.schedule import STAR_GAP

    rng = np.random.default_rng(3)
    rate = 50e6 * np.exp(rng.normal(0.0, 0.15, (9, 9)))  # flat within noise
    (bw, _, counts, found), stages, planner = _run_sampled(rate)
    off = ~np.eye(9, dtype=bool)
    assert found["sampled_groups"] is None and found["filled_pairs"] == 0
    assert ((counts > 0) & (counts.T > 0))[off].all()
    np.testing.assert_allclose(bw[off], rate[off])
    assert [name for name, _ in planner.stages] == ["stars", "all-pairs"]
    assert all(len(slot) == 1 for stage in stages for slot in stage)  # one at a time
    assert STAR_GAP >= 1.5
    # a rack of one host: its star shows no split either, and the rest is all pairs
    rack, rate = _racks((3, 1, 3))
    (bw, _, counts, found), _, planner = _run_sampled(rate)
    assert found["sampled_groups"] is None and [s for s, _ in planner.stages][-1] == "all-pairs"
    np.testing.assert_allclose(bw[~np.eye(7, dtype=bool)], rate[~np.eye(7, dtype=bool)])


def test_sampled_schedule_measures_a_block_in_full_where_its_rates_differ_twofold():
    # one host of rack 1 reaches rack 0 at a third of the others: that block, sampled,
    # reads apart and is measured in full; a host the centre reads as fast as its own
    # rack (a burst) joins the centre's group, and its pairs come out as measured
    rack, rate = _racks((4, 4, 4))
    slow = 5
    rate[slow, rack == 0] = rate[rack == 0, slow] = 25e6 / 3
    (bw, _, counts, found), _, planner = _run_sampled(rate)
    off = ~np.eye(12, dtype=bool)
    np.testing.assert_allclose(bw[off], rate[off])
    measured = (counts > 0) & (counts.T > 0)
    assert measured[np.ix_(rack == 0, rack == 1)].all()
    assert not measured[np.ix_(rack == 0, rack == 2)].all()
    assert "rest" in [name for name, _ in planner.stages]
    rack, rate = _racks((4, 4, 4))
    rate[0, 4] = rate[4, 0] = 100e6  # the centre's star reads host 4 as a rack mate
    (bw, _, counts, found), _, _ = _run_sampled(rate)
    np.testing.assert_allclose(bw[off], rate[off])
    assert found["sampled_groups"][4] == found["sampled_groups"][0]


def test_sampled_schedule_on_hosts_of_several_processes():
    # two processes per host, racks of two hosts: a block's sample reaches every host
    hosts = [f"h{i // 2}" for i in range(12)]
    rack = np.arange(12) // 4
    rate = np.where(rack[:, None] == rack[None, :], 100e6, 25e6)
    (bw, _, counts, found), _, _ = _run_sampled(rate, hosts)
    off = ~np.eye(12, dtype=bool)
    np.testing.assert_allclose(bw[off], rate[off])
    measured = (counts > 0) & (counts.T > 0)
    assert measured[(rack[:, None] == rack) & off].all()
    host = np.arange(12) // 2
    for g, h in ((0, 1), (0, 2), (1, 2)):
        block = measured[np.ix_(rack == g, rack == h)]
        assert block.sum() == 8
        by_host = [block[host[rack == g] == k].any() for k in np.unique(host[rack == g])]
        assert all(by_host)


def test_plan_of_the_sampled_schedule_follows_the_given_bandwidth():
    from rankopt.probe.plan import plan_probe

    rack, rate = _racks((4, 4, 4))
    names = [f"h{i}" for i in range(12)]
    lat = np.full((12, 12), 3e-5)
    full = plan_probe(lat, names, mode="all-pairs", bandwidth=rate)
    sampled = plan_probe(lat, names, bandwidth=rate)
    assert sampled.mode == "sampled" and sampled.levels == [12, 3]
    names = [s for s, _ in sampled.bandwidth_stages]
    assert names[0] == "stars" and "blocks" in names and "all-pairs" not in names
    assert sampled.bandwidth_slots < full.bandwidth_slots
    assert sampled.bandwidth_seconds < 0.75 * full.bandwidth_seconds


def _reference_uplink_tests(planner):
    """The uplink tests as first written: a scan of every label per group and flow depth."""
    levels = planner.groups
    tests = []
    for k, lab in enumerate(levels):
        parent = levels[k + 1] if k + 1 < len(levels) else np.zeros(planner.n, dtype=np.int64)
        for g in np.unique(lab):
            inside = lab == g
            sib = (parent == parent[inside][0]) & ~inside
            if k == 0:
                sources = np.flatnonzero(inside).tolist()
            else:
                child = levels[k - 1]
                sources = [
                    int(np.flatnonzero(inside & (child == c))[0]) for c in np.unique(child[inside])
                ]
            dests = []
            for depth in range(planner.flows):
                for s in np.unique(lab[sib]):
                    members = np.flatnonzero(lab == s)
                    if depth < members.size:
                        dests.append(int(members[depth]))
            f = min(planner.flows, len(sources), len(dests))
            if f >= 2:
                tests.append((k, int(g), [(sources[i], dests[i]) for i in range(f)]))
    return tests


def _reference_representatives(planner):
    """The representative host pairs as first written (and their groups)."""
    from rankopt.probe.linear import _matchings

    pairs, groups = [], []
    nh = planner.n_hosts
    for k, lab in enumerate(planner.host_levels):
        parent = (
            planner.host_levels[k + 1] if k + 1 < len(planner.host_levels) else np.zeros(nh, int)
        )
        for p in np.unique(parent):
            kids = [
                int(np.flatnonzero((lab == g) & (parent == p))[0])
                for g in np.unique(lab[parent == p])
            ]
            if len(kids) < 2:
                continue
            star = [(kids[0], h) for h in kids[1:]]
            extra = [pr for pr in _matchings(kids[1:]) if pr not in star]
            pairs.extend(star + extra)
            groups.append([(min(a, b), max(a, b)) for a, b in star + extra])
    return pairs, groups


def _random_levels(rng, n_items, depth, nested):
    """``depth`` label arrays over ``n_items``: unequal groups, scattered label values."""
    levels = []
    lab = np.arange(n_items)
    for _ in range(depth):
        if nested:  # merge the current groups into fewer, of unequal sizes
            distinct = np.unique(lab)
            up = rng.integers(0, max(1, distinct.size // 3), size=distinct.size)
            lab = up[np.searchsorted(distinct, lab)]
        else:
            lab = rng.integers(0, max(1, n_items // 4), size=n_items)
        levels.append((lab * 7 + 3).astype(np.int64))  # labels need not be 0..G-1
    return levels


@pytest.mark.parametrize("seed", range(12))
def test_linear_planner_uplinks_and_representatives_match_the_scan(seed):
    from rankopt.probe.linear import LinearPlanner, pack

    rng = np.random.default_rng(seed)
    n_hosts = int(rng.integers(2, 40))
    host_of = np.sort(rng.integers(0, n_hosts, size=int(rng.integers(n_hosts, 4 * n_hosts))))
    host_of = np.unique(host_of, return_inverse=True)[1]
    host_of = host_of[rng.permutation(host_of.size)]  # a shuffled launch order
    hosts = [f"h{k}" for k in host_of]
    n = len(hosts)
    nested = seed % 4 != 3
    planner = LinearPlanner(
        np.full((n, n), 3e-5), hosts, [host_of], uplink_flows=int(rng.integers(2, 6))
    )
    planner.host_levels = _random_levels(rng, planner.n_hosts, int(rng.integers(1, 4)), nested)
    above = [lv[planner.host_of] for lv in planner.host_levels]
    planner.groups = [planner.host_of.astype(np.int64), *above] if nested else above

    assert planner._representatives() == _reference_representatives(planner)[0]
    assert planner._rep_groups == _reference_representatives(planner)[1]
    slots = planner._uplink_stage()
    expected = _reference_uplink_tests(planner)
    assert planner.uplink_tests == expected
    keys = [
        list({key for a, b in flows for key in planner._known_keys(planner.groups, a, b)})
        for _, _, flows in expected
    ]
    assert slots == pack([flows for _, _, flows in expected], keys)


@given(st.integers(1, 70))
def test_round_partners_is_a_row_of_the_partner_table(n):
    from rankopt.probe.schedule import round_partners

    rounds = round_robin(n)
    table = partner_table(rounds, n)
    for r in range(len(rounds)):
        np.testing.assert_array_equal(round_partners(n, r), table[r])


def test_bandwidth_slots_do_not_trust_a_latency_group_inside():
    # one VM reads slow to everybody (a congested VM, or noise): latency splits it off,
    # but the other hosts' racks may be bandwidth-only, so no two of their pairs run together
    n = 7
    lat = np.full((n, n), 2e-5)
    lat[3, :] = lat[:, 3] = 4e-4
    hosts = [f"h{i}" for i in range(n)]
    levels = infer_link_levels(lat, hosts)
    assert len(levels) == 2 and len(set(levels[1].tolist())) == 2  # the split latency shows
    slots = bandwidth_slots(lat, hosts)
    assert len(slots) == n * (n - 1) // 2
    # racks that latency does show: pairs inside one rack one at a time, racks side by side
    rack = np.arange(8) // 4
    lat = np.where(rack[:, None] == rack[None], 1e-5, 9e-5)
    slots = bandwidth_slots(lat, [f"h{i}" for i in range(8)])
    for slot in slots:
        for r in (0, 1):
            assert sum(rack[a] == r or rack[b] == r for a, b in slot) <= 1
    assert max(len(s) for s in slots) == 2  # one pair inside each rack
