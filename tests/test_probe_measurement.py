"""Measurement objects and files, probe settings, statistics and test hooks (no processes)."""

import os
import re

import numpy as np
import pytest

import rankopt
from rankopt import Measurement, RankoptInputError, load_measurement
from rankopt.probe._common import ProbeParams, TestHooks, check_params, median_mad


def _measurement(n=3, bandwidth=True):
    rng = np.random.default_rng(0)
    lat = rng.uniform(1e-6, 1e-5, (n, n))
    np.fill_diagonal(lat, 0)
    bw = rng.uniform(1e9, 1e10, (n, n)) if bandwidth else None
    if bw is not None:
        np.fill_diagonal(bw, 0)
    counts = np.ones((n, n), dtype=int) - np.eye(n, dtype=int)
    return Measurement(
        latency=lat,
        bandwidth=bw,
        hosts=tuple(f"node{i % 2}" for i in range(n)),
        latency_spread=lat / 10,
        bandwidth_spread=None if bw is None else bw / 10,
        pair_counts=counts,
        bandwidth_counts=counts if bandwidth else None,
        started_at=100.0,
        finished_at=100.5,
        backend="mpi",
        parameters={"repeats": 10, "timeout": 30.0},
    )


@pytest.mark.parametrize("bandwidth", [True, False])
def test_save_load_roundtrip(tmp_path, bandwidth):
    m = _measurement(bandwidth=bandwidth)
    path = m.save(tmp_path / "net.npz")
    back = load_measurement(path)
    np.testing.assert_array_equal(back.latency, m.latency)
    if bandwidth:
        np.testing.assert_array_equal(back.bandwidth, m.bandwidth)
        np.testing.assert_array_equal(back.bandwidth_counts, m.bandwidth_counts)
    else:
        assert back.bandwidth is None and back.bandwidth_counts is None
    np.testing.assert_array_equal(back.latency_spread, m.latency_spread)
    np.testing.assert_array_equal(back.pair_counts, m.pair_counts)
    assert back.hosts == m.hosts
    assert (back.started_at, back.finished_at, back.duration) == (100.0, 100.5, 0.5)
    assert back.backend == "mpi" and back.parameters == m.parameters
    # the documented arrays, readable without pickle
    with np.load(path, allow_pickle=False) as data:
        assert {"latency", "hosts"} <= set(data.files)
        assert data["hosts"].dtype.kind == "U"
        assert ("bandwidth" in data.files) == bandwidth


def test_save_is_atomic_and_replaces(tmp_path):
    target = tmp_path / "net.npz"
    target.write_bytes(b"old")
    _measurement().save(target)
    assert load_measurement(target).n == 3
    assert sorted(os.listdir(tmp_path)) == ["net.npz"], "no temporary file left behind"


def test_save_failure_leaves_no_temp_file(tmp_path):
    target = tmp_path / "is_a_dir"
    target.mkdir()
    with pytest.raises(OSError):
        _measurement().save(target)
    assert sorted(os.listdir(tmp_path)) == ["is_a_dir"]


def test_measurement_is_immutable_and_describes_hosts():
    m = _measurement(n=4)
    with pytest.raises(ValueError):
        m.latency[0, 1] = 1.0
    with pytest.raises(AttributeError):
        m.latency = np.zeros((4, 4))  # type: ignore[misc]
    assert m.n == 4
    assert m.host_groups().tolist() == [0, 1, 0, 1]
    assert m.ranks_per_host() == {"node0": 2, "node1": 2}
    assert "n=4" in repr(m) and "hosts=2" in repr(m)


def test_measurement_rejects_inconsistent_shapes():
    with pytest.raises(RankoptInputError, match="`latency` must be a square matrix"):
        Measurement(np.zeros((2, 3)), None, ("a", "b"))
    with pytest.raises(RankoptInputError, match="`hosts` must name the host of each of the 2"):
        Measurement(np.zeros((2, 2)), None, ("a",))
    with pytest.raises(RankoptInputError, match=r"`bandwidth` must have shape \(2, 2\)"):
        Measurement(np.zeros((2, 2)), np.zeros((3, 3)), ("a", "b"))


def test_load_errors_name_file_and_key(tmp_path):
    path = tmp_path / "partial.npz"
    np.savez(path, latency=np.zeros((2, 2)))
    with pytest.raises(RankoptInputError, match=r"partial\.npz: missing array 'hosts'"):
        load_measurement(path)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(RankoptInputError, match=r"bad\.npz' is not a valid \.npz archive"):
        load_measurement(bad)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, latency=np.zeros((2, 2)), hosts=np.array([object(), object()]))
    with pytest.raises(RankoptInputError, match=r"pickled\.npz', array 'hosts': .* Python objects"):
        load_measurement(pickled)
    npy = tmp_path / "plain.npy"
    np.save(npy, np.zeros((2, 2)))
    with pytest.raises(
        RankoptInputError, match=r"plain\.npy' is a single \.npy array, not an \.npz"
    ):
        load_measurement(npy)
    with pytest.raises(FileNotFoundError):
        load_measurement(tmp_path / "missing.npz")
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, latency=np.zeros((3, 3)), hosts=np.array(["a", "b"]))
    with pytest.raises(RankoptInputError, match=r"wrong\.npz: `hosts` must name"):
        load_measurement(wrong)


def test_solve_and_load_matrix_accept_a_measurement(tmp_path):
    m = _measurement(n=5)
    res = rankopt.solve(m, rng=0)
    assert sorted(res.order.tolist()) == list(range(5))
    # priced with the measured bandwidth: the network's default model, bandwidth included
    kw = rankopt.Network.from_measurement(m).default_model()
    assert kw["bandwidth"] is not None and res.objective == kw["objective"]
    assert res.baseline_cost == pytest.approx(rankopt.cost(m.latency, np.arange(5), **kw))
    assert res.cost == pytest.approx(rankopt.cost(m.latency, res.order, **kw))
    slower = {**kw, "bandwidth": kw["bandwidth"] / 2}
    assert rankopt.cost(m.latency, np.arange(5), **slower) > res.baseline_cost * 1.01
    path = m.save(tmp_path / "m.npz")
    np.testing.assert_allclose(rankopt.load_matrix(path), m.latency)


def test_check_params_defaults_and_errors():
    ok = dict(
        latency_bytes=8,
        bandwidth_bytes=1 << 20,
        repeats=10,
        bandwidth_repeats=3,
        warmup=1,
        timeout=30.0,
        bandwidth=True,
        bw_concurrency=1,
        callback=None,
    )
    assert check_params(**ok) == ProbeParams()
    cases = [
        ({"latency_bytes": 0}, "`latency_bytes` must be at least 1; got 0"),
        ({"bandwidth_bytes": 1.5}, "`bandwidth_bytes` must be an integer; got 1.5"),
        ({"repeats": 0}, "`repeats` must be at least 1"),
        ({"bandwidth_repeats": -1}, "`bandwidth_repeats` must be at least 1"),
        ({"warmup": -1}, "`warmup` must be at least 0"),
        ({"timeout": 0}, "`timeout` must be positive and finite"),
        ({"timeout": float("inf")}, "`timeout` must be positive and finite"),
        ({"bandwidth": "yes"}, "`bandwidth` must be True or False"),
        ({"bw_concurrency": 0}, "`bw_concurrency` must be at least 1"),
        ({"callback": 3}, "`callback` must be callable or None"),
        ({"repeats": True}, "`repeats` must be an integer"),
        ({"uplink_flows": 1}, "`uplink_flows` must be at least 2"),
        ({"bandwidth_mode": "some"}, "`bandwidth_mode` must be one of 'auto'"),
        ({"repeat": 3}, "unknown probe setting(s) 'repeat'; the settings are latency_bytes"),
    ]
    for change, message in cases:
        with pytest.raises(RankoptInputError, match=re.escape(message)):
            check_params(**(ok | change))


def test_invalid_settings_are_rejected_before_any_communication():
    # the settings are checked before the engine is even imported or the group looked at
    from rankopt.probe import mpi, torch

    with pytest.raises(RankoptInputError, match="`repeats` must be at least 1"):
        mpi.measure(object(), repeats=0)
    with pytest.raises(RankoptInputError, match="`timeout` must be positive"):
        torch.measure(object(), timeout=-1)


def test_fingerprint_differs_with_settings():
    assert ProbeParams().fingerprint() == ProbeParams().fingerprint()
    assert ProbeParams(repeats=11).fingerprint() != ProbeParams().fingerprint()


def test_median_mad():
    assert median_mad(np.array([1.0, 2.0, 3.0, 10.0])) == (2.5, 1.0)
    assert median_mad(np.array([4.0])) == (4.0, 0.0)


def test_test_hooks_parsing():
    env = {"RANKOPT_PROBE_TEST_DELAY": "1:0.002,2:0.5:3", "RANKOPT_PROBE_TEST_STALL": "2:3:9.5"}
    h1 = TestHooks.from_env(1, env)
    assert h1.delay_to(0) == 0.002 and h1.delay_to(5) == 0.002 and h1.stall_round == 0
    h2 = TestHooks.from_env(2, env)
    assert h2.delay_to(3) == 0.5 and h2.delay_to(0) == 0.0
    assert (h2.stall_round, h2.stall_seconds) == (3, 9.5)
    assert TestHooks.from_env(0, env) == TestHooks()
    with pytest.raises(RankoptInputError, match="malformed test hook"):
        TestHooks.from_env(0, {"RANKOPT_PROBE_TEST_STALL": "2:x"})
    env = {"RANKOPT_PROBE_TEST_STALL": "1:2:stop", "RANKOPT_PROBE_TEST_SKEW": "0:2:0.5"}
    assert TestHooks.from_env(1, env).stall_seconds == np.inf
    assert (TestHooks.from_env(0, env).skew_round, TestHooks.from_env(0, env).skew_seconds) == (
        2,
        0.5,
    )
    with pytest.raises(RankoptInputError, match="RANKOPT_PROBE_TEST_SKEW"):
        TestHooks.from_env(0, {"RANKOPT_PROBE_TEST_SKEW": "0:2"})
