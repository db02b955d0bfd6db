"""Tests of the namespace testbed.

Pure-Python parts run everywhere.  Tests marked ``root`` build real namespaces
and run only as root where ``ip netns`` works; the short end-to-end experiment
(the user's path ``python -m rankopt.mpi`` with default flags, next to the
launch, ideal and random orders, Open MPI ring allreduce) is the CI version of
``bench/testbed_allreduce.py``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import uuid

import numpy as np
import pytest

import rankopt
from rankopt.testbed import Testbed, TestbedError, Topology, parse_rate, parse_time
from rankopt.testbed import netns as topo_mod
from rankopt.testbed.experiment import ExperimentConfig, best_fraction_interval, summarize
from rankopt.testbed.fidelity import truth_network
from rankopt.testbed.hierarchy import infer_bandwidth_levels, probe_network
from rankopt.testbed.launch import hosts_option, placement
from rankopt.testbed.report import format_report, summary_table
from rankopt.testbed.userpath import parse_report, user_argv

MB = 1 << 20


# -- pure Python ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("200mbit", 25e6),
        ("1gbit", 125e6),
        ("8kbit", 1e3),
        ("3MB/s", 3e6),
        ("25Gbit/s", 3.125e9),
        (5.0, 5.0),
    ],
)
def test_parse_rate(text, expected):
    assert parse_rate(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["fast", "10 furlongs", "-1mbit", "0"])
def test_parse_rate_rejects(bad):
    with pytest.raises(ValueError, match="`rate` must"):
        parse_rate(bad)


def test_parse_time():
    assert parse_time("5ms") == pytest.approx(5e-3)
    assert parse_time("250us") == pytest.approx(2.5e-4)
    with pytest.raises(ValueError, match="`latency` must be non-negative"):
        parse_time(-1.0)


def test_topology_shape_groups_and_matrices():
    t = Topology(2, 2, 2, rates=("1gbit", "400mbit", "200mbit"), latency=(0, "1ms", "2ms"))
    assert (t.n_hosts, t.n_racks, t.levels) == (8, 4, 3)
    assert [g.tolist() for g in t.groups()] == [[0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 0, 0, 1, 1, 1, 1]]
    lat, bw = t.matrices(base_latency=0.0)
    assert bw[0, 1] == pytest.approx(125e6) and bw[0, 2] == pytest.approx(50e6)
    assert bw[0, 4] == pytest.approx(25e6)
    # a cross-pod path crosses two rack uplinks and two pod uplinks
    assert lat[0, 4] == pytest.approx(2 * 1e-3 + 2 * 2e-3)
    assert lat[0, 2] == pytest.approx(2e-3) and lat[0, 1] == 0.0
    assert t.address(0) == "10.213.0.1" and t.address(251) == "10.213.1.2"
    assert Topology.from_dict(t.to_dict()) == t
    assert "pod uplink 200 Mbit/s" in t.describe()


def test_topology_unequal_racks():
    t = Topology(racks=(4, 3, 2), rates=("1gbit", "200mbit"))
    assert (t.n_hosts, t.n_racks, t.racks_per_pod, t.levels) == (9, 3, 3, 2)
    assert t.groups()[0].tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2]
    assert list(t.rack_hosts(1)) == [4, 5, 6] and list(t.rack_hosts(2)) == [7, 8]
    _, bw = t.matrices()
    assert bw[4, 6] == pytest.approx(125e6) and bw[3, 4] == pytest.approx(25e6)
    assert "racks of 4,3,2 hosts" in t.describe()
    assert Topology.from_dict(t.to_dict()) == t
    # racks fill pods in order
    p = Topology(racks_per_pod=2, pods=2, racks=(3, 1, 2, 2))
    assert p.groups()[1].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert list(p.pod_hosts(1)) == [4, 5, 6, 7] and p.level_of(3, 4) == 2
    # equal sizes are the plain shape
    assert Topology(racks=(2, 2)) == Topology(2, 2)
    with pytest.raises(ValueError, match="`racks` must give 4 rack sizes"):
        Topology(racks_per_pod=2, pods=2, racks=(2, 2, 2))
    with pytest.raises(ValueError, match="`racks` must be positive integers"):
        Topology(racks=(2, 0))


def test_placement_unequal_racks():
    t = Topology(racks=(4, 3, 2))
    hosts = placement(t.n_hosts, "interleaved", groups=t.groups())
    assert hosts.tolist() == [0, 4, 7, 1, 5, 8, 2, 6, 3]
    # the shape and the groups of an equal tree deal alike
    e = Topology(2, 2, 2)
    assert (
        placement(8, "interleaved", groups=e.groups()).tolist()
        == placement(8, "interleaved", shape=(2, 2, 2)).tolist()
    )
    assert hosts_option(t, "contiguous").tolist() == list(range(9))
    assert hosts_option(t, "8,7,6,5,4,3,2,1,0").tolist() == list(range(8, -1, -1))
    with pytest.raises(ValueError, match="must name hosts 0..8"):
        hosts_option(t, "0,9")
    with pytest.raises(ValueError, match="comma list of host indices"):
        hosts_option(t, "racks")


def test_cli_parses_racks_and_exec():
    from rankopt.cli import build_parser
    from rankopt.cli._testbed import _topology, _user_args

    args = build_parser().parse_args(["testbed", "run", "--racks", "4,3,2", "--objective", "time"])
    assert _topology(args).rack_sizes == (4, 3, 2)
    assert _user_args(args) == ("--objective", "time")
    ex = build_parser().parse_args(
        ["testbed", "exec", "--engine", "gloo", "--hosts", "1,0", "--", "python", "x.py"]
    )
    assert (ex.engine, ex.hosts, ex.program[-2:]) == ("gloo", "1,0", ["python", "x.py"])
    assert ex.command == "testbed"  # the subcommand's name, which error messages read


class _Stopped(Exception):
    """What this test's own SIGTERM handler raises: the command left SIGTERM alone."""


def test_sigterm_stops_the_job_of_exec_on_an_attached_testbed(monkeypatch, capsys):
    # `testbed exec --attach` asked to stop must stop its job (kill its process group),
    # not die and leave it running in the namespaces of a testbed it does not own
    import signal
    import sys

    from rankopt.cli import main
    from rankopt.testbed import launch

    tb = Testbed(Topology(racks=(2, 1), rates=("1gbit", "200mbit")), prefix="rkfake")
    monkeypatch.setattr(Testbed, "attach", classmethod(lambda cls, prefix: tb))
    started: list[subprocess.Popen[str]] = []
    killers: list[subprocess.Popen[bytes]] = []

    def job(tb_, hosts, argv, **kw):  # the launcher: a child in a session of its own
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                start_new_session=True, text=True)  # fmt: skip
        started.append(proc)
        killers.append(subprocess.Popen(["sh", "-c", f"sleep 0.5; kill -TERM {os.getpid()}"]))
        return launch._wait([proc], 30.0, "job")[0]

    def stopped(signum, frame):
        raise _Stopped

    monkeypatch.setattr(launch, "run_mpi", job)
    before = signal.signal(signal.SIGTERM, stopped)
    try:
        code = main(["testbed", "exec", "--attach", "--prefix", "rkfake", "--", "prog"])
        assert signal.getsignal(signal.SIGTERM) is stopped  # put back as it was
    finally:
        signal.signal(signal.SIGTERM, before)
        for p in started:
            if p.poll() is None:
                p.kill()
                p.wait()
        for k in killers:  # reaped, not left a zombie
            k.wait()
    assert code == 130 and "interrupted" in capsys.readouterr().err
    assert len(started) == 1 and started[0].returncode == -signal.SIGKILL


def test_exec_on_a_testbed_that_is_not_up_is_one_line(capsys):
    # the program after -- must not take the subcommand's place: an error is one line
    from rankopt.cli import main

    assert main(["testbed", "exec", "--attach", "--prefix", "rkno", "--", "true"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rankopt testbed: error: no testbed with prefix 'rkno' is up"), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_user_path_commands_and_report_parsing():
    mpi = user_argv("mpi-ring", ["/usr/bin/python3", "-m", "w", "cfg"], "o.txt")
    assert mpi[1:] == ["-m", "rankopt.mpi", "--save", "o.txt", "-m", "w", "cfg"]
    gloo = user_argv("gloo", ["python", "w.py"], "o.txt", ["--nbytes", "1e6"])
    assert gloo[1:] == [
        "-m",
        "rankopt.run",
        "--save",
        "o.txt",
        "--nbytes",
        "1e6",
        "--",
        "python",
        "w.py",
    ]
    got = parse_report("  modelled speedup  : 1.000x\n")
    assert got["modelled_speedup"] == 1.0 and got["modelled_interval"] is None
    assert parse_report("nothing")["modelled_speedup"] is None


def test_timing_loop_permutes_jobs_after_the_first_repeat():
    from rankopt.testbed._worker_common import timing_loop

    def run(seed):
        calls = []

        def allreduce(o, buf):
            calls.append((o, buf))
            return float(o) + (0.5 if buf == 7 else 0.0)

        cfg = {"jobs": [[0, 7], [1, 7], [2, 7], [3, 9]], "repeats": 6, "seed": seed}
        times = timing_loop(cfg, allreduce, make_buffer=lambda b: b)
        return calls, times

    calls, times = run(3)
    # each job's list holds its own time, once per repeat
    assert times == [[0.5] * 6, [1.5] * 6, [2.5] * 6, [3.0] * 6]
    timed = [c for c in calls if c[1] != 64 * 1024][:]
    rounds = [timed[4 * r : 4 * r + 4] for r in range(6)]
    assert rounds[0] == [(0, 7), (1, 7), (2, 7), (3, 9)]
    assert all(sorted(r) == sorted(rounds[0]) for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1  # the order moves between repeats
    assert run(3)[0] == calls  # every rank draws the same permutations
    assert run(4)[0] != calls


def test_timing_loop_runs_blocks_back_to_back():
    from rankopt.testbed._worker_common import timing_loop

    calls = []

    def allreduce(o, buf):
        calls.append(o)
        return float(o)

    cfg = {"jobs": [[0, 7], [1, 7], [2, 7]], "repeats": 5, "block": 2, "seed": 1}
    times = timing_loop(cfg, allreduce, make_buffer=lambda b: b)
    assert times == [[0.0] * 5, [1.0] * 5, [2.0] * 5]
    timed = calls[3:]  # after one warm-up per order
    assert len(timed) == 15
    # rounds of 2, 2, then 1 run of each order, a visit's runs one after the other
    r0, r1, r2 = timed[:6], timed[6:12], timed[12:]
    assert all(r[i] == r[i + 1] for r in (r0, r1) for i in (0, 2, 4))
    assert sorted(r1) == sorted(r0) and sorted(r2) == [0, 1, 2]
    assert timed[:6] == [0, 0, 1, 1, 2, 2]
    from rankopt.testbed.experiment import ExperimentConfig

    with pytest.raises(ValueError, match="`block` must be a positive integer; got 0"):
        ExperimentConfig(block=0)


def test_topology_rejects_bad_input():
    with pytest.raises(ValueError, match="`hosts_per_rack` must be a positive integer"):
        Topology(0)
    with pytest.raises(ValueError, match="at least 2 hosts"):
        Topology(1, 1, 1)
    with pytest.raises(ValueError, match="host level is not supported"):
        Topology(2, 2, latency=("1ms",))


def test_testbed_rejects_bad_prefix():
    with pytest.raises(ValueError, match="`prefix` must be"):
        Testbed(Topology(), prefix="Bad-Prefix")


def test_require_namespaces_refuses_non_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(TestbedError, match="needs root"):
        topo_mod.require_namespaces("rkq")


def test_placement():
    assert placement(8, "interleaved", shape=(2, 4)).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    # 3 levels: consecutive ranks alternate pods, then racks
    assert placement(8, "interleaved", shape=(2, 2, 2)).tolist() == [0, 4, 2, 6, 1, 5, 3, 7]
    assert placement(4, "contiguous").tolist() == [0, 1, 2, 3]
    r = placement(8, "random", rng=3)
    assert sorted(r.tolist()) == list(range(8))
    assert r.tolist() == placement(8, "random", rng=3).tolist()
    with pytest.raises(ValueError, match="does not multiply"):
        placement(8, "interleaved", shape=(3, 3))


def test_truth_network_follows_placement():
    t = Topology(2, 2, rates=("1gbit", "200mbit"))
    hosts = np.array([0, 2, 1, 3])
    net = truth_network(t, hosts)
    assert net["groups"][0].tolist() == [0, 1, 0, 1]
    assert net["bandwidth"][0, 2] == pytest.approx(125e6)
    assert net["bandwidth"][0, 1] == pytest.approx(25e6)


def _shared_probe_matrix(topo, hosts, seed=0):
    """Configured pair bandwidth; pairs across an uplink cut up to 4x, as when
    a probe's concurrent transfers shared that uplink."""
    net = truth_network(topo, hosts)
    bw = net["bandwidth"].copy()
    gen = np.random.default_rng(seed)
    cut = (gen.random(bw.shape) < 0.5) & (net["groups"][0][:, None] != net["groups"][0])
    bw[cut] /= gen.uniform(1.5, 4.0, size=int(cut.sum()))
    return bw


@pytest.mark.parametrize("seed", range(10))
def test_infer_bandwidth_levels_three_levels(seed):
    topo = Topology(2, 2, 2, rates=("1gbit", "400mbit", "200mbit"))
    hosts = placement(8, "interleaved", shape=(2, 2, 2))
    bw = _shared_probe_matrix(topo, hosts, seed)
    levels = infer_bandwidth_levels(bw, [f"h{h}" for h in hosts])
    truth = [np.arange(8), *truth_network(topo, hosts)["groups"]]
    assert len(levels) == 3
    for got, want in zip(levels, truth, strict=True):
        # same partition (labels may differ)
        assert (got[:, None] == got[None, :]).tolist() == (want[:, None] == want[None, :]).tolist()


def test_measured_network_is_the_core_inference():
    import rankopt

    topo = Topology(4, 2, rates=("1gbit", "200mbit"))
    hosts = placement(8, "interleaved", shape=(2, 4))
    m = type(
        "M",
        (),
        {
            "latency": np.zeros((8, 8)),
            "bandwidth": _shared_probe_matrix(topo, hosts),
            "hosts": [f"h{h}" for h in hosts],
        },
    )()
    net = rankopt.Network.from_measurement(m)
    assert net.groups[1].tolist() == [0, 1, 0, 1, 0, 1, 0, 1]
    with pytest.warns(DeprecationWarning, match="Network.from_measurement"):
        old = probe_network(m)
    assert [g.tolist() for g in old["groups"]] == [g.tolist() for g in net.groups]
    for a, b in zip(old["uplink_bandwidth"], net.uplinks, strict=True):
        assert a.tolist() == b.tolist()


def test_summary_and_report():
    rows = [
        {"engine": "mpi-ring", "size": MB, "label": lb, "times": [m], "median": m}
        for lb, m in (
            ("launch", 4.0),
            ("user", 1.0),
            ("user-replay", 1.02),
            ("ideal", 0.95),
            ("random-0", 2.0),
            ("random-1", 3.0),
        )
    ]
    user = {"mpi-ring": {"modelled_speedup": 3.9, "modelled_interval": [3.5, 4.1], "overhead_s": 2}}
    (s,) = summarize(rows, user)
    assert s["best_label"] == "ideal"
    assert s["speedup_user"] == pytest.approx(4.0)
    assert s["fraction_of_best"] == pytest.approx(0.95)
    assert s["speedup_random_median"] == pytest.approx(4.0 / 2.5)
    assert s["modelled_speedup"] == 3.9 and s["user_replay"] == 1.02
    text = format_report({"describe": "x", "summary": [s]})
    assert "4.00x" in text and "95%" in text and "3.90x (3.5-4.1)" in text
    assert summary_table([s], markdown=True)[1].startswith("|---|")
    (bare,) = summarize([r for r in rows if not r["label"].startswith("user")])
    assert bare["user"] is None and bare["fraction_of_best"] is None
    assert bare["fraction_of_best_interval"] is None
    assert s["fraction_of_best_interval"] is None  # one call per order: no spread to read
    assert s["solo"] is None and s["fraction_of_best_solo"] is None
    assert s["solo_mean"] is None and s["order_of_best_solo"] is None


def test_the_fraction_of_best_comes_with_the_spread_of_the_calls():
    gen = np.random.default_rng(3)

    def calls(centre, spread, k=12):
        return (centre * np.exp(spread * gen.standard_normal(k))).tolist()

    # the user path's order replayed: the same order, calls spread +-15%
    same = {"user": calls(2.5, 0.15), "user-replay": calls(2.5, 0.15), "launch": calls(7.0, 0.1)}
    rows = [
        {"engine": "mpi-ring", "size": MB, "label": lb, "times": t, "median": float(np.median(t))}
        for lb, t in same.items()
    ]
    (s,) = summarize(rows)
    lo, hi = s["fraction_of_best_interval"]
    assert lo <= s["fraction_of_best"] <= hi and hi >= 0.95 and lo < 0.95
    assert (lo, hi) == best_fraction_interval(same)
    assert f"{s['fraction_of_best']:.0%} ({lo * 100:.0f}-{hi:.0%})" in format_report(
        {"summary": [s]}
    )
    # an order clearly faster than the user path's, with calls far steadier than the gap
    slow = {"user": calls(2.5, 0.02), "ideal": calls(2.0, 0.02), "launch": calls(7.0, 0.02)}
    lo, hi = best_fraction_interval(slow)
    assert hi < 0.95 and lo > 0.7
    # the user path the fastest of them all, steady: its interval is 1.0 only
    assert best_fraction_interval({"user": [1.0, 1.0], "launch": [2.0, 2.1]}) == (1.0, 1.0)
    # too few calls, or no user path: no interval
    assert best_fraction_interval({"user": [1.0], "launch": [2.0, 2.1]}) is None
    assert best_fraction_interval({"launch": [2.0, 2.1]}) is None


def test_summary_keeps_orders_timed_in_jobs_of_their_own_apart():
    rows = [
        {"engine": "mpi-ring", "size": MB, "label": lb, "times": [m], "median": m}
        for lb, m in (
            ("launch", 4.0),
            ("user", 1.2),
            ("user-replay", 1.0),
            ("ideal", 1.1),
            ("user-replay/solo", 1.25),
            ("ideal/solo", 1.14),
        )
    ]
    (s,) = summarize(rows)
    # the solo rows are not orders of the timing job: best stays the replay there
    assert s["best_label"] == "user-replay" and s["fraction_of_best"] == pytest.approx(1 / 1.2)
    assert s["solo"] == {"user-replay": 1.25, "ideal": 1.14}
    assert s["fraction_of_best_solo"] == pytest.approx(1.14 / 1.2)
    assert "ideal 1.140; user path 95% of the best of them" in format_report({"summary": [s]})
    # the user path faster than every solo job: 100%, not more
    rows[4]["median"] = rows[5]["median"] = 1.5
    (s,) = summarize(rows)
    assert s["fraction_of_best_solo"] == 1.0


def test_solo_jobs_run_in_rounds_the_orders_in_turn(monkeypatch, tmp_path):
    # two solo orders in three rounds: six jobs, the turn reversed every other round;
    # each row holds every round's calls, and the summary sets the orders' totals apart
    from rankopt.testbed import experiment

    order_of = {(0, 1, 2, 3): "user-replay", (0, 2, 1, 3): "ideal"}
    ran = []
    # the user's order meets a neighbour on the first and last of its jobs, the ideal one
    # in its second: by the medians of calls the user's order is behind, by total ahead
    calls = {"user-replay": iter([[2.0, 2.0, 1.0], [1.0, 1.0, 1.0], [2.0, 1.0, 1.0]]),
             "ideal": iter([[1.1, 1.1, 1.1], [3.0, 3.0, 1.1], [1.1, 1.1, 1.1]])}  # fmt: skip

    def worker(tb, hosts, engine, job, wd, timeout):
        (order,) = job["orders"]
        assert job["block"] == job["repeats"] == 3 and job["jobs"] == [[0, MB]]
        name = order_of[tuple(order)]
        ran.append(name)
        return {"times": [next(calls[name])]}

    monkeypatch.setattr(experiment, "_run_worker", worker)
    cfg = ExperimentConfig(sizes=(MB,), repeats=3, solo=("user-replay", "best"), solo_rounds=3)
    timed = {"user-replay": np.array([0, 1, 2, 3]), "ideal": np.array([0, 2, 1, 3])}
    visits = [
        {"engine": "mpi-ring", "size": MB, "label": lb, "times": [m], "median": m}
        for lb, m in (("launch", 4.0), ("user", 1.2), ("user-replay", 1.3), ("ideal", 1.0))
    ]
    rows = list(visits)
    experiment._time_solo(None, cfg, None, "mpi-ring", timed, visits, tmp_path, print, rows, None)
    assert ran == ["user-replay", "ideal", "ideal", "user-replay", "user-replay", "ideal"]
    mine, best = rows[-2:]
    assert mine["label"] == "user-replay/solo" and best["label"] == "best/solo"
    assert best["order_label"] == "ideal" and len(best["rounds"]) == 3
    assert mine["times"] == [2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0]
    (s,) = summarize(rows)
    assert s["solo"] == {"user-replay": 1.0, "best": 1.1}
    assert s["solo_mean"] == pytest.approx({"user-replay": 12 / 9, "best": 13.7 / 9})
    assert s["order_of_best_solo"] == 1.0
    assert "by total time alone: the user path's order 100%" in format_report({"summary": [s]})
    # the other way round: the order found is behind the best by its total
    rows[-2]["times"] = [2.0] * 9
    (s,) = summarize(rows)
    assert s["order_of_best_solo"] == pytest.approx(13.7 / 18)
    with pytest.raises(ValueError, match="`solo_rounds` must be a positive integer; got 0"):
        ExperimentConfig(solo_rounds=0)
    # where the user path's order is the fastest in visits, ``best`` is that order again
    # (one job, under its first name) and ``rival`` the fastest other order
    visits[2]["median"] = 0.9
    for named, second in ((("user-replay", "best"), None), (("user-replay", "rival"), "ideal")):
        ran.clear()
        calls.update(
            {"user-replay": iter([[1.0] * 3] * 2), "ideal": iter([[1.2] * 3] * 2)}
        )  # fmt: skip
        cfg = ExperimentConfig(sizes=(MB,), repeats=3, solo=named, solo_rounds=2)
        out = list(visits)
        experiment._time_solo(
            None, cfg, None, "mpi-ring", timed, visits, tmp_path, print, out, None
        )
        assert ran == ["user-replay"] * 2 if second is None else ran == [
            "user-replay", "ideal", "ideal", "user-replay"
        ]  # fmt: skip
        (s,) = summarize(out)
        if second is None:
            assert s["order_of_best_solo"] is None and s["solo"] == {"user-replay": 1.0}
        else:
            assert out[-1]["order_label"] == "ideal" and s["order_of_best_solo"] == 1.0


def test_experiment_config_rejects_an_unknown_solo_order():
    with pytest.raises(ValueError, match="`solo` label 'fastest' is not an order"):
        ExperimentConfig(solo=("fastest",))
    assert ExperimentConfig(solo=["best", "random-1"]).solo == ("best", "random-1")
    assert ExperimentConfig(solo=["rival"]).solo == ("rival",)


def test_experiment_config_rejects_unknown_engine():
    with pytest.raises(ValueError, match="unknown engine 'nccl'"):
        ExperimentConfig(engines=("nccl",))


# -- real namespaces -----------------------------------------------------------
@functools.cache
def _namespaces_reason() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs iproute2 (ip, tc)"
    name = f"rkq{uuid.uuid4().hex[:6]}"
    p = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if p.returncode != 0:
        return f"`ip netns` does not work here: {p.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def _require_ns() -> None:
    reason = _namespaces_reason()
    if reason:
        pytest.skip(reason)


def _prefix() -> str:
    return f"rkq{uuid.uuid4().hex[:4]}"


@pytest.mark.root
def test_up_check_down_idempotent():
    _require_ns()
    prefix = _prefix()
    tb = Testbed(Topology(2, 2, rates=("1gbit", "200mbit")), prefix=prefix)
    try:
        tb.up()
        assert Testbed.attach(prefix).topology == tb.topology
        with pytest.raises(TestbedError, match="exists"):
            Testbed(tb.topology, prefix=prefix).up()
        from rankopt.testbed import check

        results = check(tb, seconds=1.0)
        assert [r.name for r in results] == ["host", "rack"]
        assert all(r.ok(0.15) for r in results), [str(r) for r in results]
        with pytest.raises(TestbedError, match="must be one of"):
            tb.set_uplink_rate("r7", 1e6)
        # a halved rack uplink while the testbed runs: both racks' traffic sees it
        tb.set_uplink_rate("r0", parse_rate("100mbit"))
        rack = check(tb, seconds=1.0)[1]
        assert 0.35 < rack.measured / results[1].measured < 0.65, str(rack)
    finally:
        removed = tb.down()
    assert len(removed) == 5
    assert tb.down() == []
    with pytest.raises(TestbedError, match="no testbed"):
        Testbed.attach(prefix)


@pytest.mark.root
def test_teardown_on_error(monkeypatch):
    _require_ns()
    prefix = _prefix()
    tb = Testbed(Topology(2, 2), prefix=prefix)
    calls = {"n": 0}
    real = topo_mod._run

    def failing(cmd, check=True):
        calls["n"] += 1
        if calls["n"] == 12:
            raise TestbedError("injected failure")
        return real(cmd, check)

    monkeypatch.setattr(topo_mod, "_run", failing)
    with pytest.raises(TestbedError, match="injected"), tb:
        pass
    monkeypatch.undo()
    assert topo_mod.existing_namespaces(prefix) == []


def _exec(*argv: str) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run(
        [sys.executable, "-m", "rankopt", "testbed", "exec", "--prefix", _prefix(), *argv],
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.root
@pytest.mark.mpi
def test_exec_runs_a_command_on_every_host():
    _require_ns()
    if shutil.which("mpirun") is None:
        pytest.skip("needs Open MPI's mpirun")
    cmd = 'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE on $(hostname)"'
    p = _exec("--racks", "2,1", "--hosts", "2,0,1", "--", "sh", "-c", cmd)
    assert p.returncode == 0, p.stderr
    lines = sorted(p.stdout.split("\n")[:-1])
    assert [ln.split(" on ")[0] for ln in lines] == [f"rank {r} of 3" for r in range(3)]
    hosts = dict(ln.replace("rank ", "").split(" of 3 on ") for ln in lines)
    assert [hosts[str(r)].rsplit("-", 1)[1] for r in range(3)] == ["h2", "h0", "h1"]
    assert _exec("--hosts", "contiguous", "--", "sh", "-c", "exit 3").returncode == 3


@pytest.mark.root
def test_exec_gloo_environment():
    _require_ns()
    cmd = 'echo "$RANK/$WORLD_SIZE $LOCAL_RANK $(hostname) $MASTER_ADDR:$MASTER_PORT"'
    p = _exec("--engine", "gloo", "--hosts-per-rack", "2", "--", "sh", "-c", cmd)
    assert p.returncode == 0, p.stderr
    got = sorted(p.stdout.split())
    ranks = sorted(w for w in got if "/" in w)
    assert ranks == ["0/4", "1/4", "2/4", "3/4"]
    # interleaved over 2 racks of 2: launch ranks 0, 1 on hosts 0, 2
    assert all(w.startswith("10.213.0.1:") for w in got if ":" in w)


@pytest.mark.root
@pytest.mark.torch
@pytest.mark.slow
def test_gloo_broadcast_and_reduce_run_the_trees_its_engine_names(tmp_path):
    """Timing signature (``bench/gloo_check.py``): the order each model calls fast is fast.

    Two racks of four behind a 200 Mbit/s uplink: Gloo's binomial broadcast
    (distance 1 first) crosses it four times at once with the racks
    contiguous and once interleaved, MPICH's binomial the other way round;
    Gloo's reduce is a ring (interleaved: every hop crosses).
    """
    _require_ns()
    pytest.importorskip("torch")
    from rankopt.engines import gloo
    from rankopt.testbed.experiment import time_orders

    topo = Topology(4, 2, rates=("1gbit", "200mbit"))
    hosts = np.arange(8)
    orders = [list(range(8)), [0, 4, 1, 5, 2, 6, 3, 7]]  # contiguous, interleaved
    net = truth_network(topo, hosts)
    lat = net.pop("latency")
    nbytes = 4 * MB
    with Testbed(topo, prefix=_prefix()) as tb:
        for coll in ("broadcast", "reduce"):
            times = time_orders(
                tb, hosts, "gloo", orders, [(0, nbytes), (1, nbytes)],
                workdir=tmp_path, timeout=240, collective=coll,
            )  # fmt: skip
            contiguous, interleaved = (float(np.median(t)) for t in times)
            model = gloo.algorithm(coll, nbytes, 8)[0]
            want = [rankopt.cost(lat, o, coll, model, nbytes=nbytes, **net) for o in orders]
            # the model's ratio is about 3x either way; the measurement must side with it
            assert (contiguous < interleaved) == (want[0] < want[1]), (coll, times, want)
            slow, fast = max(contiguous, interleaved), min(contiguous, interleaved)
            assert slow > 1.5 * fast, (coll, times)


@pytest.mark.root
@pytest.mark.mpi
@pytest.mark.slow
def test_experiment_ci():
    """Short end-to-end run: the user's path with default flags beats the interleaved launch."""
    _require_ns()
    pytest.importorskip("mpi4py")
    if shutil.which("mpirun") is None:
        pytest.skip("needs Open MPI's mpirun")
    from rankopt.testbed.experiment import run_experiment

    cfg = ExperimentConfig(
        engines=("mpi-ring",), sizes=(4 * MB,), n_random=1, repeats=3, timeout=240, solo=("best",)
    )
    with Testbed(Topology(4, 2, rates=("1gbit", "200mbit")), prefix=_prefix()) as tb:
        report = run_experiment(tb, cfg)
    (s,) = report["summary"]
    user = report["user"]["mpi-ring"]
    assert user["argv"][1:3] == ["-m", "rankopt.mpi"] and user["order"] is not None
    assert user["order_matches"], user
    labels = {r["label"] for r in report["results"]}
    assert {"launch", "user", "user-replay", "ideal", "random-0"} <= labels
    # the fastest order of the timing job, again in a job of its own: its repeats back to back
    (solo,) = [r for r in report["results"] if r["label"] == "best/solo"]
    assert len(solo["times"]) == 3 and solo["order_label"] != "user"
    assert s["solo"] == {"best": solo["median"]} and s["fraction_of_best_solo"] <= 1.0
    assert s["modelled_speedup"] is not None and s["overhead_s"] is not None
    # configured ratio is 4x; a busy 2-core machine costs some of it
    assert s["speedup_best"] >= 2.5, format_report(report)
    assert s["speedup_user"] >= 2.5, format_report(report)
    assert s["fraction_of_best"] >= 0.8, format_report(report)


def test_an_on_off_tenant_flow_starts_at_a_random_phase_of_its_cycle():
    from rankopt.testbed._tenant_flow import cycle_start

    def on_at(t, start, on, off):
        return (t - start) % (on + off) < on

    for on, off in ((30.0, 30.0), (2.0, 2.0), (1.0, 3.0)):
        starts = [cycle_start(100.0, on, off, seed) for seed in range(2000)]
        assert all(100.0 - (on + off) <= s <= 100.0 for s in starts)
        # on at the start, and 10 s later, as often as the pattern is on
        for t in (100.0, 110.0):
            share = np.mean([on_at(t, s, on, off) for s in starts])
            assert abs(share - on / (on + off)) < 0.04, (on, off, t, share)
    assert cycle_start(100.0, 5.0, 0.0, 3) == 100.0  # always on: no pattern to enter
