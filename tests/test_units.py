"""One command line: sizes and rates, --json [FILE], check's exit status, progress lines."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rankopt
from rankopt._progress import Progress
from rankopt.cli import main as cli
from rankopt.units import format_rate, format_size, parse_rate, parse_size, parse_sizes


# ----------------------------------------------------------------- sizes and rates
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16M", 16 << 20), ("16MiB", 16 << 20), ("16 MiB", 16 << 20), ("16m", 16 << 20),
        ("64MB", 64_000_000), ("64mb", 64_000_000), ("1e6", 1_000_000), ("4096", 4096),
        ("4K", 4096), ("4KB", 4000), ("1.5G", 3 << 29), ("2T", 2 << 40), ("512B", 512),
        (1e6, 1_000_000), (7, 7),
    ],
)  # fmt: skip
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "M", "16 megs", "-1M", "1e400", "nan", "inf", "1_000", True])
def test_parse_size_refuses_with_the_option_named(bad):
    with pytest.raises(rankopt.RankoptInputError, match="--nbytes"):
        parse_size(bad, "--nbytes")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("25Gbit/s", 3.125e9), ("25gbit", 3.125e9), ("200mbit", 25e6), ("8kbit", 1e3),
        ("3GB/s", 3e9), ("3 GB/s", 3e9), ("250MB/s", 250e6), ("12B/s", 12.0), ("1e9", 1e9),
        (5.0, 5.0),
    ],
)  # fmt: skip
def test_parse_rate(text, expected):
    assert parse_rate(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["10Gbps", "3mbps", "fast", "0", "-1GB/s", "inf", "1e400"])
def test_parse_rate_refuses(bad):
    with pytest.raises(rankopt.RankoptInputError, match="--rates"):
        parse_rate(bad, "--rates")


@given(st.integers(1, 2**50), st.sampled_from(["", "K", "M", "G", "KiB", "MiB", "kB", "MB"]))
def test_format_size_reads_back_in_the_unit_family_given(value, unit):
    n = parse_size(f"{value}{unit}")
    text = format_size(n)
    back = parse_size(text.replace(" ", ""))
    # four significant figures at most are printed: within 0.05% (or exact when short)
    assert back == pytest.approx(n, rel=5e-4)
    if unit in ("", "B") and n < 1000:
        assert text == f"{n} B"


def test_format_size_keeps_the_unit_a_user_gave():
    assert format_size(parse_size("16M")) == "16 MiB"
    assert format_size(parse_size("64MB")) == "64 MB"
    assert format_size(parse_size("64e6")) == "64 MB"
    assert format_size(4096) == "4 KiB"
    assert format_rate(25e9 / 8, bits=True) == "25 Gbit/s"
    assert format_rate(float("inf")) == "inf"


def test_verify_sizes_take_the_same_units():
    from rankopt.adapters.verify_stats import parse_sizes as verify_sizes

    assert (
        verify_sizes("4K,1MiB,64MB") == parse_sizes("4K,1MiB,64MB") == [4096, 1 << 20, 64 * 10**6]
    )
    with pytest.raises(rankopt.RankoptInputError, match="--sizes"):
        verify_sizes("4K,lots")


def test_nbytes_and_uplinks_take_units_on_the_command_line(tmp_path, capsys):
    f = tmp_path / "c.npz"
    rankopt.synthetic_cloud(1, 2, 2, rng=0).save(f)
    assert cli(["solve", str(f), "--nbytes", "64MB", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["nbytes"] == 64e6
    assert cli(["solve", str(f), "--nbytes", "16M"]) == 0
    assert "16 MiB" in capsys.readouterr().out
    assert cli(["solve", str(f), "--uplink-bandwidth", "10Gbit/s", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["speedup"] >= 1.0
    with pytest.raises(SystemExit):
        cli(["solve", str(f), "--nbytes", "16 megs"])
    assert "--nbytes must be a size such as 16M" in capsys.readouterr().err


def test_simulate_takes_rates_with_units(tmp_path, capsys):
    out = tmp_path / "c.npz"
    assert cli(["simulate", "-o", str(out), "--pods", "1", "--racks", "2", "--hosts", "2",
                "--bandwidth", "100Gbit/s,25Gbit/s,10Gbit/s,5Gbit/s", "--seed", "1"]) == 0  # fmt: skip
    net = rankopt.load_network(out)
    off = ~np.eye(net.n, dtype=bool)
    assert net.bandwidth[off].max() <= 100e9 / 8 * 1.5


# ---------------------------------------------------------------------- --json [FILE]
def test_json_means_the_same_everywhere(tmp_path, capsys):
    f = tmp_path / "c.npz"
    rankopt.synthetic_cloud(1, 2, 2, rng=0).save(f)
    # no FILE: standard output in place of the report
    assert cli(["solve", str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["order"]
    assert cli(["solve", str(f), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["order"]
    # FILE: written, and the report still printed
    dest = tmp_path / "r.json"
    assert cli(["solve", str(f), "--json", str(dest)]) == 0
    assert "modelled speedup" in capsys.readouterr().out
    assert json.loads(dest.read_text())["order"]
    assert cli(["compare", str(f), "--methods", "greedy_cluster", "--json", str(dest)]) == 0
    assert json.loads(dest.read_text())[0]["method"] == "greedy_cluster"


def test_json_never_overwrites_an_input(tmp_path, capsys):
    f = tmp_path / "c.npz"
    rankopt.synthetic_cloud(1, 2, 2, rng=0).save(f)
    before = f.read_bytes()
    other = tmp_path / "other.npz"
    other.write_bytes(before)
    assert cli(["solve", str(f), "--json", str(other)]) == 1
    assert "exists and is not a .json file" in capsys.readouterr().err
    assert other.read_bytes() == before
    # a FILE in a missing folder fails before any work
    assert cli(["solve", str(f), "--json", str(tmp_path / "no" / "r.json")]) == 1
    assert not (tmp_path / "no").exists()


def test_probe_plan_json_to_a_file(tmp_path, capsys):
    dest = tmp_path / "plan.json"
    assert cli(["probe", "--plan", "-n", "8", "--json", str(dest)]) == 0
    assert json.loads(dest.read_text())
    assert capsys.readouterr().out  # the text plan is still printed


# ------------------------------------------------------------------ check's wording
def test_check_text_reads_plainly():
    from rankopt.adapters.drift import CHANGED, CheckResult

    net = rankopt.synthetic_cloud(1, 2, 2, rng=0)
    pair = {"src": 0, "dst": 1, "stored": 1e9, "now": 4e8, "ratio": 0.4, "moved": True}
    res = CheckResult(
        verdict=CHANGED, latency_change=-0.3, pairs=[pair], now=net, stored_speedup=1.2,
        now_speedup=1.1, resolved_speedup=1.3, resolved_interval=(1.1, 1.5), pays=True,
        resolved_order=[0, 1, 2, 3],
    )  # fmt: skip
    text = res.text()
    assert "30% lower than stored" in text
    assert "1 pair sampled" in text and "1 pairs" not in text
    assert "1 GB/s -> 400 MB/s" in text


def test_commands_that_need_a_job_say_how_to_start_one(tmp_path):
    pytest.importorskip("mpi4py")
    f = tmp_path / "c.npz"
    rankopt.synthetic_cloud(1, 2, 2, rng=0).save(f)
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    for argv in (
        ["check", str(f)],
        ["verify", "--sizes", "4K"],
        ["probe", "--backend", "mpi", "-o", "p.npz"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "rankopt", *argv], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode != 0, argv
        assert "needs at least 2 processes and runs as 1; start it with `mpiexec -n N`" in (
            done.stderr
        ), done.stderr
    assert not (tmp_path / "p.npz").exists()


# --------------------------------------------------------------------------- progress
def test_progress_lines_off_a_terminal_are_few(monkeypatch):
    out = io.StringIO()
    clock = iter(np.arange(0.0, 100.0, 0.5))
    monkeypatch.setattr("rankopt._progress.time.monotonic", lambda: float(next(clock)))
    p = Progress("rankopt", stream=out, interval=2.0)
    p.start("probe latency", 40, "rounds")
    for k in range(1, 41):
        p.update(k)
    p.finish()
    lines = out.getvalue().splitlines()
    # 20 s of rounds: a line every 2 s, then the total; never one per round
    assert 5 <= len(lines) <= 12
    assert lines[-1].startswith("rankopt: probe latency: 40/40 rounds in ")
    assert all(line.startswith("rankopt: ") for line in lines)


def test_quick_phases_stay_silent_and_disabled_says_nothing():
    out = io.StringIO()
    p = Progress("rankopt", stream=out, interval=60.0)
    p.start("solve", 0, "")
    p.update(3)
    p.finish("anneal")
    assert out.getvalue() == ""
    q = Progress("rankopt", stream=out, enabled=False, interval=0.0)
    assert q.probe_callback() is None
    q.start("x", 2)
    q.update(1)
    q.say("hello")
    q.finish()
    assert out.getvalue() == ""


def test_probe_callback_opens_a_phase_per_probe_phase():
    from rankopt.probe._common import ProbeProgress

    out = io.StringIO()
    p = Progress("rankopt probe", stream=out, interval=0.0)
    cb = p.probe_callback()
    for k in range(1, 4):
        cb(ProbeProgress("latency", k, 3, (), 0.1 * k))
    for k in range(1, 3):
        cb(ProbeProgress("bandwidth", k, 2, (), 1.0 + k))
    p.finish()
    text = out.getvalue()
    assert "probe latency: 3/3 rounds in" in text
    assert "probe bandwidth: 2/2 slots in" in text


def test_a_bar_on_a_terminal(monkeypatch):
    out = io.StringIO()
    p = Progress("rankopt", stream=out, bar=True, interval=0.0)
    p.start("probe latency", 3, "rounds")
    for k in range(1, 4):
        p.update(k)
    p.finish()
    assert "rankopt: probe latency" in out.getvalue()
