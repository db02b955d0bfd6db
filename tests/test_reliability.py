"""Regression tests of the reliability classes: one or more tests per class.

Each input here once hung, blew up memory, gave a silently wrong result, lost
work or ended in a traceback; each now gets a bound or a one-line error that
names the argument, the value and where.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import rankopt
from rankopt import RankoptInputError, solve
from rankopt._files import RankoptFileError, atomic_write, check_output_path, load_npz
from rankopt._limits import (
    MAX_NESTING,
    MAX_NPZ_MEMBERS,
    RankoptLimitError,
    check_bound,
    check_chain_segments,
    check_probe_settings,
    json_depth,
)
from rankopt._validation import check_groups, check_host_name, check_host_names
from rankopt.cli import main as cli

LAT4 = np.array(
    [
        [0, 1e-5, 2e-5, 3e-5],
        [1e-5, 0, 1e-5, 2e-5],
        [2e-5, 1e-5, 0, 1e-5],
        [3e-5, 2e-5, 1e-5, 0],
    ]
)


def _cli_error(capsys, argv):
    assert cli(argv) == 1
    return capsys.readouterr().err


def _quick(fn, limit=10.0):
    t0 = time.perf_counter()
    out = fn()
    assert time.perf_counter() - t0 < limit
    return out


# ------------------------------------------------------------------ the helper
def test_check_bound_names_argument_value_bound_and_where():
    assert check_bound(8, "n", 16, integer=True) == 8
    assert check_bound(3.0, "n", 16, integer=True) == 3
    with pytest.raises(RankoptLimitError, match=r"^here: `n` must be at most 16; got 17\.$"):
        check_bound(17, "n", 16, "here", integer=True)
    for bad in (float("nan"), float("inf"), "3", True, None):
        with pytest.raises(RankoptLimitError, match="`n` must be"):
            check_bound(bad, "n", 16)
    with pytest.raises(RankoptLimitError, match="whole number"):
        check_bound(2.5, "n", 16, integer=True)
    with pytest.raises(RankoptLimitError, match="at least 1"):
        check_bound(0, "n", 16, minimum=1)


def test_json_depth_is_linear_and_skips_strings():
    assert json_depth('{"a": [[1], "[[[["]}') == 3
    deep = "[" * 100_000 + "]" * 100_000
    assert _quick(lambda: json_depth(deep)) == 100_000


# -------------------------------------------------- unbounded work: the chain
@pytest.mark.parametrize("nbytes", [1e13, 1e18])
def test_chain_segments_are_bounded_before_allocation(nbytes):
    with pytest.raises(RankoptLimitError, match=r"broadcast/chain: .* segments; rankopt models"):
        _quick(lambda: solve(LAT4, "broadcast", "chain", bandwidth=1e9, nbytes=nbytes))


def test_tiny_or_huge_segment_counts_are_refused():
    with pytest.raises(RankoptLimitError, match="segment_size` must be at least 1"):
        check_chain_segments(1e9, 1e-300)
    with pytest.raises(RankoptLimitError, match="segments"):
        check_chain_segments(1e9, 1)
    from rankopt.models import make_model

    with pytest.raises(RankoptLimitError, match="segment_size"):
        make_model(LAT4, "broadcast", "chain", bandwidth=1e9, nbytes=1e9, segment_size=1e-300)
    assert check_chain_segments(4e6, 1e6) == 4


def test_cli_chain_nbytes_bounded(tmp_path, capsys):
    f = tmp_path / "c.npz"
    rankopt.synthetic_cloud(1, 2, 2, rng=0).save(f)
    err = _cli_error(
        capsys, ["solve", str(f), "--collective", "broadcast", "--algorithm", "chain",
                 "--nbytes", "1e14"]
    )  # fmt: skip
    assert "segments; rankopt models at most 65,536" in err


def test_robust_draws_bounded():
    net = rankopt.Network.from_cloud(rankopt.synthetic_cloud(1, 2, 2, rng=0))
    with pytest.raises(RankoptInputError, match=r"`robust` must be at most 1,024; got 1,000,000"):
        _quick(lambda: solve(net, robust=10**6))


def test_budgets_bounded_and_typed():
    with pytest.raises(RankoptInputError, match=r"`max_iter` must be at most 2\*\*53"):
        solve(LAT4, max_iter=10**20)
    with pytest.raises(RankoptInputError, match="`nan` must be one of"):
        solve(LAT4, nan=np.array([1, 2]))


def test_probe_plan_n_bounded(capsys):
    for n in ("100000", "1000000000"):
        err = _quick(lambda n=n: _cli_error(capsys, ["probe", "--plan", "-n", n]))
        assert "-n must be at most 16,384" in err


def test_probe_settings_bounded_at_every_entry(capsys):
    from rankopt.adapters._common import parse_options

    with pytest.raises(RankoptLimitError, match="`latency_bytes` must be at most"):
        parse_options(["latency_bytes=3000000000"])
    with pytest.raises(RankoptLimitError, match="`repeats` must be at most 10,000"):
        parse_options(["repeats=100000000"])
    with pytest.raises(RankoptLimitError, match="`timeout` must be positive"):
        check_probe_settings({"timeout": 0})
    err = _cli_error(capsys, ["probe", "--plan", "-n", "8", "--repeats", "100000000"])
    assert "--repeats must be at most 10,000" in err


def test_verify_sizes_and_timing_options_bounded(capsys):
    from rankopt.adapters.verify_stats import check_timing, parse_sizes

    with pytest.raises(RankoptLimitError, match="at most 2,147,483,648 bytes"):
        parse_sizes("1e18")
    with pytest.raises(RankoptInputError, match="at least 1 byte"):
        parse_sizes("0")
    for bad in ("nan", "inf", "1e400"):
        with pytest.raises(RankoptInputError, match="--sizes must be"):
            parse_sizes(bad)
    with pytest.raises(RankoptLimitError, match="`repeats` must be at least 1"):
        check_timing(None, 0, 10.0, 60.0)
    for argv, match in (
        (["--budget", "-1"], "--budget must be positive"),
        (["--verify-timeout", "0"], "--verify-timeout must be positive"),
        (["--verify-timeout", "nan"], "--verify-timeout must be finite"),
        (["--repeats", "0"], "--repeats must be at least 1"),
        (["--sizes", "1e18"], "--sizes must be at most"),
    ):
        assert match in _cli_error(capsys, ["verify", *argv])


def test_plot_dpi_bounded(tmp_path, capsys):
    f = tmp_path / "c.npz"
    rankopt.synthetic_cloud(1, 2, 2, rng=0).save(f)
    err = _cli_error(capsys, ["plot", str(f), "-o", str(tmp_path / "p.png"), "--dpi", "1000000000"])
    assert "--dpi must be at most 1,200" in err


# ------------------------------------------------------ unbounded work: files
def test_npz_member_count_bounded(tmp_path):
    f = tmp_path / "many.npz"
    np.savez(f, **{f"a{i}": np.zeros(1) for i in range(MAX_NPZ_MEMBERS + 1)})
    with pytest.raises(RankoptFileError, match=r"holds 65 arrays; rankopt reads at most 64"):
        _quick(lambda: load_npz(f))


def test_npz_total_size_bounded(tmp_path, monkeypatch):
    import rankopt._files as files

    f = tmp_path / "big.npz"
    np.savez(f, a=np.zeros(1000), b=np.zeros(1000))
    monkeypatch.setattr(files, "MAX_NPZ_BYTES", 10_000)
    with pytest.raises(RankoptFileError, match="rankopt loads at most 10 kB from one archive"):
        load_npz(f)


def test_npz_members_never_used_are_never_read(tmp_path):
    f = tmp_path / "net.npz"
    lat = LAT4.copy()
    np.savez(f, latency=lat, hosts=np.array(["a", "b", "c", "d"]), unused=np.zeros((64, 64)))
    z = load_npz(f)
    assert sorted(z) == ["hosts", "latency", "unused"]
    assert np.array_equal(z["latency"], lat)
    assert "unused" not in z._cache  # checked from its header, never decompressed


def test_json_mapping_matrix_loads_in_linear_time(tmp_path):
    n = 1500  # a list scan per key took 49 s here; one dict lookup per key takes ~2 s
    row = "{" + ",".join(f'"h{j}": 1e-05' for j in range(n)) + "}"
    f = tmp_path / "m.json"
    f.write_text("{" + ",".join(f'"h{i}": {row}' for i in range(n)) + "}")
    lat = _quick(lambda: rankopt.load_matrix(f), limit=30.0)
    assert lat.shape == (n, n) and lat[0, 1] == 1e-5 and lat[1, 1] == 0


@pytest.mark.parametrize("kind", ["matrix", "order", "npz", "topology"])
def test_deep_json_is_refused_before_parsing(tmp_path, kind):
    deep = "[" * 100_000 + "]" * 100_000
    if kind == "matrix":
        f = tmp_path / "m.json"
        f.write_text(deep)
        with pytest.raises(RankoptLimitError, match="nested 100000 levels deep"):
            rankopt.load_matrix(f)
    elif kind == "order":
        from rankopt.adapters._common import read_order_file

        f = tmp_path / "o.json"
        f.write_text(deep)
        with pytest.raises(RankoptLimitError, match=f"rankopt reads at most {MAX_NESTING}"):
            read_order_file(f)
    elif kind == "npz":
        f = tmp_path / "m.npz"
        np.savez(f, latency=LAT4, hosts=np.array(["a", "b", "c", "d"]), parameters=np.array(deep))
        with pytest.raises(RankoptLimitError, match="array 'parameters'.*nested"):
            rankopt.load_measurement(f)
    else:
        from rankopt.probe.topology_sources import from_aws

        with pytest.raises(RankoptLimitError, match="topology document"):
            from_aws(deep)


# -------------------------------------------------------------- time limits
def test_brute_force_honours_time_limit():
    def slow(lat, order):
        time.sleep(0.005)
        return float(order[0])

    a = np.random.default_rng(0).random((8, 8))
    np.fill_diagonal(a, 0)
    t0 = time.perf_counter()
    res = solve(a, objective=slow, time_limit=1.0, method="brute_force")
    assert time.perf_counter() - t0 < 8.0
    assert res.method == "brute_force"


def test_launcher_variables_range_checked():
    from rankopt.adapters._env import check_timeout, detect, resolve

    base = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    for rank, size in (("5", "2"), ("-1", "2"), ("0", "0")):
        with pytest.raises(RankoptInputError, match=r"launcher gave rank .* of world size"):
            detect({**base, "RANK": rank, "WORLD_SIZE": size})
    with pytest.raises(RankoptInputError, match="reorders at most 16,384 processes"):
        detect({**base, "RANK": "0", "WORLD_SIZE": "1000000"})
    with pytest.raises(RankoptInputError, match="MASTER_ADDR 'h0\\\\n'"):
        detect({**base, "MASTER_ADDR": "h0\n", "RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(RankoptInputError, match="does not resolve"):
        resolve("no-such-host.invalid", 10.0)
    resolve("127.0.0.1", 0.001)  # an address: no lookup
    for bad, match in (
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (0, "at least 0.1 s"),
        (-1, "at least 0.1 s"),
        (1e-9, "at least 0.1 s"),
    ):
        with pytest.raises(RankoptInputError, match=match):
            check_timeout(bad, "--timeout")


@pytest.mark.parametrize("timeout", ["nan", "inf", "0", "1e-9", "-1"])
def test_run_timeout_is_validated_before_the_rendezvous(timeout, capsys, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    err = _cli_error(capsys, ["run", "--timeout", timeout, "--", sys.executable, "-c", "0"])
    assert "--timeout must be" in err


def test_run_checks_the_program_first(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.chdir(tmp_path)
    for prog, match in (
        (["no-such-program-xyz"], "program 'no-such-program-xyz' not found"),
        ([sys.executable, "missing.py"], "script 'missing.py' does not exist"),
        ([sys.executable, "-m", "no_such_mod"], "no module named 'no_such_mod'"),
    ):
        assert match in _cli_error(capsys, ["run", "--", *prog])


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--latency", "lat.json", "--json", "lat.json"],
            "--json 'lat.json' is the --latency file",
        ),
        (["--order", "o.txt", "--save", "./o.txt"], "--save './o.txt' is the --order file"),
        (["--save", "r.json", "--json", "r.json"], "--json 'r.json' is also the file of --save"),
    ],
)
def test_run_outputs_over_its_inputs_or_each_other_are_refused(
    capsys, monkeypatch, tmp_path, argv, message
):
    """Rank 0 wrote --json over the --latency matrix it solved on (and --json and --save
    over each other); refused before the rendezvous, the files as they were."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lat.json").write_text("[[0, 1], [1, 0]]")
    (tmp_path / "o.txt").write_text("0 1\n")
    err = _cli_error(capsys, ["run", "--timeout", "2", *argv, "--", sys.executable, "-c", "0"])
    assert err.strip().startswith(f"rankopt run: error: {message}; give ")
    assert (tmp_path / "lat.json").read_text() == "[[0, 1], [1, 0]]"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lat.json", "o.txt"]


# --------------------------------------------------------------- host names
@pytest.mark.parametrize(
    "name", ["h0\n", "h0\x00evil", "h\u200b0", "h 0", "h=0", "h#0", "h,0", "", "-h", "a" * 64,
             "fe80::1%e v", "h:0"]
)  # fmt: skip
def test_host_names_are_full_matches_of_rfc_1123(name):
    with pytest.raises(RankoptInputError, match="expected an RFC 1123 host name"):
        check_host_name(name)


def test_host_names_accepted():
    for name in ("node1", "node-1.cluster.local", "10.0.0.5", "fe80::1%eth0", "a.b."):
        assert check_host_name(name) == name
    assert check_host_names(np.array([b"h0", b"h1"])) == ("h0", "h1")


def test_host_names_checked_at_every_entry(tmp_path):
    from rankopt.adapters.writers import format_rankfile

    with pytest.raises(RankoptInputError, match=r"hosts\[1\] is 'h1\\n'"):
        format_rankfile([0, 1], ["h0", "h1\n"])
    with pytest.raises(RankoptInputError, match=r"hosts\[0\]"):
        rankopt.Network(LAT4, hosts=["h0\x00evil", "a", "b", "c"])
    f = tmp_path / "m.npz"
    np.savez(f, latency=LAT4, hosts=np.array([b"h0", b"h1", b"h2", b"h3"]))
    net = rankopt.load_network(f)
    assert net.hosts == ("h0", "h1", "h2", "h3")  # bytes are names, not "b'h0'"
    assert format_rankfile([1, 0, 2, 3], net.hosts, comment=False).splitlines()[0] == "rank 0=h1"


# ------------------------------------------------------- silently wrong results
@pytest.mark.parametrize(
    ("latency", "match"),
    [
        (LAT4.astype(complex), "must hold real numbers; got dtype complex"),
        (LAT4 > 0, "must hold real numbers; got dtype bool"),
        (np.zeros((4, 4), dtype="datetime64[s]"), "must hold real numbers; got dtype datetime"),
        (np.full((4, 4), "x"), "must hold real numbers; got dtype <U1"),
    ],
)
def test_npz_latency_must_be_real_numbers(tmp_path, latency, match):
    f = tmp_path / "m.npz"
    np.savez(f, latency=latency, hosts=np.array(["a", "b", "c", "d"]))
    for load in (rankopt.load_measurement, rankopt.load_network, rankopt.load_matrix):
        with pytest.raises(RankoptInputError, match=rf"array 'latency' {match}"):
            load(f)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[[0, true], [1, 0]]", r"entry \[0\]\[1\] is True, a boolean, not a number"),
        ('[[0, "fast"], [1, 0]]', r"m\.json.*entry \[0\]\[1\] is 'fast', a str"),
        ("[[0, [1, 2]], [1, 0]]", r"entry \[0\]\[1\] is \[1, 2\], a list"),
        ('{"a": {"b": true}, "b": {"a": 1}}', r"entry \['a'\]\['b'\] is True, a boolean"),
        ('{"a": 5}', "entry 'a' must be a mapping of destinations"),
        ('{"matrix": [[0, 1], [1, 0]], "unit": ["ms"]}', "'unit' must be a string"),
        ('{"matrix": [[0, 1], [1, 0]], "labels": 5}', "'labels' must be a list of names"),
        ("[[0, 1" + "0" * 400 + "], [1, 0]]", r"must be finite; latency\[0, 1\] is inf"),
        ("[[0, 1], [2]]", "rows have different lengths"),
        ("5", "expected a list of rows"),
    ],
)
def test_json_matrix_values_are_numbers(tmp_path, text, match):
    f = tmp_path / "m.json"
    f.write_text(text)
    with pytest.raises(RankoptInputError, match=match):
        rankopt.load_matrix(f)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("host,a,b\na,0,1_000\nb,1_000,0\n", "'1_000' is not a number"),
        ("host,a,b\na,0,\u0661\nb,1,0\n", "'\u0661' is not a number"),
        ("0,1_000\n1_000,0\n", "at least 2 processes"),
    ],
)
def test_csv_numbers_are_plain_decimal(tmp_path, text, match):
    f = tmp_path / "m.csv"
    f.write_text(text)
    with pytest.raises(RankoptInputError, match=match):
        rankopt.load_matrix(f)


def test_long_csv_index_that_is_not_ascii_is_a_name(tmp_path):
    from rankopt.network.io import load_matrix_and_labels

    f = tmp_path / "m.csv"
    f.write_text("src,dst,latency\n0,\u00b2,1\n\u00b2,0,1\n")
    lat, labels = load_matrix_and_labels(f)
    assert labels == ["0", "\u00b2"] and lat.tolist() == [[0, 1], [1, 0]]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0])
def test_spreads_and_samples_are_validated(bad):
    spread = np.full((4, 4), 1e-7)
    spread[0, 1] = bad
    with pytest.raises(RankoptInputError, match=r"latency_spread\[0, 1\]"):
        rankopt.Network(LAT4, latency_spread=spread)
    with pytest.raises(RankoptInputError, match=r"bandwidth_spread\[0, 1\]"):
        rankopt.Network(LAT4, bandwidth=np.full((4, 4), 1e9), bandwidth_spread=spread)
    samples = np.full((4, 4), 10.0)
    samples[0, 1] = bad
    with pytest.raises(RankoptInputError, match=r"latency_samples\[0, 1\]"):
        rankopt.Network(LAT4, latency_samples=samples)


def test_group_levels_must_be_nested():
    with pytest.raises(RankoptInputError, match="levels must be nested"):
        check_groups([[0, 0, 1, 1], [0, 1, 1, 1]], 4)
    with pytest.raises(RankoptInputError, match="levels must be nested"):
        solve(LAT4, groups=[[0, 0, 1, 1], [0, 1, 1, 1]], uplink_bandwidth=1e9, nbytes=1e6)
    assert len(check_groups([[0, 0, 1, 1], [0, 0, 0, 0]], 4)) == 2


@pytest.mark.parametrize("groups", [[0, 0, 1], "abc"])
def test_groups_of_another_length_are_refused_by_solve(groups):
    """Read only by the tie-break on a latency-only model, they were an IndexError or a
    ValueError; now refused as `groups`, whatever the model."""
    with pytest.raises(RankoptInputError, match=r"`groups` level 0 must have shape \(4,\)"):
        solve(LAT4, groups=groups)
    with pytest.raises(RankoptInputError, match=r"`groups` level 0 must have shape \(4,\)"):
        solve(rankopt.Network.from_matrices(LAT4), groups=groups)


def test_workload_count_bounded():
    with pytest.raises(RankoptLimitError, match=r"workload call 0 \(allreduce\): `count`"):
        solve(LAT4, workload=[("allreduce", 1e6, 1e308)])


def test_simulate_rejects_what_solve_would_reject(tmp_path, capsys):
    out = str(tmp_path / "c.npz")
    assert "host latency is nan" in _cli_error(
        capsys, ["simulate", "-o", out, "--latency-us", "nan,1,2,3"]
    )
    assert "host bandwidth is 0.0" in _cli_error(
        capsys, ["simulate", "-o", out, "--bandwidth-gbit", "0,1,2,3"]
    )
    with pytest.raises(SystemExit) as exc:  # a bad option value is a usage error
        cli(["simulate", "-o", out, "--bandwidth", "0,1Gbit/s,2,3"])
    assert exc.value.code == 2
    assert "--bandwidth must be a positive, finite rate" in capsys.readouterr().err
    assert not os.path.exists(out)


@pytest.mark.parametrize("flag", ["--pods", "--racks", "--hosts", "--ranks-per-host"])
def test_simulate_size_below_one_names_the_option(tmp_path, capsys, flag):
    out = tmp_path / "c.npz"
    err = _cli_error(capsys, ["simulate", "-o", str(out), flag, "0"])
    assert err.strip() == f"rankopt simulate: error: {flag} must be at least 1; got 0."
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--order-out", "--rankfile", "--hostfile"])
def test_a_dash_output_is_refused_not_written_as_a_file(tmp_path, capsys, monkeypatch, flag):
    """'-' means standard output to a user (--json - is); the order and host files wrote a
    file named '-' in the current folder."""
    f = tmp_path / "c.npz"
    rankopt.synthetic_cloud(1, 2, 2, rng=0).save(f)
    monkeypatch.chdir(tmp_path)
    err = _cli_error(capsys, ["solve", str(f), "-q", flag, "-"])
    assert err.strip() == (
        f"rankopt solve: error: {flag} is '-', which writes no standard output here "
        "(--json alone does); give the name of a file."
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.npz"]
    with pytest.raises(RankoptFileError, match="is '-', which writes no standard output"):
        check_output_path("-")


def test_order_out_paths_are_checked_before_the_solve(tmp_path, capsys, monkeypatch):
    f = tmp_path / "c.npz"
    rankopt.synthetic_cloud(1, 2, 2, rng=0).save(f)
    monkeypatch.chdir(tmp_path)
    assert "is an empty path" in _cli_error(capsys, ["solve", str(f), "--order-out="])
    assert "names a directory" in _cli_error(capsys, ["solve", str(f), "--order-out", "x.txt/"])
    assert not (tmp_path / "x.txt").exists()
    with pytest.raises(RankoptFileError, match="names a directory"):
        check_output_path("x.txt/")


def test_shim_libraries_are_checked_before_use(tmp_path):
    from rankopt.adapters import shim

    garbage = tmp_path / "garbage.so"
    garbage.write_bytes(b"garbage\n")
    assert "not an ELF shared library" in shim.library_problem(garbage)
    import zlib

    foreign = Path(getattr(zlib, "__file__", "") or np._core._multiarray_umath.__file__)
    if foreign.suffix == ".so":
        assert "not the rankopt shim" in shim.library_problem(foreign)
    with pytest.raises(RankoptInputError, match="garbage.so' is not an ELF"):
        shim.check_library(garbage)
    empty = tmp_path / "confirm"
    empty.mkdir()
    assert "was loaded by no rank" in shim._unconfirmed(empty, 2)
    (empty / "rank.0").touch()
    assert "was loaded by 1 of 2 ranks (not by rank(s) 1)" in shim._unconfirmed(empty, 2)
    (empty / "rank.1").touch()
    assert shim._unconfirmed(empty, 2) == ""


def test_truncated_shim_is_refused(tmp_path):
    from rankopt.adapters import shim

    try:
        lib = shim.build()
    except shim.ShimBuildError as exc:
        pytest.skip(f"no shim: {exc}")
    assert shim.library_problem(lib) == ""
    cut = tmp_path / shim.LIBRARY_NAME
    cut.write_bytes(lib.read_bytes()[: lib.stat().st_size // 2])
    assert "is truncated" in shim.library_problem(cut)


# ----------------------------------------------------------------- lost work
_SIGNAL_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from rankopt._files import atomic_write

    def write(fh):
        fh.write(b"x" * 1000)
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))
        fh.write(b"y" * 1000)

    atomic_write(sys.argv[1], write)
    """
)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_termination_during_a_write_leaves_nothing_behind(tmp_path, sig):
    target = tmp_path / "big.npz"
    proc = subprocess.run(
        [sys.executable, "-c", _SIGNAL_WRITER, str(target), sig], capture_output=True, timeout=60
    )
    assert proc.returncode == -getattr(signal, sig)  # it still ends by the signal
    assert os.listdir(tmp_path) == []


def test_write_errors_name_the_file(tmp_path):
    import errno

    def full(fh):
        raise OSError(errno.ENOSPC, "No space left on device")

    target = tmp_path / "o.json"
    with pytest.raises(RankoptFileError, match=r"cannot write --order-out '.*o\.json': No space"):
        atomic_write(target, full, what="--order-out")
    assert os.listdir(tmp_path) == []


def test_profile_output_checked_before_the_program_runs(tmp_path):
    from rankopt.adapters.profile import run_profile

    marker = tmp_path / "ran"
    with pytest.raises(RankoptFileError, match="is a directory"):
        run_profile([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], tmp_path, kind="torch")
    assert not marker.exists()


def test_mpi_entry_checks_program_and_outputs_first(tmp_path, monkeypatch):
    import argparse

    from rankopt.cli._mpi_main import _output_problem, check_program

    monkeypatch.chdir(tmp_path)
    assert check_program(["missing.py"]) == "program 'missing.py' does not exist"
    assert "no module named 'no_such_mod'" in check_program(["-m", "no_such_mod"])
    (tmp_path / "ok.py").write_text("")
    assert check_program(["ok.py"]) is None
    assert check_program(["-m", "ok"]) is None  # the current folder, as python -m looks
    args = argparse.Namespace(save="/nodir/x", json=None, rankfile=None, hostfile=None)
    assert "does not exist" in _output_problem(args)
    args = argparse.Namespace(save=None, json=str(tmp_path), rankfile=None, hostfile=None)
    assert "is a directory" in _output_problem(args)
    # one file for two outputs: the second would overwrite the first (the order saved)
    args = argparse.Namespace(save="o.txt", json=None, rankfile=None, hostfile="./o.txt")
    assert _output_problem(args) == (
        "--hostfile './o.txt' is also the file of --save; give each output its own name."
    )
    args = argparse.Namespace(save=None, json="r", rankfile="r", hostfile=None)
    assert _output_problem(args).startswith("--json 'r' is also the file of --rankfile;")
    args = argparse.Namespace(save="o.txt", json="-", rankfile=None, hostfile="h.txt")
    assert _output_problem(args) is None
    # nor over a file the job reads: the order applied, the workload priced
    args = argparse.Namespace(save=None, json="o.txt", rankfile=None, hostfile=None, order="o.txt")
    assert _output_problem(args) == (
        "--json 'o.txt' is the --order file; give the output another name."
    )
    monkeypatch.setenv("RANKOPT_WORKLOAD", "app.json")
    args = argparse.Namespace(save="app.json", json=None, rankfile=None, hostfile=None)
    assert _output_problem(args).startswith("--save 'app.json' is the $RANKOPT_WORKLOAD file;")


# ------------------------------------------------- tracebacks made one line
@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({"order": [1, 0], "network": {"n": 2, "hosts": ["a"]}}, "one entry per process"),
        ({"order": [1, 0], "network": {"n": "abc"}}, "'network.n' must be a whole number"),
        ({"order": [1, 0], "network": {"n": None}}, "'network.n' must be a whole number"),
        ({"order": [1, 0], "network": {"n": 3}}, "'network.n' is 3, but the order has 2"),
        ({"order": [[0, 1], [2]]}, "the order must be one list of whole numbers"),
        ({"order": [True, False]}, "the order must hold whole numbers; it holds True"),
        ({"order": [1, 0], "network": {"n": 2, "hosts": ["a", "b\n"]}}, r"hosts\[1\]"),
    ],
)
def test_order_files_are_checked(tmp_path, doc, match):
    from rankopt.adapters._common import read_order_file

    f = tmp_path / "o.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(RankoptInputError, match=match):
        read_order_file(f)


@pytest.mark.parametrize(
    ("arrays", "match"),
    [
        ({"seed": np.array("x")}, "array 'seed' must hold whole numbers"),
        ({"parameters": np.array("5")}, "array 'parameters' must be a JSON object"),
        ({"parameters": np.array("{")}, "array 'parameters' is not JSON"),
        ({"hosts": np.array([[1, 2]])}, "array 'hosts' must hold names"),
    ],
)
def test_npz_members_are_what_their_names_say(tmp_path, arrays, match):
    f = tmp_path / "x.npz"
    base = {"latency": LAT4, "hosts": np.array(["a", "b", "c", "d"])}
    np.savez(f, **{**base, **arrays})
    with pytest.raises(RankoptInputError, match=match):
        rankopt.load_measurement(f)


def test_solve_options_that_are_not_a_mapping_fail_clearly():
    from rankopt.solvers._base import check_method_options

    check_method_options("auto", {})
    with pytest.raises((TypeError, RankoptInputError)):
        solve(LAT4, options=[1, 2])


def test_zip_directory_read_once_for_many_members(tmp_path):
    f = tmp_path / "z.npz"
    with zipfile.ZipFile(f, "w") as zf:
        for i in range(1000):
            zf.writestr(f"a{i}.npy", b"")
    with pytest.raises(RankoptFileError, match="holds 1,000 arrays"):
        _quick(lambda: load_npz(f), limit=2.0)


def test_optimize_root_and_options_checked_on_every_rank():
    import shutil

    exe = shutil.which("mpiexec")
    if exe is None:
        pytest.skip("mpiexec not found")
    pytest.importorskip("mpi4py")
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    script = repo / "tests" / "mpi_scripts" / "reliability_options.py"
    proc = subprocess.run(
        [exe, "-n", "2", "--oversubscribe", sys.executable, str(script)],
        env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "reliability_options ok" in proc.stdout


def test_launcher_options_that_differ_between_ranks_are_an_error():
    dist = pytest.importorskip("torch.distributed")
    from rankopt.adapters._common import option_digests
    from rankopt.adapters._launch import LaunchOptions, _decide, _shaping

    store = dist.HashStore()
    for r, backend in enumerate(("gloo", "nccl")):
        store.set(f"host/{r}", "h0")
        opts = LaunchOptions(backend=backend, order="o.txt", hostname=f"h{r}")
        store.set(f"options/{r}", json.dumps(option_digests(_shaping(opts))))
    store.add("probed", 2)
    out = _decide(LaunchOptions(), store, 2, None, 0.0)
    assert out["options_differ"] and out["error"] == (
        "option --backend differs between ranks: launch rank 0 has 'gloo', launch rank 1 has "
        "'nccl'; give every rank the same options."
    )


def test_schedule_and_chain_segments_are_bounded_before_allocating():
    import rankopt
    from rankopt.models.schedule import chain_segments

    with pytest.raises(RankoptInputError, match="16,384"):
        rankopt.schedule("allreduce", "ring", 10**9)
    with pytest.raises(RankoptInputError, match="segments"):
        chain_segments(1e18, 1)


def test_solve_options_must_be_a_mapping():
    lat = np.full((4, 4), 1e-5)
    np.fill_diagonal(lat, 0.0)
    with pytest.raises(RankoptInputError, match="`options` must be a mapping"):
        rankopt.solve(lat, options=[1, 2])


def test_probe_settings_are_bounded_from_the_api():
    from rankopt.probe._common import check_params

    with pytest.raises(RankoptInputError, match="repeats"):
        check_params(repeats=100_000_000)
    with pytest.raises(RankoptInputError, match="timeout"):
        check_params(timeout=1e9)


# ------------------------------------------------- workload files and Measurement checks
@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([{"collective": ["allreduce"], "nbytes": 8}], "collective must be one of"),
        ([{"collective": "allreduce", "nbytes": True}], "nbytes must be a number"),
        ([{"collective": "allreduce", "nbytes": 8, "count": False}], "count must be a number"),
        ([["allreduce", 10**400, 1]], "nbytes is out of range"),
        ([["allreduce", 8, 10**400]], "count is out of range"),
        ([["allreduce", "lots", 1]], "nbytes must be a size such as 16M"),
        ([["allreduce", {"a": 1}, 1]], "nbytes must be a number"),
    ],
)  # fmt: skip
def test_workload_fields_are_checked(tmp_path, doc, message):
    from rankopt.models.workload import load_workload

    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RankoptInputError, match=message):
        load_workload(path)


def test_workload_sizes_take_units_and_nesting_is_bounded(tmp_path):
    from rankopt.models.workload import load_workload

    path = tmp_path / "w.txt"
    path.write_text("allreduce, 16M, 40\nbroadcast, 64MB\n")
    calls = load_workload(path)
    assert [c.nbytes for c in calls] == [16 << 20, 64e6]
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(rankopt.RankoptError, match="nested"):
        _quick(lambda: load_workload(deep))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(rankopt.RankoptError, match="FIFO|regular"):
        _quick(lambda: load_workload(fifo))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"hosts": ("a\n", "b")}, "hosts\\[0\\]"),
        ({"hosts": (b"h0", "h1")}, None),
        ({"latency": np.array([[0, 1j], [1j, 0]])}, "imaginary"),
        ({"latency": np.ones((2, 2), dtype=bool)}, "real numbers"),
        ({"parameters": "5"}, "`parameters` must be a mapping"),
        ({"pair_counts": np.array([[0, np.nan], [1, 0]])}, "whole numbers"),
        ({"pair_counts": np.array([[0, -1], [1, 0]])}, "counts >= 0"),
    ],
)  # fmt: skip
def test_measurement_checks_its_fields(kw, message):
    from rankopt.probe.measurement import Measurement

    args = {
        "latency": np.array([[0.0, 1e-5], [1e-5, 0.0]]),
        "bandwidth": None,
        "hosts": ("h0", "h1"),
    }
    args.update(kw)
    if message is None:  # bytes host names are decoded, not written as "b'h0'"
        assert Measurement(**args).hosts == ("h0", "h1")
        return
    with pytest.raises(RankoptInputError, match=message):
        Measurement(**args)
