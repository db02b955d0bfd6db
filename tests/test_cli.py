"""The rankopt command line, run as a user runs it (subprocess)."""

import json
import subprocess
import sys

import numpy as np
import pytest

import rankopt


def run(*args, check=False):
    p = subprocess.run(
        [sys.executable, "-m", "rankopt", *args], capture_output=True, text=True, timeout=120
    )
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_demo():
    p = run("demo", check=True)
    assert "example cloud: 48 VMs" in p.stdout and "speedup" in p.stdout
    speed = float(p.stdout.split("speedup")[1].split(":")[1].split("x")[0])
    assert speed > 2.0
    order = [int(x) for x in p.stdout.split("full order:")[1].split()]
    assert sorted(order) == list(range(48))


def test_solve_json_matches_library(tmp_path):
    cloud = rankopt.synthetic_cloud(2, 2, 4, rng=5)
    f = tmp_path / "lat.npy"
    np.save(f, cloud.latency)
    out = tmp_path / "order.txt"
    p = run("solve", str(f), "--json", "--seed", "3", "--order-out", str(out), check=True)
    d = json.loads(p.stdout)
    lib = rankopt.solve(cloud.latency, rng=3)
    assert d["order"] == lib.order.tolist() and d["cost"] == pytest.approx(lib.cost)
    assert [int(x) for x in out.read_text().split()] == d["order"]


def test_solve_units_and_quiet(tmp_path):
    f = tmp_path / "m.csv"
    f.write_text("h,a,b,c\na,0,1,9\nb,1,0,2\nc,9,2,0\n")
    p = run("-q", "solve", str(f), "--unit", "ms", check=True)
    assert sorted(int(x) for x in p.stdout.split()) == [0, 1, 2]


@pytest.mark.parametrize(
    "args, code, msg",
    [
        (
            ("solve", "missing.npy"),
            1,
            "rankopt solve: error: matrix file 'missing.npy' does not exist.",
        ),
        (
            ("solve", "{nan}"),
            1,
            "`latency` must be finite; latency[0, 1] is nan",
        ),
        (("solve", "{ok}", "--method", "magic"), 2, "invalid choice: 'magic'"),
        (("solve", "{ok}", "--objective", "fast"), 2, "invalid choice: 'fast'"),
        (("frobnicate",), 2, "invalid choice: 'frobnicate'"),
    ],
)
def test_errors(tmp_path, args, code, msg):
    nan = tmp_path / "nan.npy"
    np.save(nan, np.array([[0, np.nan], [1, 0]]))
    ok = tmp_path / "ok.npy"
    np.save(ok, np.array([[0, 1.0], [1, 0]]))
    args = [a.format(nan=nan, ok=ok) for a in args]
    p = run(*args)
    assert p.returncode == code
    assert msg in p.stderr
    if code == 1:
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_debug_shows_traceback():
    p = run("--debug", "solve", "missing.npy")
    assert p.returncode != 0 and "Traceback" in p.stderr


def test_simulate_compare_plot(tmp_path):
    cloud = tmp_path / "c.npz"
    p = run(
        "simulate",
        "-o",
        str(cloud),
        "--pods",
        "2",
        "--racks",
        "2",
        "--hosts",
        "4",
        "--seed",
        "1",
        check=True,
    )
    assert "16 processes" in p.stdout
    lat = rankopt.load_matrix(cloud)
    assert lat.shape == (16, 16)
    p = run("compare", str(cloud), "--json", "--objective", "sum", check=True)
    rows = json.loads(p.stdout)
    methods = {r["method"] for r in rows}
    assert {"ils", "two_opt", "nearest_neighbor"} <= methods
    best = min(r["cost"] for r in rows)
    assert all(r["vs_best"] == pytest.approx(r["cost"] / best) for r in rows)
    p = run("compare", str(cloud), "--objective", "sum", check=True)
    assert "speedup" in p.stdout and "two_opt" in p.stdout
    out = tmp_path / "pic"
    run("plot", str(cloud), "-o", str(out), "--dpi", "50", check=True)
    from PIL import Image

    for kind in ("heatmap", "ring", "convergence"):
        img = Image.open(tmp_path / f"pic-{kind}.png")
        w, h = img.size
        assert w >= 250 and h >= 150
    svg = tmp_path / "ring.svg"
    run("plot", str(cloud), "--kind", "ring", "-o", str(svg), check=True)
    assert svg.read_text().lstrip().startswith("<?xml")


def test_solve_writes_launcher_files(tmp_path):
    cloud = tmp_path / "c.npz"
    run(
        "simulate",
        "-o",
        str(cloud),
        "--pods",
        "1",
        "--racks",
        "2",
        "--hosts",
        "2",
        "--seed",
        "2",
        check=True,
    )
    hf, rf = tmp_path / "hosts", tmp_path / "rank"
    p = run("solve", str(cloud), "--hostfile", str(hf), "--rankfile", str(rf), "-q", check=True)
    order = [int(x) for x in p.stdout.split()]
    hosts = [str(h) for h in np.load(cloud)["hosts"]]
    lines = [ln for ln in hf.read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines == [hosts[i] for i in order]
    ranks = [ln for ln in rf.read_text().splitlines() if ln.startswith("rank ")]
    assert ranks == [f"rank {k}={hosts[i]}" for k, i in enumerate(order)]


def test_launcher_files_need_host_names(tmp_path):
    f = tmp_path / "m.npy"
    np.save(f, np.array([[0, 1.0], [1, 0]]))
    p = run("solve", str(f), "--hostfile", str(tmp_path / "h"))
    assert p.returncode == 1 and "holds no host names" in p.stderr
    assert not (tmp_path / "h").exists()


def test_simulate_bad_output(tmp_path):
    p = run("simulate", "-o", str(tmp_path / "x.txt"))
    assert p.returncode == 1 and "--output must end in .npz, .npy or .csv" in p.stderr


def test_solve_time_and_contention_models(tmp_path):
    from rankopt.network.cloud import load_cloud

    cloud = tmp_path / "c.npz"
    run(*f"simulate -o {cloud} --pods 1 --racks 2 --hosts 4 --seed 4".split(), check=True)
    c = load_cloud(cloud)
    base = f"solve {cloud} --algorithm rabenseifner --nbytes 1e6 --json --seed 0".split()
    d = json.loads(run(*base, "--objective", "time", check=True).stdout)
    assert d["objective"] == "time" and d["algorithm"] == "rabenseifner"
    expected = rankopt.cost(
        c.latency, d["order"], "allreduce", "rabenseifner", bandwidth=c.bandwidth, nbytes=1e6
    )
    assert d["cost"] == pytest.approx(expected)
    # no objective: a network with bandwidth and a hierarchy is priced with contention
    d = json.loads(run(*base, check=True).stdout)
    net = rankopt.Network.from_cloud(c)
    assert d["objective"] == "contention" and d["nbytes"] == 1e6
    assert d["network"]["level_sizes"] == net.level_sizes()
    expected = rankopt.cost(
        c.latency, d["order"], "allreduce", "rabenseifner", **net.default_model(nbytes=1e6)
    )
    assert d["cost"] == pytest.approx(expected)
    args = f"solve {cloud} --objective contention --nbytes 1e6 --json --seed 0".split()
    d = json.loads(run(*args, "--uplink-bandwidth", "4e9,1e9", check=True).stdout)
    assert d["objective"] == "contention" and d["speedup"] >= 1.0
    p = run(*args, "--uplink-bandwidth", "fast")
    assert p.returncode == 1
    assert (
        "--uplink-bandwidth must be a rate such as 25Gbit/s, 3GB/s, 200mbit or 1e9 (bytes/s); got 'fast'"
        in p.stderr
    )
    p = run(*args, "--uplink-bandwidth", "1e9,1e9,1e9")
    assert p.returncode == 1 and "the network has 2 levels (8 groups of 1; 2 groups of 4, 4)" in (
        p.stderr
    )


def _parsers():
    import argparse

    from rankopt.cli import _all_parsers, build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return _all_parsers(sub)


def test_every_option_has_help_with_its_default():
    import argparse

    missing = []
    for parser in _parsers():
        text = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            if not action.help:
                missing.append((parser.prog, action.option_strings or action.dest))
        assert "(default: " in text or all(
            a.default in (None, False, argparse.SUPPRESS) for a in parser._actions
        ), parser.prog
    assert missing == []
    help_text = run("solve", "--help", check=True).stdout
    assert "--unit {s,ms,us,ns}" in help_text and "else seconds" in help_text
    assert "(default: 16 MiB" in help_text


def test_library_words_become_flags_in_cli_errors(tmp_path):
    f = tmp_path / "nan.npy"
    np.save(f, np.array([[0, np.nan, 1], [1, 0, 1], [1, 1, 0.0]]))
    p = run("solve", str(f))
    assert p.returncode == 1 and "Pass --nan symmetric to fill" in p.stderr
    assert "nan='symmetric'" not in p.stderr
