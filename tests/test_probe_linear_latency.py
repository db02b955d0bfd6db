"""The linear latency phase: its schedule, its groups, its fill, its plan and its simulation."""

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankopt.probe._common import ProbeParams, resolve_latency_mode
from rankopt.probe._engine import MIN_PAIR_SAMPLES, PAIR_BUDGET, pair_budget_cut
from rankopt.probe.linear_latency import LatencyPlanner, async_makespan, stage_slots
from rankopt.probe.plan import estimate_linear_latency, plan_probe
from rankopt.probe.simulate import random_network, simulate_probe


def _run(planner, latency):
    """Feed the planner the model's latency, stage after stage; the stages' pairs."""
    stages = []
    while (slots := planner.next_stage()) is not None:
        a, b = planner.stage_pairs
        assert [p for slot in slots for p in slot] == list(zip(a.tolist(), b.tolist(), strict=True))
        stages.append((a.copy(), b.copy()))
        planner.record(np.column_stack([latency(a, b), latency(b, a), 0 * a, 0 * a]))
    return stages


def _same_partition(a, b):
    pairs = set(zip(np.asarray(a).tolist(), np.asarray(b).tolist(), strict=True))
    return len(pairs) == len(set(np.asarray(a).tolist())) == len(set(np.asarray(b).tolist()))


# -- the order of a stage ----------------------------------------------------------------


@settings(deadline=None, max_examples=40)
@given(st.integers(2, 30), st.integers(1, 120), st.integers(0, 2**31 - 1))
def test_stage_slots_never_put_a_process_twice_in_a_slot(n, m, seed):
    gen = np.random.default_rng(seed)
    a = gen.integers(0, n, m)
    b = (a + gen.integers(1, n, m)) % n
    slot = stage_slots(a, b)
    for s in np.unique(slot):
        procs = np.concatenate([a[slot == s], b[slot == s]])
        assert procs.size == np.unique(procs).size
    # first fit: a pair's slot is the lowest not taken by its processes' earlier pairs
    for k in range(m):
        earlier = {int(slot[j]) for j in range(k) if {a[j], b[j]} & {a[k], b[k]}}
        assert slot[k] == min(set(range(k + 1)) - earlier)


def _reference_makespan(a, b, slot, seconds, n):
    """Event by event: a pair starts when both processes reach it in their own order."""
    queue = {p: [k for k in np.argsort(slot, kind="stable") if p in (a[k], b[k])] for p in range(n)}
    clock = np.zeros(n)
    done = set()
    while len(done) < len(a):
        progressed = False
        for k in range(len(a)):
            if k in done:
                continue
            x, y = a[k], b[k]
            if queue[x][0] == k and queue[y][0] == k:
                end = max(clock[x], clock[y]) + seconds[k]
                clock[x] = clock[y] = end
                queue[x].pop(0)
                queue[y].pop(0)
                done.add(k)
                progressed = True
        assert progressed, "the slot order deadlocked"
    return float(clock.max(initial=0.0))


@settings(deadline=None, max_examples=40)
@given(st.integers(2, 12), st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_async_makespan_is_the_pairwise_event_simulation(n, m, seed):
    gen = np.random.default_rng(seed)
    a = gen.integers(0, n, m)
    b = (a + gen.integers(1, n, m)) % n
    slot = stage_slots(a, b)
    seconds = gen.exponential(1.0, m)
    got = async_makespan(a, b, slot, seconds, n)
    assert got == pytest.approx(_reference_makespan(a, b, slot, seconds, n))
    # never longer than the lockstep schedule (every slot as long as its slowest pair)
    lockstep = sum(seconds[slot == s].max() for s in np.unique(slot))
    assert got <= lockstep + 1e-12


def test_async_makespan_a_slow_pair_holds_back_only_its_chain():
    # process 0 and 1 meet in a slow pair; 2-3 and 4-5 never wait for it
    a, b = np.array([0, 2, 4, 2]), np.array([1, 3, 5, 4])
    slot = stage_slots(a, b)
    assert async_makespan(a, b, slot, np.array([10.0, 1.0, 1.0, 1.0]), 6) == 10.0
    lockstep = 10.0 + 1.0  # slot 0 waits for the slow pair, slot 1 after it
    assert async_makespan(a, b, slot, np.array([10.0, 1.0, 1.0, 1.0]), 6) < lockstep


def test_pair_budget_cut_is_the_initiators_rule():
    gen = np.random.default_rng(3)
    rtt = gen.lognormal(0.0, 0.3, (200, 10)) * (1 + 5 * (gen.random((200, 10)) < 0.05))
    got = pair_budget_cut(rtt, 10)
    for k in range(200):  # the engine's loop: before ping j, is it the last?
        used, total, best = 0, 0.0, np.inf
        for j in range(10):
            last = j == 9 or (
                used + 1 >= MIN_PAIR_SAMPLES and used > 0 and total >= PAIR_BUDGET * 10 * best
            )
            used, total, best = used + 1, total + rtt[k, j], min(best, rtt[k, j])
            if last:
                break
        assert got[k] == used
    assert (got < 10).any() and (got == 10).any()


# -- the planner ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_planner_finds_zones_racks_and_congested_vms(seed):
    net = random_network(384, 128, sigma=0.1, congested=0.08, rng=seed)
    planner = LatencyPlanner(net.hosts)
    gen = np.random.default_rng(seed)

    def measured(a, b):  # the median of ten noisy one-way samples
        return np.median(net.samples(a, b, 10, gen), axis=1)

    stages = _run(planner, measured)
    first = np.unique(planner.host_of, return_index=True)[1]
    found = [lv[first] for lv in planner.levels()[1:]]
    assert len(found) == len(net.groups)
    for f, t in zip(found, net.groups, strict=True):
        assert _same_partition(f, t)
    assert set(np.flatnonzero(planner.factor > 1)) == set(np.flatnonzero(net.factor > 1))
    # linear: a bounded number of stages and pairs per process
    assert len(stages) <= 12
    pairs = sum(a.size for a, _ in stages)
    assert pairs <= 30 * net.n


@pytest.mark.parametrize("seed", [3, 11, 20])
def test_planner_finds_small_racks_that_blocked_rounds_scatter(seed):
    # one process per host: the zones' rounds run in blocks, and a rack of two to five
    # hosts whose hosts were pivots of different blocks (or rounds) met no host of its
    # own; a host alone must not join a group through one noisy pair, nor be kept out
    # of its own by a congested member. Each of these layouts lost a small rack before.
    net = random_network(512, 400, sigma=0.15, congested=0.08, rng=seed)
    planner = LatencyPlanner(net.hosts)
    gen = np.random.default_rng(seed)
    stages = _run(planner, lambda a, b: np.median(net.samples(a, b, 10, gen), axis=1))
    first = np.unique(planner.host_of, return_index=True)[1]
    found = [lv[first] for lv in planner.levels()[1:]]
    assert [int(f.max()) + 1 for f in found] == [int(t.max()) + 1 for t in net.groups]
    for f, t in zip(found, net.groups, strict=True):
        assert _same_partition(f, t)
    assert set(np.flatnonzero(planner.factor > 1)) == set(np.flatnonzero(net.factor > 1))
    assert len(stages) <= 12 and sum(a.size for a, _ in stages) <= 30 * net.n


def test_planner_fills_every_pair_from_its_block():
    # no sample noise: measured pairs keep their value, the others their block's
    # (the model's rack pairs differ by up to 10 % either way inside one block)
    net = random_network(192, 64, sigma=0.0, congested=0.1, tail=0.0, rng=5)
    planner = LatencyPlanner(net.hosts)
    _run(planner, net.latency)
    lat, spread, counts, info = planner.result()
    true = net.latency_matrix()
    off = ~np.eye(net.n, dtype=bool)
    np.testing.assert_allclose(lat[counts > 0], true[counts > 0], rtol=1e-12)
    ratio = lat[off] / true[off]
    assert np.all(np.abs(ratio - 1) < 0.23) and abs(np.median(ratio) - 1) < 0.03
    assert 0 < counts.sum() < off.sum() / 2
    assert np.all(counts[~off] == 0) and np.all(np.diag(lat) == 0)
    assert spread.shape == lat.shape and np.all(spread >= 0)
    np.testing.assert_array_equal(planner.values(*np.nonzero(off)), lat[off])
    names = {net.hosts[p] for p in range(net.n) if net.factor[planner.host_of[p]] > 1}
    assert {name for name, _ in info["congested_hosts"]} == names
    for name, factor in info["congested_hosts"]:
        h = planner.host_of[net.hosts.index(name)]
        assert factor == pytest.approx(net.factor[h], rel=0.1)  # blocks vary by 10 %
    assert info["latency_pairs"] == sum(p for _, _, p in info["latency_stages"])


def test_planner_is_deterministic_and_flat_networks_have_no_groups():
    hosts = [f"h{i // 3}" for i in range(60)]
    flat = lambda a, b: np.where(np.array(hosts)[a] == np.array(hosts)[b], 4e-6, 30e-6)  # noqa: E731
    one, two = LatencyPlanner(hosts), LatencyPlanner(hosts)
    s1, s2 = _run(one, flat), _run(two, flat)
    assert len(s1) == len(s2)
    for (a1, b1), (a2, b2) in zip(s1, s2, strict=True):
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(b1, b2)
    assert len(one.levels()) == 1  # hosts only
    lat = one.result()[0]
    same = np.array(hosts)[:, None] == np.array(hosts)[None, :]
    off = ~np.eye(60, dtype=bool)
    assert np.allclose(lat[same & off], 4e-6) and np.allclose(lat[~same], 30e-6)


@pytest.mark.parametrize(
    "hosts", [["a"] * 5, ["a", "b"], ["a", "b", "c"], [f"h{i}" for i in range(9)], ["x", "y"] * 4]
)
def test_planner_small_jobs(hosts):
    n = len(hosts)
    lat = np.full((n, n), 20e-6)
    planner = LatencyPlanner(hosts)
    _run(planner, lambda a, b: lat[a, b])
    m, _, counts, _ = planner.result()
    off = ~np.eye(n, dtype=bool)
    np.testing.assert_allclose(m[off], 20e-6)
    assert counts.sum() >= n - 1


# -- plan and simulation --------------------------------------------------------------------


def test_noise_free_simulation_is_the_plans_estimate():
    net = random_network(512, 160, sigma=0.0, congested=0.08, tail=0.0, rng=2)
    sim = simulate_probe(net, rng=0, fill_pairs=2000)
    assert sim.found
    assert sim.seconds == pytest.approx(sim.estimated, rel=1e-9)
    assert sim.fill_error == pytest.approx(0.0, abs=1e-9)
    assert sim.congested_found == sim.congested_true


def test_simulated_fill_is_within_the_noise_of_an_all_pairs_probe():
    net = random_network(512, 160, sigma=0.15, congested=0.08, rng=4)
    sim = simulate_probe(net, rng=4)
    assert sim.found
    assert sim.fill_error < 1.3 * sim.noise_floor + 0.02
    # heavy tails make the probe slower than the noise-free estimate, not 3 times
    assert 0.3 < sim.estimated / sim.seconds <= 1.05


def test_plan_linear_latency_is_few_stages_and_far_below_the_round_robin():
    net = random_network(1024, 342, sigma=0.1, congested=0.08, rng=27)
    lat = net.latency_matrix()
    linear = plan_probe(lat, net.hosts)
    assert linear.latency_mode == "linear" and len(linear.latency_stages) <= 12
    assert linear.latency_rounds == sum(s for _, s, _ in linear.latency_stages)
    assert linear.levels[1:] == [int(g.max()) + 1 for g in net.groups]
    assert linear.congested_hosts == int(np.sum(net.factor > 1))
    rr = plan_probe(lat, net.hosts, latency_mode="all-pairs", mode="none")
    assert rr.latency_mode == "all-pairs" and rr.latency_rounds == 1023
    assert linear.latency_seconds < rr.latency_seconds / 20
    assert linear.estimated_seconds < 30.0
    assert "stages" in str(linear) and "1023 rounds" in str(rr)


def test_plan_from_a_host_level_model_is_the_plan_from_its_process_matrix():
    net = random_network(600, 200, sigma=0.0, congested=0.05, tail=0.0, rng=8)
    host_lat = net.host_latency * np.outer(net.factor, net.factor)
    np.fill_diagonal(host_lat, np.diag(net.host_latency))
    h = net.host_of
    full = host_lat[np.ix_(h, h)]
    np.fill_diagonal(full, 0.0)
    by_host = plan_probe(host_lat, net.hosts)
    by_process = plan_probe(full, net.hosts)
    assert by_host.to_dict() == by_process.to_dict()


def test_estimate_counts_every_stage_pair():
    hosts = [f"h{i // 4}" for i in range(256)]
    lat = lambda a, b: np.full(np.shape(a), 25e-6)  # noqa: E731
    est = estimate_linear_latency(hosts, lat, params=ProbeParams(repeats=4, warmup=0))
    assert est.transfers == 2 * 4 * sum(p for _, _, p in est.stages)
    assert est.seconds == pytest.approx(est.pair_seconds + est.control_seconds)


def test_auto_latency_mode_switches_at_64_processes():
    assert resolve_latency_mode("auto", 64) == "all-pairs"
    assert resolve_latency_mode("auto", 65) == "linear"
    assert resolve_latency_mode("all-pairs", 4096) == "all-pairs"
    assert ProbeParams().latency_mode == "auto"
    small = plan_probe(np.full((64, 64), 1e-5), [f"h{i}" for i in range(64)], mode="none")
    assert small.latency_mode == "all-pairs" and small.latency_rounds == 63
    pairs = [tuple(p) for p in combinations(range(4), 2)]
    assert len(pairs) == 6
