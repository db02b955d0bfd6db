"""How transfers share an uplink: the probe's sharing test and the models' ``straggle``.

The probe runs a few transfers across one uplink side by side
(:func:`~rankopt.probe.sharing.sharing_pairs`) and turns the slowest of them
against one alone into the exponent ``straggle``
(:func:`~rankopt.probe.sharing.straggle_exponent`); the network carries it
and the contention model prices ``K`` transfers from one group into one group
at ``uplink / K**straggle`` each; a transfer whose two ends are crowded
unequally is crowded at both by ``c = min(K_out, K_in)`` and gets ``uplink /
(K * c**(straggle - 1))``.
"""

import math

import numpy as np
import pytest

import rankopt
from rankopt._validation import STRAGGLE_RANGE, RankoptInputError
from rankopt.models.network import crowd_table, make_network, share_table, tenant_flows
from rankopt.network.core import Redraw, network_from_record, network_record
from rankopt.probe.measurement import Measurement
from rankopt.probe.sharing import (
    MAX_SHARING_FLOWS,
    REFERENCE_BELOW,
    elastic_share,
    loaded_pairs,
    sharing_pairs,
    sharing_slots,
    straggle_exponent,
    straggle_span,
)


def _levels(rack, per_host=1):
    rack = np.repeat(np.asarray(rack), per_host)
    host = np.repeat(np.arange(len(rack) // per_host), per_host)
    return [host, rack]


# ------------------------------------------------------------------ pairs
@pytest.mark.parametrize("seed", range(6))
def test_pairs_cross_one_uplink_one_way_from_distinct_hosts(seed):
    rng = np.random.default_rng(seed)
    rack = rng.permutation(np.repeat(np.arange(3), 3))
    levels = _levels(rack, per_host=2)
    pairs = sharing_pairs(levels)
    assert 2 <= len(pairs) <= MAX_SHARING_FLOWS
    host, lab = levels
    lows = {int(lab[a]) for a, _ in pairs}
    highs = {int(lab[b]) for _, b in pairs}
    # every first transfer (low rank -> high rank) leaves the same group for the same group
    assert len(lows) == 1 and len(highs) == 1 and lows != highs
    assert all(a < b for a, b in pairs)
    ends = [a for a, _ in pairs] + [b for _, b in pairs]
    assert len({int(host[x]) for x in ends}) == len(ends)  # one process per host


def test_pairs_need_two_groups_of_two_hosts():
    assert sharing_pairs([np.arange(4)]) == []  # hosts only
    assert sharing_pairs(_levels([0, 0, 0, 1])) == []  # a group of one host
    assert sharing_pairs(_levels([0, 0, 1, 1])) == [(0, 2), (1, 3)]
    # several processes on each host: still one per host
    assert sharing_pairs(_levels([0, 0, 1, 1], per_host=3)) == [(0, 6), (3, 9)]
    # no two pairs oriented alike: groups {0, 3} and {1, 2} give 0 -> 1 or 1 -> 3, not both
    assert sharing_pairs(_levels([0, 1, 1, 0])) == []


# --------------------------------------------------------------- exponent
def _rates(n, alone, flows):
    together = np.full((n, n), np.nan)
    for (a, b), r in flows.items():
        together[a, b] = r
    return together, np.full((n, n), alone)


def test_even_split_is_one_and_a_straggler_raises_it():
    pairs = [(0, 3), (1, 4), (2, 5)]
    together, alone = _rates(6, 30.0, dict.fromkeys(pairs, 10.0))
    assert straggle_exponent(together, alone, pairs) == pytest.approx(1.0)
    together[0, 3] = 30.0 / 3**1.25
    assert straggle_exponent(together, alone, pairs) == pytest.approx(1.25)


def test_no_shared_limit_says_nothing():
    pairs = [(0, 3), (1, 4), (2, 5)]
    together, alone = _rates(6, 30.0, dict.fromkeys(pairs, 28.0))  # each kept its rate
    assert straggle_exponent(together, alone, pairs) is None
    assert straggle_exponent(together, alone, pairs[:1]) is None  # one flow shares nothing
    together[0, 3] = 0.0  # a failed transfer
    assert straggle_exponent(together, alone, pairs) is None


def test_estimate_stays_in_range():
    pairs = [(0, 2), (1, 3)]
    together, alone = _rates(4, 30.0, {(0, 2): 15.5, (1, 3): 15.5})
    # fairer than an even split (the flows were not all limited by the uplink): 1
    assert straggle_exponent(together, alone, pairs) == STRAGGLE_RANGE[0]
    together[0, 2] = 0.01
    assert straggle_exponent(together, alone, pairs) == STRAGGLE_RANGE[1]


def test_alone_is_the_best_rate_between_the_test_ends():
    # the probe's own side-by-side pairs slowed some entries; the best one is a flow alone
    pairs = [(0, 2), (1, 3)]
    together, alone = _rates(4, 10.0, {(0, 2): 15.0, (1, 3): 12.0})
    alone[0, 3] = 30.0
    want = math.log(30.0 / 12.0) / math.log(2)
    assert straggle_exponent(together, alone, pairs) == pytest.approx(want)


# ------------------------------------------------------------------ models
def test_share_table_and_bounds():
    assert share_table(3).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert share_table(4, 1.5)[4] == pytest.approx(8.0)
    lat = np.full((4, 4), 1e-6)
    kw = {"nbytes": 1e6, "groups": [0, 0, 1, 1], "uplink_bandwidth": 1e9}
    for bad in (0.5, 2.5, float("nan"), True, "x"):
        with pytest.raises(RankoptInputError, match="`straggle` must be"):
            make_network(lat, straggle=bad, **kw)


def test_straggle_prices_crossings_above_an_even_split():
    rack = np.repeat([0, 1], 4)
    lat = np.full((8, 8), 1e-6)
    kw = {"bandwidth": 1e10, "nbytes": 1e8, "groups": rack, "uplink_bandwidth": 1e9}
    inter = [0, 4, 1, 5, 2, 6, 3, 7]  # 4 ring flows on each uplink direction
    contig = list(range(8))  # 1
    even = rankopt.cost(lat, inter, **kw) / rankopt.cost(lat, contig, **kw)
    slow = rankopt.cost(lat, inter, **kw, straggle=1.2) / rankopt.cost(
        lat, contig, **kw, straggle=1.2
    )
    assert even == pytest.approx(4.0, rel=0.01)
    assert slow == pytest.approx(4**1.2, rel=0.01)
    # one flow per uplink is priced alike whatever the exponent
    assert rankopt.cost(lat, contig, **kw, straggle=1.7) == rankopt.cost(lat, contig, **kw)


def test_crowd_table_is_exactly_one_for_an_even_split():
    assert crowd_table(4).tolist() == [1.0] * 5
    assert crowd_table(4, 1.5).tolist() == pytest.approx([1.0, 1.0, 2**0.5, 3**0.5, 2.0])


# Racks of 4, 3 and 2 hosts. Both rings put three flows on one uplink direction:
# in the first every such flow enters a group that takes two; in the second the
# three flows out of rack 1 are the three into rack 0.
_RACK432 = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2])
_ONE_END = [8, 0, 7, 1, 3, 6, 2, 4, 5]
_BOTH_ENDS = [4, 0, 5, 1, 6, 2, 3, 7, 8]


@pytest.mark.parametrize("straggle", [1.0, 1.15, 1.5, 2.0])
def test_straggle_prices_the_flows_crowded_at_both_ends(straggle):
    lat = np.full((9, 9), 1e-9)
    kw = {"bandwidth": 1e12, "nbytes": 1e8, "groups": _RACK432, "uplink_bandwidth": 1e9}
    contig = list(range(9))
    base = rankopt.cost(lat, contig, **kw, straggle=straggle)
    one = rankopt.cost(lat, _ONE_END, **kw, straggle=straggle) / base
    both = rankopt.cost(lat, _BOTH_ENDS, **kw, straggle=straggle) / base
    # 3 flows out of rack 0, each into a rack that takes 2: crowded at both ends by 2
    assert one == pytest.approx(3 * 2 ** (straggle - 1), rel=1e-6)
    # 3 flows out of rack 1, the same 3 the only ones into rack 0: 3**straggle
    assert both == pytest.approx(3**straggle, rel=1e-6)
    assert both / one == pytest.approx(1.5 ** (straggle - 1), rel=1e-6)
    for order in (_ONE_END, _BOTH_ENDS, contig):
        assert rankopt.cost(lat, order, **kw, straggle=straggle) == pytest.approx(
            _reference(lat, order, kw, straggle), rel=1e-12
        )


def test_straggle_swap_deltas_follow_both_ends():
    # the step evaluator's swap deltas against full costs, where a swap changes the
    # crowding of transfers it does not move
    from rankopt.models.factory import make_model

    rng = np.random.default_rng(3)
    n = 12
    rack = rng.integers(0, 4, n)
    lat = rng.uniform(1e-6, 1e-5, (n, n))
    kw = {"bandwidth": 1e10, "nbytes": 1e8, "groups": rack, "uplink_bandwidth": 1e9}
    for alg in ("ring", "recursive_doubling"):
        model = make_model(lat, "allreduce", alg, objective="contention", straggle=1.4, **kw)
        order = rng.permutation(n)
        for _ in range(40):
            i, j = rng.choice(n, 2, replace=False)
            swapped = order.copy()
            swapped[[i, j]] = swapped[[j, i]]
            want = model.reference_cost(swapped) - model.reference_cost(order)
            assert model.swap_delta(order, int(i), int(j)) == pytest.approx(want, abs=1e-12)
            if rng.random() < 0.5:
                order = swapped


def _reference(lat, order, kw, straggle):
    from rankopt.models.factory import make_model

    model = make_model(lat, "allreduce", "ring", straggle=straggle, **kw)
    return model.reference_cost(np.asarray(order))


def _measured(straggle=None):
    rack = np.repeat([0, 1], 3)
    bw = np.where(rack[:, None] == rack[None, :], 1e9, 1e8)
    params = {"straggle": straggle} if straggle else {}
    return Measurement(
        latency=np.full((6, 6), 5e-5) * (1 - np.eye(6)),
        bandwidth=bw * (1 - np.eye(6)),
        hosts=tuple(f"h{i}" for i in range(6)),
        parameters=params,
    )


def test_measured_straggle_reaches_the_solve_and_the_record():
    net = rankopt.Network.from_measurement(_measured(1.3))
    assert net.straggle == 1.3
    assert rankopt.Network.from_measurement(_measured()).straggle == 1.0
    assert "1/K^1.30" in net.describe()
    kw = net.default_model()
    assert kw["straggle"] == 1.3
    res = rankopt.solve(net, rng=0)
    order = [0, 3, 1, 4, 2, 5]  # 3 flows on each rack uplink
    assert res.network["straggle"] == 1.3
    assert "1/K^1.30" in res.summary()
    # the solve prices with the measured exponent: cost() with it agrees
    assert rankopt.cost(net.latency, res.order, **kw) == pytest.approx(res.cost)
    with_s = rankopt.cost(net.latency, order, **kw)
    without = rankopt.cost(net.latency, order, **{**kw, "straggle": None})
    assert with_s > without
    back = network_from_record(network_record(net))
    assert back.straggle == 1.3
    assert network_from_record(network_record(rankopt.Network.from_measurement(_measured())))


def test_each_step_lasts_as_long_as_its_slowest_flow():
    # the straggler changes from step to step: per-flow medians would see an even split
    pairs = [(0, 3), (1, 4), (2, 5)]
    steps = np.full((3, 6, 6), 10.0)
    for s, (a, b) in enumerate(pairs):
        steps[s, a, b] = 30.0 / 3**1.3
    alone = np.full((6, 6), 30.0)
    assert straggle_exponent(steps, alone, pairs) == pytest.approx(1.3)
    # a step with a failed transfer is left out; all failed: nothing to say
    steps[1, 1, 4] = 0.0
    assert straggle_exponent(steps, alone, pairs) == pytest.approx(1.3)
    steps[:, 0, 3] = np.nan
    assert straggle_exponent(steps, alone, pairs) is None


def test_load_that_came_during_the_test_is_read_against_the_flow_alone_beside_it():
    # three flows split an uplink at an exponent of 1.1; another tenant's load came after
    # the rates alone were measured (30 MB/s), for the first five of eight steps, and
    # left a flow alone 15 MB/s there: against 30 those steps read 1.73
    pairs = [(0, 3), (1, 4), (2, 5)]
    alone = np.full((6, 6), 30e6)
    on = np.arange(8) < 5
    left = np.where(on, 15e6, 30e6)  # what a flow alone got, step by step
    steps = np.full((8, 6, 6), 1.0)
    for a, b in pairs:
        steps[:, a, b] = left / 3**1.1
    assert straggle_exponent(steps, alone, pairs) > 1.6  # the steps against the rates before
    assert straggle_exponent(steps, alone, pairs, refs=left) == pytest.approx(1.1)
    lo, hi = straggle_span(steps, alone, pairs, refs=left)
    assert lo == pytest.approx(1.1) and hi == pytest.approx(1.1)
    # a flow alone that ran about as fast as before (noise, a quiet network) changes nothing:
    # the best rate alone stays the reference
    quiet = np.full((8, 6, 6), 1.0)
    for a, b in pairs:
        quiet[:, a, b] = 30e6 / 3 ** np.linspace(1.0, 1.2, 8)
    noisy = 30e6 * np.linspace(REFERENCE_BELOW + 0.01, 1.1, 8)
    assert straggle_exponent(quiet, alone, pairs, refs=noisy) == straggle_exponent(
        quiet, alone, pairs
    )
    assert straggle_span(quiet, alone, pairs, refs=noisy) == straggle_span(quiet, alone, pairs)
    # load there for the whole test (every flow alone slow, as beside steady TCP flows):
    # the steps keep the best rate alone, as before
    steady = np.full(8, 15e6)
    assert straggle_exponent(steps, alone, pairs, refs=steady) == straggle_exponent(
        steps, alone, pairs
    )
    # a reference that failed (0, nan) leaves its step against the best rate alone
    failed = left.copy()
    failed[:5] = [0.0, np.nan, 15e6, 15e6, 15e6]
    slow_two = straggle_span(steps, alone, pairs, refs=failed)
    assert slow_two[1] > 1.2
    # one reference per step
    with pytest.raises(ValueError, match="`refs` must hold one rate per step"):
        straggle_exponent(steps, alone, pairs, refs=left[:7])


def test_the_test_times_one_of_its_pairs_alone_after_every_step():
    pairs = [(0, 3), (1, 4), (2, 5)]
    slots = sharing_slots(pairs, 4)
    assert len(slots) == 1 + 2 * 4
    assert slots[0] == pairs  # a step to bring the connections up to speed
    assert all(slot == pairs for slot in slots[1::2])  # then the steps
    assert [slot for slot in slots[2::2]] == [[(0, 3)], [(1, 4)], [(2, 5)], [(0, 3)]]


def test_the_test_runs_across_the_least_loaded_uplinks():
    # three racks of three; another tenant loads rack 0's way out: rates from it read low
    rack = np.repeat([0, 1, 2], 3)
    levels = [np.arange(9), rack]
    rates = np.where(rack[:, None] == rack[None, :], 120.0, 30.0)
    quiet = sharing_pairs(levels, rates=rates)
    rates[rack == 0, :] = np.where(rack[None, :] == 0, 120.0, 8.0)  # rows: out of rack 0
    loaded = sharing_pairs(levels, rates=rates)
    assert len(quiet) == len(loaded) == 3
    assert {int(rack[a]) for a, _ in loaded} != {0}  # not sent out of the loaded rack
    assert {int(rack[a]) for a, _ in quiet} == {0}  # quiet: the first groups, as before


def test_the_test_runs_where_the_answers_come_back_unloaded_too():
    # racks of 3, 2, 2 and 2 hosts; a neighbour sends from rack 1 into rack 3, loading
    # rack 1's way out and rack 3's way in. Rack 0 -> rack 1 is quiet, but its answers
    # come back across rack 1's loaded way out: the test goes where both ways are quiet
    rack = np.array([0, 0, 1, 2, 3, 3, 1, 2, 1])
    levels = [np.arange(9), rack]
    rates = np.where(rack[:, None] == rack[None, :], 120.0, 30.0)
    rates[rack == 1, :] = np.where(rack[None, :] == 1, 120.0, 11.0)  # out of rack 1
    rates[:, rack == 3] = np.where(rack[:, None] == 3, 120.0, 11.0)  # into rack 3
    pairs = sharing_pairs(levels, rates=rates)
    ga, gb = {int(rack[a]) for a, _ in pairs}, {int(rack[b]) for _, b in pairs}
    assert len(pairs) == 2 and len(ga) == len(gb) == 1
    ga, gb = ga.pop(), gb.pop()
    assert rates[np.ix_(rack == ga, rack == gb)].min() == 30.0  # quiet there
    assert rates[np.ix_(rack == gb, rack == ga)].min() == 30.0  # and back
    # one reading above what the uplink carries does not make a loaded way the quietest
    rates[0, 4] = 38.6  # rack 0 -> rack 3, whose way in is loaded
    again = sharing_pairs(levels, rates=rates)
    assert {int(rack[b]) for _, b in again} != {3}


# ------------------------------------------------ other tenants: does the load yield?
def test_the_second_test_runs_out_of_the_most_loaded_group():
    rack = np.repeat([0, 1, 2], 3)
    levels = [np.arange(9), rack]
    rates = np.where(rack[:, None] == rack[None, :], 120.0, 30.0)
    assert loaded_pairs(levels, rates) == ([], 0.0, 0.0)  # nothing much slower
    rates[np.ix_(rack == 2, rack != 2)] = 10.0  # rack 2's way out is loaded
    # racks are contiguous: rack 2 holds the top ranks, so no pair can send low to high
    # out of it -- and the next slowest way is not much slower: nothing to test
    assert loaded_pairs(levels, rates) == ([], 0.0, 0.0)
    rack = np.array([2, 0, 1, 2, 0, 1, 2, 0, 1])  # interleaved ranks
    levels = [np.arange(9), rack]
    rates = np.where(rack[:, None] == rack[None, :], 120.0, 30.0)
    rates[np.ix_(rack == 2, rack != 2)] = 10.0
    pairs, loaded, quiet = loaded_pairs(levels, rates)
    assert len(pairs) == 3 and loaded == 10.0
    assert all(rack[a] == 2 and rack[b] != 2 and a < b for a, b in pairs)
    assert len({int(rack[b]) for _, b in pairs}) == 1  # into one sibling group


@pytest.mark.parametrize("straggle", [1.0, 1.2])
@pytest.mark.parametrize(
    "m_true,yielding", [(2.0, 1.0), (2.0, 0.5), (0.5, 1.0), (1.0, 0.0), (1.0, -0.5)]
)
def test_elastic_share_reads_back_the_yielding_load(straggle, m_true, yielding):
    # one flow alone beside the load gets C / (1 + m_true); K flows beside the part
    # that yields (m = yielding * m_true) and the part that does not
    cap, k = 30.0, 3
    m = yielding * m_true
    loaded = cap / (1 + m_true)
    per_flow = loaded * (1 + m) / (k**straggle + m)
    pairs = [(0, 3), (1, 4), (2, 5)]
    steps = np.full((4, 6, 6), per_flow)
    got = elastic_share(steps, pairs, loaded, cap, straggle)
    assert got == pytest.approx(yielding, abs=1e-9)


def test_elastic_share_says_nothing_on_an_unloaded_uplink_or_failed_steps():
    pairs = [(0, 2), (1, 3)]
    steps = np.full((2, 4, 4), 15.0)
    assert elastic_share(steps, pairs, loaded=29.0, quiet=30.0) is None  # not loaded
    assert elastic_share(steps * np.nan, pairs, loaded=10.0, quiet=30.0) is None
    assert elastic_share(steps, pairs[:1], loaded=10.0, quiet=30.0) is None
    # flows that kept their rate alone: everything yielded (more cannot be read)
    assert elastic_share(np.full((2, 4, 4), 10.0), pairs, 10.0, 30.0) == 1.0


def test_tenant_flows_count_the_yielding_load_per_uplink_and_direction():
    up = np.array([[30.0, 10.0, np.inf], [5.0, 5.0, np.inf]])
    down = np.array([[30.0, 30.0, np.inf], [5.0, 2.5, np.inf]])
    out, inn = tenant_flows(up, down, 0.5)
    assert out.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    assert inn.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.5, 0.0]]
    zero = tenant_flows(up, down, 0.0)
    assert not zero[0].any() and not zero[1].any()


def test_yielding_load_prices_crossings_at_the_fair_share():
    # two racks, interleaved ring: 4 flows out of each rack per step. Rack 0's way out
    # gives one transfer 10 of the 30 its sibling gives: 2 flows of another tenant.
    rack = np.repeat([0, 1], 4)
    lat = np.full((8, 8), 1e-7)
    ups = [np.array([[10e6, 30e6], [30e6, 30e6]])]
    kw = {"bandwidth": 1e10, "nbytes": 1e8, "groups": [rack], "uplink_bandwidth": ups}
    inter = [0, 4, 1, 5, 2, 6, 3, 7]
    paced = rankopt.cost(lat, inter, **kw)
    tcp = rankopt.cost(lat, inter, **kw, elastic=1.0)
    # paced: 4 flows split the 10 left (2.5 each); TCP: 4 of 6 flows on 30 (5 each)
    assert paced / tcp == pytest.approx(2.0, rel=0.01)
    half = rankopt.cost(lat, inter, **kw, elastic=0.5)
    assert tcp < half < paced
    contig = list(range(8))  # one flow on each way: alone, it gets what it measured
    assert rankopt.cost(lat, contig, **kw, elastic=1.0) == pytest.approx(
        rankopt.cost(lat, contig, **kw), rel=1e-12
    )
    for bad in (1.5, -0.25):  # a probe's reading below 0 is not a model's value
        with pytest.raises(RankoptInputError, match="`elastic` must be a number between 0 and 1"):
            rankopt.cost(lat, inter, **kw, elastic=bad)


def test_measured_elastic_reaches_the_solve_the_record_and_the_summary():
    m = _measured(1.2)
    m.parameters["elastic"] = 0.8
    net = rankopt.Network.from_measurement(m)
    assert net.elastic == 0.8
    assert rankopt.Network.from_measurement(_measured()).elastic == 0.0
    assert "load yields 80% to more transfers" in net.describe()
    kw = net.default_model()
    assert kw["elastic"] == 0.8
    res = rankopt.solve(net, rng=0)
    assert res.network["elastic"] == 0.8
    assert "other tenants" in res.summary()
    assert rankopt.cost(net.latency, res.order, **kw) == pytest.approx(res.cost)
    assert network_from_record(network_record(net)).elastic == 0.8


def test_the_sharing_tests_spread_of_steps_is_drawn_and_kept():
    # the test's quartile steps read 1.1 and 1.7: the model prices the median, the
    # interval's draws take every exponent from an even split (1) up to 1.7 (load that
    # came after the bandwidth phase reads as uneven sharing), the record and summary keep it
    m = _measured(1.3)
    m.parameters["straggle_range"] = [1.1, 1.7]
    net = rankopt.Network.from_measurement(m)
    assert net.straggle == 1.3 and net.straggle_range == (1.1, 1.7)
    assert network_from_record(network_record(net)).straggle_range == (1.1, 1.7)
    redraw = Redraw(net, net.default_model())
    gen = np.random.default_rng(5)
    drawn = [redraw(gen)[1]["straggle"] for _ in range(64)]
    assert min(drawn) < 1.05 and max(drawn) > 1.6 and all(1.0 <= s <= 1.7 for s in drawn)
    # a reading without a range is drawn from 1 up to it; a reading of 1 is not redrawn
    net13 = rankopt.Network.from_measurement(_measured(1.3))
    drawn = [Redraw(net13, net13.default_model())(gen)[1]["straggle"] for _ in range(64)]
    assert min(drawn) < 1.05 and all(1.0 <= s <= 1.3 for s in drawn)
    net1 = rankopt.Network.from_measurement(_measured(1.0))
    assert Redraw(net1, net1.default_model())(gen)[1]["straggle"] == 1.0
    # a model given its own exponent is not redrawn
    assert Redraw(net, {**net.default_model(), "straggle": 1.0})(gen)[1]["straggle"] == 1.0
    # measured, from an interleaved launch (3 flows on each rack uplink)
    rack = np.array([0, 1, 0, 1, 0, 1])
    bw = np.where(rack[:, None] == rack[None, :], 1e9, 1e8) * (1 - np.eye(6))
    lat = np.full((6, 6), 5e-5) * (1 - np.eye(6))

    def interleaved(**params):
        return rankopt.Network.from_measurement(
            Measurement(latency=lat, bandwidth=bw, hosts=tuple(f"h{i}" for i in range(6)),
                        latency_spread=0.02 * lat, bandwidth_spread=0.02 * bw,
                        parameters=params)
        )  # fmt: skip

    res = rankopt.solve(interleaved(straggle=1.3, straggle_range=[1.1, 1.7]), rng=0)
    assert res.network["straggle_range"] == [1.1, 1.7]
    assert "1/K^1.10-1/K^1.70" in res.summary()
    narrow = rankopt.solve(interleaved(straggle=1.3), rng=0)
    assert res.speedup == pytest.approx(narrow.speedup)  # the model prices the median
    lo, hi = res.speedup_interval
    n_lo, n_hi = narrow.speedup_interval
    assert hi > n_hi  # the interval holds what the steps could mean
    # and what an even split would give: the reading may be another tenant's load
    even = rankopt.solve(interleaved(straggle=1.0), rng=0)
    assert even.speedup < res.speedup and lo <= even.speedup <= hi
    # a range that does not hold the exponent is widened to hold it; bad ones are refused
    m.parameters["straggle_range"] = [1.4, 1.6]
    assert rankopt.Network.from_measurement(m).straggle_range == (1.3, 1.6)
    m.parameters["straggle_range"] = [1.1, 2.5]
    with pytest.raises(RankoptInputError, match="`straggle` must be a number between 1"):
        _ = rankopt.Network.from_measurement(m).straggle_range
    m.parameters["straggle_range"] = 1.2
    with pytest.raises(RankoptInputError, match="`straggle_range` must be two numbers"):
        _ = rankopt.Network.from_measurement(m).straggle_range


def test_straggle_span_reads_the_quartile_steps():
    from rankopt.probe.sharing import straggle_exponent, straggle_span

    alone = np.full((6, 6), 30e6)
    pairs = [(0, 3), (1, 4), (2, 5)]
    steps = np.full((8, 6, 6), 10e6)
    # the slowest of three flows: an even split on four steps, half of it on four
    steps[:4, 0, 3] = 10e6
    steps[4:, 0, 3] = 5e6
    lo, hi = straggle_span(steps, alone, pairs)
    assert lo == pytest.approx(1.0) and hi == pytest.approx(np.log(6) / np.log(3))
    assert lo <= straggle_exponent(steps, alone, pairs) <= hi
    # steps that agree: no span
    assert straggle_span(np.full((8, 6, 6), 10e6), alone, pairs) == (1.0, 1.0)
    # the flows kept their rate alone: nothing shared, nothing read
    assert straggle_span(np.full((8, 6, 6), 29e6), alone, pairs) is None


def test_a_reading_below_an_even_split_prices_the_middle_and_draws_the_range():
    # short transfers lost more than an even split: congestion-controlled load whose
    # yield to long transfers the test cannot tell; the model takes 0.5, the draws 0..1
    m = _measured(1.2)
    m.parameters["elastic"] = -0.3
    net = rankopt.Network.from_measurement(m)
    assert net.elastic_reading == -0.3
    assert net.elastic_range == (0.0, 1.0) and net.elastic == 0.5
    assert "congestion-controlled (yields 0%-100%" in net.describe()
    assert net.default_model()["elastic"] == 0.5
    back = network_from_record(network_record(net))
    assert back.elastic_reading == -0.3 and back.elastic == 0.5
    redraw = Redraw(net, net.default_model())
    gen = np.random.default_rng(3)
    drawn = [redraw(gen)[1]["elastic"] for _ in range(64)]
    assert min(drawn) < 0.2 and max(drawn) > 0.8 and all(0.0 <= e <= 1.0 for e in drawn)
    # a model given its own elastic is not redrawn
    fixed = Redraw(net, {**net.default_model(), "elastic": 0.9})
    assert fixed(gen)[1]["elastic"] == 0.9
    res = rankopt.solve(net, rng=0)
    assert res.network["elastic_range"] == [0.0, 1.0]
    assert "congestion-controlled" in res.summary()
    # a reading of exactly 0 (paced load) is kept: nothing to draw
    m.parameters["elastic"] = 0.0
    paced = rankopt.Network.from_measurement(m)
    assert paced.elastic_reading == 0.0 and paced.elastic_range == (0.0, 0.0)
    with pytest.raises(RankoptInputError, match="reading must be a number between -1 and 1"):
        m.parameters["elastic"] = -1.5
        _ = rankopt.Network.from_measurement(m).elastic


def test_a_measured_exponent_guides_layout_through_a_proxy_that_bounds_the_cost():
    from rankopt.models.factory import make_model
    from rankopt.solvers import layout

    rng = np.random.default_rng(5)
    n = 64
    rack = np.repeat(np.arange(8), 8)[rng.permutation(n)]
    lat = rng.uniform(1e-6, 1e-5, (n, n))
    kw = {"bandwidth": 1e10, "nbytes": 1e8, "groups": rack, "uplink_bandwidth": 2e9}
    model = make_model(lat, "allreduce", "rabenseifner", objective="contention", straggle=1.3, **kw)
    caps = model.capabilities
    assert not caps.swap_search.incremental  # the exact deltas recount the steps
    assert caps.proxy_search is not None and caps.proxy_search.incremental
    assert layout.applies(model)
    for _ in range(5):
        o = rng.permutation(n)
        assert caps.proxy_search.cost(o) >= model.cost(o) * (1 - 1e-12)  # a bound from above
    res = rankopt.solve(
        lat, "allreduce", "rabenseifner", straggle=1.3, method="layout", rng=0, **kw
    )
    assert res.cost == pytest.approx(model.cost(res.order), rel=1e-12)
    assert res.cost <= model.cost(np.arange(n))
    even = make_model(lat, "allreduce", "rabenseifner", objective="contention", **kw)
    assert even.capabilities.proxy_search is None and even.capabilities.swap_search.incremental
    # the proxy puts the exponent on each end's count alone: the two rings of 4,3,2 alike
    kw9 = {"bandwidth": 1e12, "nbytes": 1e8, "groups": _RACK432, "uplink_bandwidth": 1e9}
    ring = make_model(np.full((9, 9), 1e-9), "allreduce", "ring", straggle=1.5, **kw9)
    proxy = ring.capabilities.proxy_search
    one, both = (np.array(o, dtype=np.int64) for o in (_ONE_END, _BOTH_ENDS))
    assert proxy.cost(one) == pytest.approx(proxy.cost(both), rel=1e-12)
    assert proxy.cost(both) == pytest.approx(ring.cost(both), rel=1e-12)
    assert ring.cost(one) < proxy.cost(one)
