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
            "rankopt solve: error: `latency` must be finite; latency[0, 1] is nan",
        ),
        (("solve", "{ok}", "--method", "magic"), 2, "invalid choice: 'magic'"),
        (("solve", "{ok}", "--objective", "fast"), 1, "`objective` must be one of"),
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
