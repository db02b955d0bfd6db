"""A cold start through the probe cache builds the root's network once."""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest

from rankopt import Measurement, load_measurement
from rankopt.adapters import cache as cache_mod
from rankopt.adapters.cache import ProbeCache, network_of, probe_with_cache
from rankopt.network.core import Network
from rankopt.probe import _engine
from rankopt.probe._common import ProbeParams

HOSTS = tuple(f"h{i}" for i in range(6))
RACK = np.array([0, 1, 0, 1, 0, 1])


def _probed(**parameters) -> Measurement:
    bw = np.where(RACK[:, None] == RACK[None, :], 1e9, 1e8) * (1 - np.eye(6))
    lat = np.where(RACK[:, None] == RACK[None, :], 2e-5, 8e-5) * (1 - np.eye(6))
    return Measurement(lat, bw, HOSTS, parameters=parameters)


class _OneProcess:
    """The probe's transport as the only process (the root) sees it."""

    me = 0

    def __init__(self, *args, **kwargs) -> None:
        pass

    def _start(self):
        return HOSTS, None

    def _allreduce_max(self, values, phase):
        return values


@pytest.fixture
def builds(monkeypatch):
    """Every ``Network.from_measurement`` call, by the measurement it was given."""
    seen: list[Measurement] = []
    original = Network.from_measurement.__func__

    def counting(cls, measurement, **kwargs):
        seen.append(measurement)
        return original(cls, measurement, **kwargs)

    monkeypatch.setattr(Network, "from_measurement", classmethod(counting))
    monkeypatch.setattr(_engine, "_Probe", _OneProcess)
    return seen


def _cold_start(monkeypatch, tmp_path, fresh):
    monkeypatch.setattr(_engine, "run_probe", lambda *a, **k: fresh)
    cache = ProbeCache(directory=tmp_path)
    res = probe_with_cache(None, ProbeParams(), cache, None, backend="mpi", hostname="h0")
    assert res.parameters["cache"]["status"] == "probed"
    (entry,) = tmp_path.glob("*.npz")
    return res, load_measurement(entry)


def test_a_cold_start_builds_the_network_once(monkeypatch, tmp_path, builds):
    res, stored = _cold_start(monkeypatch, tmp_path, _probed())
    assert builds == [res]  # the cache built the network of what it returned, once
    net = network_of(res)  # the entry point's network: the same object, no second build
    assert len(builds) == 1 and network_of(res) is net
    # the entry keeps that network's hierarchy, so a hit need not infer it again
    kept = stored.parameters["inferred_hierarchy"]
    assert kept["groups"] == [g.tolist() for g in net.groups] and len(net.groups) >= 1
    # the network is the one the entry point would have built itself
    again = Network.from_measurement(res)
    assert [g.tolist() for g in again.groups] == kept["groups"]
    np.testing.assert_array_equal(again.bandwidth, net.bandwidth)
    assert again.provenance == net.provenance


def test_other_measurements_are_built_as_before(monkeypatch, tmp_path, builds):
    res, _ = _cold_start(monkeypatch, tmp_path, _probed())
    other = _probed()
    assert network_of(other) is not network_of(res)
    assert builds.count(other) == 1
    # the memo goes with its measurement
    key = id(res)
    assert key in cache_mod._BUILT
    builds.clear()
    del res
    gc.collect()
    assert key not in cache_mod._BUILT


def test_probed_groups_need_no_build_in_the_cache(monkeypatch, tmp_path, builds):
    groups = [RACK.tolist()]
    res, stored = _cold_start(monkeypatch, tmp_path, _probed(groups=groups))
    assert builds == []  # nothing to infer: the entry point builds the network
    assert "inferred_hierarchy" not in stored.parameters
    network_of(res)
    assert builds == [res]


# -- the drift check's second look at pairs that moved -----------------------------


def _checks(monkeypatch, looks):
    """``_sample`` answering each call from ``looks`` (a factor on the stored
    rates for every pair's bandwidth, per call); the plans it was given are kept."""
    plans = []

    def sample(probe, plan, slots=None):
        factor = looks[len(plans)]
        plans.append(list(plan))
        stored = _probed()
        lat = np.array([stored.latency[i, j] for i, j, _ in plan])
        bw = np.array([stored.bandwidth[i, j] * factor(i, j) for i, j, _ in plan])
        return lat, bw

    monkeypatch.setattr(cache_mod, "_sample", sample)
    return plans


def _slow_pair(plan_pair):
    i0, j0 = plan_pair
    return lambda i, j: 0.3 if (i, j) == (i0, j0) else 1.0


def _recent(**parameters) -> Measurement:
    """:func:`_probed`, finished just now (an entry young enough to be checked)."""
    m = _probed(**parameters)
    now = time.time()
    return Measurement(m.latency, m.bandwidth, HOSTS, started_at=now - 1, finished_at=now,
                       parameters=parameters)  # fmt: skip


def _launch(tmp_path):
    return probe_with_cache(
        None, ProbeParams(), ProbeCache(directory=tmp_path), None, backend="mpi", hostname="h0"
    )


def test_a_pair_that_moved_once_is_looked_at_again_and_the_entry_kept(
    monkeypatch, tmp_path, builds
):
    _cold_start(monkeypatch, tmp_path, _recent())
    first = cache_mod._check_plan(Network.from_measurement(_probed()))
    slow = first[1][:2]
    plans = _checks(monkeypatch, [_slow_pair(slow), lambda i, j: 1.0])
    res = _launch(tmp_path)
    info = res.parameters["cache"]
    assert info["status"] == "hit", info
    assert info["second_look"] == 1
    assert [p[:2] for p in plans[1]] == [slow]  # only the pair that moved, again
    (rec,) = [r for r in info["pairs"] if "first_look" in r]
    assert (rec["src"], rec["dst"]) == slow and not rec.get("moved")
    assert rec["first_look"]["bandwidth_ratio"] == pytest.approx(0.3, rel=1e-3)
    assert rec["bandwidth_ratio"] == pytest.approx(1.0, rel=1e-3)
    assert cache_mod.describe_cache(info).endswith("none moved (1 on a second look)")


def test_a_pair_that_moved_on_both_looks_reprobes(monkeypatch, tmp_path, builds):
    _cold_start(monkeypatch, tmp_path, _recent())
    first = cache_mod._check_plan(Network.from_measurement(_probed()))
    slow = first[0][:2]
    plans = _checks(monkeypatch, [_slow_pair(slow), _slow_pair(slow)])
    fresh = _probed(marker=1)
    monkeypatch.setattr(_engine, "run_probe", lambda *a, **k: fresh)
    res = _launch(tmp_path)
    info = res.parameters["cache"]
    assert info["status"] == "probed", info
    assert info["reason"] == (
        f"the drift check found pairs that moved: ({slow[0]}, {slow[1]}) (on a second look too)"
    )
    assert len(plans) == 2 and res.parameters["marker"] == 1


def test_a_check_where_nothing_moved_takes_one_look(monkeypatch, tmp_path, builds):
    _cold_start(monkeypatch, tmp_path, _recent())
    plans = _checks(monkeypatch, [lambda i, j: 1.0])
    info = _launch(tmp_path).parameters["cache"]
    assert info["status"] == "hit" and "second_look" not in info and len(plans) == 1


@pytest.mark.parametrize("root", [None, 0])
def test_a_hit_builds_the_network_once_for_the_check_and_the_caller(
    monkeypatch, tmp_path, builds, root
):
    _cold_start(monkeypatch, tmp_path, _recent())
    _checks(monkeypatch, [lambda i, j: 1.0])
    builds.clear()
    res = probe_with_cache(
        None, ProbeParams(), ProbeCache(directory=tmp_path), None, backend="mpi",
        hostname="h0", root=root,
    )  # fmt: skip
    assert res.parameters["cache"]["status"] == "hit"
    assert len(builds) == 1  # the drift check's network
    net = network_of(res)  # the entry point's: that one, not a second build
    assert len(builds) == 1 and network_of(res) is net
    assert net.provenance["probe"]["cache"]["status"] == "hit"
    again = Network.from_measurement(res)  # what the caller would have built itself
    np.testing.assert_array_equal(again.latency, net.latency)
    np.testing.assert_array_equal(again.bandwidth, net.bandwidth)
    assert [g.tolist() for g in again.groups] == [g.tolist() for g in net.groups]
    assert again.provenance == net.provenance
    stored = load_measurement(next(tmp_path.glob("*.npz")))
    np.testing.assert_array_equal(res.latency, stored.latency)
    assert not res.latency.flags.writeable
