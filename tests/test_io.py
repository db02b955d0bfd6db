import io
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from rankopt import Measurement, RankoptInputError, load_matrix, load_measurement, synthetic_cloud
from rankopt._files import MAX_N, RankoptFileError, atomic_write, atomic_write_text
from rankopt.network.cloud import load_cloud
from rankopt.network.io import load_matrix_and_labels, read_matrix

M = np.array([[0.0, 1.0, 2.0], [1.5, 0.0, 3.0], [2.5, 3.5, 0.0]])


def test_npy_units(tmp_path):
    f = tmp_path / "m.npy"
    np.save(f, M)
    assert np.allclose(load_matrix(f), M)
    assert np.allclose(load_matrix(f, unit="ms"), M * 1e-3)
    assert np.allclose(load_matrix(f, unit="us", rtt=True), M * 0.5e-6)


def test_npy_never_unpickles(tmp_path):
    f = tmp_path / "obj.npy"
    np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(RankoptInputError, match="not a plain numeric .npy file"):
        load_matrix(f)


def test_csv_with_and_without_labels(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text("\n".join(",".join(str(x) for x in row) for row in M))
    assert np.allclose(load_matrix(plain), M)
    lab = tmp_path / "lab.csv"
    lab.write_text("src,a,b,c\na,,1,2\nb,1.5,,3\nc,2.5,3.5,\n")
    vals, labels, _ = read_matrix(lab)
    assert labels == ["a", "b", "c"]
    assert np.allclose(load_matrix(lab), M)


def test_csv_missing_cell_is_nan(tmp_path):
    f = tmp_path / "gap.csv"
    f.write_text("0,1,\n1,0,3\n2,3,0\n")
    with pytest.raises(RankoptInputError, match=r"latency\[0, 2\] is nan"):
        load_matrix(f)
    assert load_matrix(f, nan="symmetric")[0, 2] == 2.0


def test_csv_errors(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("0,1\n1,x\n")
    with pytest.raises(RankoptInputError, match=r"data row 1, column 1: 'x' is not a number"):
        load_matrix(f)
    g = tmp_path / "ragged.csv"
    g.write_text("0,1,2\n1,0\n2,3,0\n")
    with pytest.raises(
        RankoptInputError, match=r"rows have different lengths; data row 1 has 2 cells"
    ):
        load_matrix(g)


def test_json_forms(tmp_path):
    a = tmp_path / "rows.json"
    a.write_text(json.dumps(M.tolist()))
    assert np.allclose(load_matrix(a), M)
    b = tmp_path / "obj.json"
    b.write_text(json.dumps({"matrix": M.tolist(), "unit": "ms", "labels": ["x", "y", "z"]}))
    assert np.allclose(load_matrix(b), M * 1e-3)
    c = tmp_path / "nested.json"
    c.write_text(json.dumps({"x": {"x": 5, "y": 1}, "y": {"x": 2, "y": 5}}))
    assert np.allclose(load_matrix(c), [[0, 1], [2, 0]])
    d = tmp_path / "bad.json"
    d.write_text("{nope")
    with pytest.raises(RankoptInputError, match="is not valid JSON"):
        load_matrix(d)


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_matrix(tmp_path / "missing.npy")
    f = tmp_path / "m.txt"
    f.write_text("0")
    with pytest.raises(RankoptInputError, match=r"unknown extension '.txt'; expected one of"):
        load_matrix(f)
    g = tmp_path / "m.npy"
    np.save(g, M)
    with pytest.raises(RankoptInputError, match=r"`unit` must be one of 's', 'ms'.*got 'min'"):
        load_matrix(g, unit="min")


@pytest.mark.parametrize(
    "rel, nan, n",
    [
        ("planetlab490/planetlab490_t1_ms.npy", "raise", 490),
        ("seattle99/seattle99_t1_ms.npy", "max", 99),
        ("azure/azure_rtt_p95_ms.npy", "raise", 54),
        ("azure/azure_rtt_p95_ms.csv", "raise", 54),
        ("aws_cloudping/aws_cloudping_p50_ms.npy", "raise", 21),
        ("aws_cloudping/all_latencies.json", "raise", 21),
        ("aws_gcp_intercloud/aws_gcp_vm_rtt_median_ms.npy", "max", 45),
        ("aws_gcp_intercloud/aws_gcp_vm_rtt_median_dense29_ms.npy", "raise", 29),
        ("ripe_atlas_country/ripe_atlas_country_rtt_avg_ms.npy", "max", 173),
        ("cardano_bench52/cardano_bench52_rtt_size64_mean_ms.npy", "max", 52),
    ],
)
def test_real_matrices_load(shared_data, rel, nan, n):
    m = load_matrix(shared_data / "latency" / rel, unit="ms", rtt=True, nan=nan)
    assert m.shape == (n, n)
    assert np.isfinite(m).all() and (m >= 0).all()
    assert (np.diag(m) == 0).all()
    assert 1e-6 < np.median(m[~np.eye(n, dtype=bool)]) < 10  # seconds


def test_json_and_npy_agree(shared_data):
    d = shared_data / "latency" / "aws_cloudping"
    a = load_matrix(d / "all_latencies.json", unit="ms")
    b = load_matrix(d / "aws_cloudping_p50_ms.npy", unit="ms")
    assert np.allclose(a, b)


def test_matrices_that_need_a_nan_policy(shared_data):
    with pytest.raises(
        RankoptInputError, match=r"`latency` must be finite; latency\[\d+, \d+\] is nan"
    ):
        load_matrix(shared_data / "latency/seattle99/seattle99_t1_ms.npy", unit="ms")


def test_tsplib_reader_reproduces_every_optimal_tour(shared_data):
    from _tsplib import read_opt_tour, read_optima, read_tsplib, tour_length

    optima = read_optima(shared_data / "optima.csv")
    checked = 0
    for tour_file in sorted((shared_data / "tsplib").glob("*.opt.tour")):
        name = tour_file.name.split(".")[0]
        d = read_tsplib(shared_data / "tsplib" / f"{name}.tsp")
        order = read_opt_tour(tour_file)
        assert sorted(order.tolist()) == list(range(d.shape[0]))
        assert tour_length(d, order) == optima[name], name
        checked += 1
    assert checked >= 25


# --- files: writers refuse what is not a regular file, readers refuse bad files in one line ---


def _fifo(path):
    os.mkfifo(path)
    return path


def _target(tmp_path, kind):
    """A non-regular target of ``kind`` under tmp_path, and a check that it is untouched."""
    p = tmp_path / f"target-{kind}"
    if kind == "fifo":
        _fifo(p)
        return p, lambda: stat.S_ISFIFO(os.lstat(p).st_mode)
    if kind == "symlink":
        victim = tmp_path / "victim.txt"
        victim.write_text("keep me\n")
        p.symlink_to(victim)
        return (
            p,
            lambda: (
                os.path.islink(p)
                and os.readlink(p) == str(victim)
                and victim.read_text() == "keep me\n"
            ),
        )
    if kind == "dangling":
        p.symlink_to(tmp_path / "planted-elsewhere")
        return p, lambda: os.path.islink(p) and not (tmp_path / "planted-elsewhere").exists()
    if kind == "directory":
        p.mkdir()
        return p, lambda: p.is_dir() and not os.listdir(p)
    if kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
        return p, lambda: stat.S_ISSOCK(os.lstat(p).st_mode)
    raise AssertionError(kind)


KINDS = {
    "fifo": "is a FIFO, not a regular file",
    "symlink": "is a symbolic link; rankopt does not write through links",
    "dangling": "is a symbolic link",
    "directory": "is a directory, not a regular file",
    "socket": "is a socket, not a regular file",
}


def _leftovers(tmp_path):
    return [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_writers_refuse_non_regular_targets_and_leave_them(tmp_path, kind):
    from rankopt.adapters._common import save_order

    p, untouched = _target(tmp_path, kind)
    writes = [
        lambda: atomic_write_text(p, "0\n", what="--order-out"),
        lambda: save_order(p, [1, 0], what="--order-out"),
        lambda: synthetic_cloud(1, 1, 2, rng=0).save(p, what="--output"),
        lambda: Measurement(np.zeros((2, 2)), None, ("a", "b")).save(p),
    ]
    for write in writes:
        with pytest.raises(RankoptFileError, match=KINDS[kind]) as info:
            write()
        assert str(p) in str(info.value) and "\n" not in str(info.value)
        assert isinstance(info.value, OSError) and isinstance(info.value, RankoptInputError)
        assert untouched()
    assert info.value.args[0].startswith(f"measurement file '{p}'")
    assert _leftovers(tmp_path) == []


def test_writer_error_names_the_option(tmp_path):
    p = _fifo(tmp_path / "fifo")
    with pytest.raises(
        RankoptFileError, match=rf"^--order-out '{p}' is a FIFO, not a regular file"
    ):
        atomic_write_text(p, "x", what="--order-out")
    with pytest.raises(RankoptFileError, match=r"--output '.*/nodir/x.npz': directory .* does not"):
        atomic_write_text(tmp_path / "nodir" / "x.npz", "x", what="--output")


def test_character_device_is_written_in_place(tmp_path):
    """A character device (here a null device made under tmp_path) stays a device."""
    dev = tmp_path / "null"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.open(dev, os.O_WRONLY)
    except OSError as exc:
        pytest.skip(f"cannot make a null device here: {exc}")
    atomic_write_text(dev, "0\n1\n")
    synthetic_cloud(1, 1, 2, rng=0).save(dev)
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and os.lstat(dev).st_rdev == os.makedev(1, 3)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("exc", [KeyboardInterrupt, OSError, ValueError])
def test_interrupted_writes_leave_no_partial_or_temp_file(tmp_path, monkeypatch, exc):
    old = tmp_path / "old.txt"
    old.write_text("previous\n")

    def half(fh):
        fh.write(b"half")
        raise exc("stop")

    for target in (old, tmp_path / "new.txt"):
        with pytest.raises(exc):
            atomic_write(target, half)
    assert old.read_text() == "previous\n" and not (tmp_path / "new.txt").exists()

    def savez(fh, **arrays):  # Ctrl-C in the middle of an .npz
        fh.write(b"PK\x03\x04partial")
        raise exc("stop")

    monkeypatch.setattr(np, "savez", savez)
    with pytest.raises(exc):
        synthetic_cloud(1, 1, 2, rng=0).save(tmp_path / "cloud.npz")
    with pytest.raises(exc):
        Measurement(np.zeros((2, 2)), None, ("a", "b")).save(tmp_path / "m.npz")
    assert sorted(os.listdir(tmp_path)) == ["old.txt"]


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_file_mode_follows_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        a = atomic_write_text(tmp_path / "order.txt", "0\n")
        b = Measurement(np.zeros((2, 2)), None, ("a", "b")).save(tmp_path / "probe.npz")
        c = synthetic_cloud(1, 1, 2, rng=0).save(tmp_path / "cloud.npz")
    finally:
        os.umask(old)
    for p in (a, b, c):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o666 & ~mask, p
    os.chmod(a, 0o600)  # a file that is replaced keeps its mode
    atomic_write_text(a, "1\n")
    assert stat.S_IMODE(os.stat(a).st_mode) == 0o600 and a.read_text() == "1\n"


def _ok_measurement(tmp_path):
    return Measurement(np.array([[0.0, 1e-6], [2e-6, 0.0]]), None, ("a", "b")).save(
        tmp_path / "ok.npz"
    )


def _bomb(path, shape):
    """An .npz whose one array's header promises ``shape`` float64 but stores a few bytes."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("latency.npy", buf.getvalue() + bytes(64))
        zf.writestr("hosts.npy", b"")
    return path


class _Alarm:
    """Fail instead of hanging if a read blocks."""

    def __enter__(self):
        def boom(*_):
            raise AssertionError("the read blocked")

        self.old = signal.signal(signal.SIGALRM, boom)
        signal.alarm(10)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.old)


def _bad_inputs(tmp_path):
    """(name, path, message regex) for every class of bad input file."""
    ok = _ok_measurement(tmp_path)
    data = ok.read_bytes()
    cases = []
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    cases.append(
        ("truncated npz", truncated, r"is not a valid \.npz archive \(truncated or corrupt")
    )
    corrupt = tmp_path / "corrupt.npz"
    with zipfile.ZipFile(ok) as zf:  # flip bytes inside the stored latency array
        info = zf.getinfo("latency.npy")
    local = data[info.header_offset :]
    start = info.header_offset + 30 + int.from_bytes(local[26:28], "little")
    start += int.from_bytes(local[28:30], "little") + 128 + 8
    corrupt.write_bytes(
        data[:start] + bytes(b ^ 0xFF for b in data[start : start + 8]) + data[start + 8 :]
    )
    cases.append(("corrupt npz", corrupt, r"is not a valid \.npz archive|is not a \.npy array"))
    header = tmp_path / "header.csv"
    header.write_text("host,a,b\n")
    cases.append(("header-only csv", header, r"has a header row but no data rows"))
    stamps = tmp_path / "stamps.npz"
    np.savez(stamps, latency=np.zeros((2, 2)), hosts=np.array(["a", "b"]), timestamps=np.float64(3))
    cases.append(("scalar timestamps", stamps, r"array 'timestamps' must hold 2 numbers"))
    fifo = _fifo(tmp_path / "fifo.csv")
    cases.append(("FIFO .csv", fifo, r"is a FIFO, not a regular file"))
    folder = tmp_path / "folder.npy"
    folder.mkdir()
    cases.append(("directory .npy", folder, r"is a directory, not a regular file"))
    bomb = _bomb(tmp_path / "bomb.npz", (400_000_000,))
    cases.append(("npz expanding to 3 GB", bomb, r"would expand to 3\.2 GB; rankopt loads at most"))
    wide = _bomb(tmp_path / "wide.npz", (20_000, 20_000))
    cases.append(("npz of n=20000", wide, rf"gives n=20000 processes, over the limit of {MAX_N}"))
    sparse = tmp_path / "sparse.csv"
    with open(sparse, "wb") as fh:
        fh.truncate(2 * 10**9)
    cases.append(("2 GB sparse csv", sparse, r"is 2 GB; rankopt reads at most 256 MiB"))
    short = tmp_path / "short.npy"
    np.save(short, np.zeros((50, 50)))
    short.write_bytes(short.read_bytes()[:1000])
    cases.append(("truncated npy", short, r"is truncated: its header promises"))
    rect = tmp_path / "rect.csv"
    rect.write_text("0,1\n1,0\n2,2\n")
    cases.append(("non-square csv", rect, r"holds 3 rows of 2 values, not a square .*long format"))
    rect_npy = tmp_path / "rect.npy"
    np.save(rect_npy, np.zeros((3, 2)))
    cases.append(("non-square npy", rect_npy, r"must be square; got shape \(3, 2\).*long format"))
    return cases


def test_bad_input_files_give_one_line_naming_the_file(tmp_path):
    for name, path, match in _bad_inputs(tmp_path):
        with _Alarm(), pytest.raises(RankoptInputError, match=match) as info:
            load_matrix(path)
        msg = str(info.value)
        assert str(path) in msg and "\n" not in msg, (name, msg)


def test_readers_of_clouds_and_measurements_refuse_bad_files(tmp_path):
    fifo = _fifo(tmp_path / "fifo.npz")
    with _Alarm():
        for load in (load_cloud, load_measurement):
            with pytest.raises(RankoptFileError, match=r"fifo\.npz' is a FIFO"):
                load(fifo)
    bomb = _bomb(tmp_path / "bomb.npz", (400_000_000,))
    with pytest.raises(RankoptFileError, match=r"array 'latency' has shape \(400000000,\)"):
        load_cloud(bomb)


def test_csv_bom_separators_and_whitespace(tmp_path):
    want = np.array([[0.0, 2.0], [3.0, 0.0]]) * 1e-3
    for name, text in {
        "bom.csv": "\ufeffhost,a,b\na,0,2\nb,3,0\n",
        "semicolon.csv": "host;a;b\na;0;2\nb;3;0\n",
        "tab.csv": "host\ta\tb\na\t0\t2\nb\t3\t0\n",
        "spaces.csv": "# latency in ms\nhost a b\na 0 2\nb 3 0\n",
    }.items():
        f = tmp_path / name
        f.write_text(text, encoding="utf-8")
        lat, labels = load_matrix_and_labels(f, unit="ms")
        assert np.allclose(lat, want) and labels == ["a", "b"], name


def test_csv_long_format(tmp_path):
    f = tmp_path / "long.csv"
    f.write_text("src,dst,latency\n0,1,2\n1,0,3\n")
    assert np.allclose(load_matrix(f), [[0, 2], [3, 0]])
    f.write_text("0,1,2\n1,0,3\n0,2,1\n2,0,1\n1,2,5\n2,1,5\n")  # no header, indices
    assert np.allclose(load_matrix(f), [[0, 2, 1], [3, 0, 5], [1, 5, 0]])
    f.write_text("from,to,ms\nx,y,2\ny,x,3\n")  # host names
    vals, labels, _ = read_matrix(f)
    assert labels == ["x", "y"] and np.allclose(vals, [[0, 2], [3, 0]])
    f.write_text("src,dst,value\n0,1,2\n")  # a missing pair is NaN
    with pytest.raises(RankoptInputError, match=r"long\.csv'.*latency\[1, 0\] is nan"):
        load_matrix(f)
    assert np.allclose(load_matrix(f, nan="symmetric"), [[0, 2], [2, 0]])
    f.write_text("src,dst,value\n0,1,2\n0,1,3\n")
    with pytest.raises(
        RankoptInputError, match=r"pair \(0, 1\) appears twice \(data rows 0 and 1\)"
    ):
        load_matrix(f)
    f.write_text("src,dst,value\n0,99999,2\n")
    with pytest.raises(RankoptInputError, match=r"long format\) gives n=100000 processes"):
        load_matrix(f)
    f.write_text("0,1,2\n1,0,3\n2,3,0\n")  # three rows of three: a matrix
    assert load_matrix(f).shape == (3, 3)


def test_simulate_size_guard_before_allocation():
    with pytest.raises(RankoptInputError, match=r"n_pods=100 x racks_per_pod=100 x .* n=1000000"):
        synthetic_cloud(100, 100, 100)


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "rankopt", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_bad_files_give_exactly_one_stderr_line(tmp_path):
    cases = _bad_inputs(tmp_path)
    picked = {
        "truncated npz",
        "npz expanding to 3 GB",
        "FIFO .csv",
        "header-only csv",
        "2 GB sparse csv",
        "truncated npy",
        "non-square csv",
    }
    for name, path, match in cases:
        if name not in picked:
            continue
        p = _cli("solve", str(path))
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1 and len(lines) == 1, (name, p.stderr)
        assert str(path) in lines[0] and re.search(match, lines[0]), (name, lines[0])
    ok = tmp_path / "ok.npy"
    np.save(ok, np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]]))
    fifo = _fifo(tmp_path / "out.txt")
    p = _cli("solve", str(ok), "--order-out", str(fifo))
    assert p.returncode == 1 and p.stderr.strip() == (
        f"rankopt solve: error: --order-out '{fifo}' is a FIFO, not a regular file."
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    p = _cli("simulate", "--pods", "100", "--racks", "100", "--hosts", "100", "-o", str(ok))
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "--pods 100 x --racks 100 x --hosts 100 x --ranks-per-host 1 = 1000000" in p.stderr


def test_unwritable_folder_names_the_target_not_the_temporary(tmp_path, monkeypatch):
    import tempfile

    def denied(**kw):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(
        RankoptFileError, match=r"^cannot write --output '.*out\.npz': Permission denied\.$"
    ):
        atomic_write_text(tmp_path / "out.npz", "x", what="--output")


def test_units_are_converted_before_the_range_check(tmp_path):
    f = tmp_path / "ns.csv"
    f.write_text("0,2000000\n2000000,0\n")  # 2 ms in nanoseconds
    lat = load_matrix(f, unit="ns")
    assert lat[0, 1] == pytest.approx(2e-3)
    assert load_matrix(f, unit="ns", rtt=True)[0, 1] == pytest.approx(1e-3)
    b = tmp_path / "b.npy"
    np.save(b, np.array([[False, True], [True, False]]))
    with pytest.raises(RankoptInputError, match="not a plain numeric"):
        load_matrix(b)
