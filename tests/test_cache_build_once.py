"""A cold start through the probe cache builds the root's network once."""

from __future__ import annotations

import gc

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
