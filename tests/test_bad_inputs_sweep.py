"""Bad inputs a demanding user gives the command line: each is refused with one line that
names the argument, the value and where, a non-zero exit, and nothing left on disk."""

import json
import zipfile

import numpy as np
import pytest

import rankopt
from rankopt._files import load_npz
from rankopt._validation import RankoptInputError
from rankopt.cli import main
from rankopt.network.io import read_matrix

M4 = "0,1,2,3\n1,0,2,3\n2,2,0,1\n3,3,1,0\n"


def cli(capsys, *argv):
    """``rankopt ARGV`` in this process: ``(exit status, stdout, stderr)``."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err):
    """The one error line of ``err``; no traceback."""
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "text, cell",
    [
        ("0;1,5;2;3\n1,5;0;2;3\n2;2;0;1\n3;3;1;0\n", "'1,5'"),  # decimal commas
        ("0,x,2,3\n1,0,2,3\n2,2,0,1\n3,3,1,0\n", "'x'"),  # a typo in the first row
    ],
)
def test_csv_bad_cell_in_first_row_is_not_a_header(tmp_path, capsys, text, cell):
    """A first row mixing numbers and text is data with a bad cell, not host names to drop."""
    f = tmp_path / "m.csv"
    f.write_text(text)
    code, out, err = cli(capsys, "solve", str(f), "-q")
    line = error_line(err)
    assert code == 1 and out == ""
    assert f"'{f}' data row 0, column 1: {cell} is not a number." in line


def test_csv_missing_markers_in_first_row_and_column_are_data(tmp_path):
    """``na`` and ``-`` mark missing measurements; they do not make a header or row names."""
    f = tmp_path / "m.csv"
    f.write_text("0,na,2\n-,0,2\n2,2,0\n")
    vals, labels, _ = read_matrix(f)
    assert labels is None and vals.shape == (3, 3)
    assert np.isnan(vals[0, 1]) and np.isnan(vals[1, 0]) and vals[2, 0] == 2


def test_csv_header_without_corner_cell_names_the_hosts(tmp_path):
    f = tmp_path / "m.csv"
    f.write_text("a,b,c,d\n" + M4)
    vals, labels, _ = read_matrix(f)
    assert labels == ["a", "b", "c", "d"] and vals.shape == (4, 4)


@pytest.mark.parametrize("command", ["solve", "compare"])
def test_a_folder_given_as_the_matrix_is_said_to_be_one(tmp_path, capsys, command):
    """A folder with no extension is a folder, not a file of unknown extension ''."""
    d = tmp_path / "runs"
    d.mkdir()
    code, out, err = cli(capsys, command, str(d), "-q")
    line = error_line(err)
    assert code == 1 and out == ""
    assert (
        line == f"rankopt {command}: error: matrix file '{d}' is a directory, not a regular file."
    )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"bandwidth": -np.ones((4, 4))}, "`bandwidth` must be non-negative; bandwidth[0, 1] is"),
        ({"bandwidth": np.ones((2, 2))}, "`bandwidth` must have shape (4, 4) like `latency`"),
        ({"hosts": np.array(["a b"] * 4)}, "`hosts` must hold host names; hosts[0] is 'a b'"),
    ],
)
def test_npz_whose_arrays_are_refused_names_the_file(tmp_path, capsys, change, message):
    """A cloud or probe .npz whose matrices or hosts are refused: the file is named."""
    import rankopt

    f = tmp_path / "c.npz"
    rankopt.synthetic_cloud(1, 2, 2, rng=0).save(f)
    arrays = {**dict(np.load(f)), **change}
    np.savez(f, **arrays)
    code, out, err = cli(capsys, "solve", str(f), "-q")
    line = error_line(err)
    assert code == 1 and out == ""
    assert f"rankopt solve: error: network file '{f}': {message}" in line


def test_json_unit_from_the_file_names_the_file(tmp_path, capsys):
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"matrix": [[0, 1], [1, 0]], "unit": "parsec"}))
    code, _, err = cli(capsys, "solve", str(f), "-q")
    line = error_line(err)
    assert code == 1
    assert f"matrix file '{f}': 'unit' must be one of" in line and "got 'parsec'" in line
    assert "--unit" not in line  # the user gave no --unit


def test_json_duplicate_key_is_refused(tmp_path, capsys):
    f = tmp_path / "m.json"
    f.write_text('{"a": {"b": 1, "b": 5}, "b": {"a": 1}}')
    code, _, err = cli(capsys, "solve", str(f), "-q")
    line = error_line(err)
    assert code == 1
    assert f"matrix file '{f}': key 'b' appears twice in one object (values 1 and 5)." in line


def _npy3_header(shape: bytes) -> bytes:
    text = b"{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + b"}"
    return len(text).to_bytes(4, "little") + text


def test_npy_format_3_is_read(tmp_path, capsys):
    # format 3.0 (a UTF-8 header) is what np.save writes for non-ASCII field names;
    # NumPy reads its header only through a private function that moved in 2.x
    lat = np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 5.0], [5.0, 5.0, 0.0]]) * 1e-6
    f = tmp_path / "m.npy"
    with open(f, "wb") as fh:
        np.lib.format.write_array(fh, lat, version=(3, 0))
    code, out, err = cli(capsys, "solve", str(f), "-q")
    assert code == 0, err
    z = tmp_path / "m.npz"
    with zipfile.ZipFile(z, "w") as zf, zf.open("latency.npy", "w") as m:
        np.lib.format.write_array(m, lat, version=(3, 0))
    np.testing.assert_array_equal(load_npz(z)["latency"], lat)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x93NUMPY garbage here", "unknown .npy format version 32.103"),
        (b"\x93NUMPY\x09\x00" + b"\0" * 16, "unknown .npy format version 9.0"),
        (b"\x93NUMPY\x03\x00\x10", "the header's length is cut off"),
        (b"\x93NUMPY\x03\x00\x40\x00\x00\x00{'descr'", "the header is cut off"),
        (b"\x93NUMPY\x03\x00\xff\xff\x00\x00", "a header of 65535 bytes"),
        (b"\x93NUMPY\x03\x00\x08\x00\x00\x00[1, 2]  ", "not the array dictionary"),
        (b"\x93NUMPY\x03\x00" + _npy3_header(b"(2, -2)"), "shape is not a tuple of sizes"),
    ],
)
def test_npy_bad_header_is_named(tmp_path, capsys, data, reason):
    f = tmp_path / "m.npy"
    f.write_bytes(data)
    code, _, err = cli(capsys, "solve", str(f), "-q")
    line = error_line(err)
    assert code == 1
    assert f"matrix file '{f}' is not a valid .npy file" in line and reason in line
    assert "Error:" not in line  # no Python exception name leaks


def test_npz_over_the_size_limit_is_not_called_corrupt(tmp_path, capsys):
    f = tmp_path / "big.npz"
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("latency.npy", "w") as m:
            header = {"descr": "<f8", "fortran_order": False, "shape": (40000, 40000)}
            np.lib.format.write_array_header_1_0(m, header)
            m.write(b"\0" * 4096)
    code, _, err = cli(capsys, "solve", str(f), "-q")
    line = error_line(err)
    assert code == 1
    assert f"'{f}', array 'latency' gives n=40000 processes, over the limit" in line
    assert "corrupt" not in line and "not a valid" not in line


@pytest.mark.parametrize("command", ["solve", "compare", "demo"])
def test_negative_seed_names_the_option(tmp_path, capsys, command):
    f = tmp_path / "m.csv"
    f.write_text(M4)
    argv = [command, "--seed", "-1", "-q"] + ([str(f)] if command != "demo" else [])
    code, out, err = cli(capsys, *argv)
    assert code == 2 and out == ""
    assert (
        f"rankopt {command}: error: argument --seed: must be a non-negative integer; got -1." in err
    )
    assert "`rng`" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    "option, message",
    [
        (("--nbytes", "0"), "argument --nbytes: --nbytes must be at least one byte; got '0'."),
        (("--time-limit", "nan"), "argument --time-limit: must be positive and finite; got 'nan'."),
    ],
)
def test_compare_bad_option_is_said_once(tmp_path, capsys, option, message):
    # refused as the command line is read: before any matrix is read or solved
    f = tmp_path / "m.csv"
    f.write_text(M4)
    code, _, err = cli(capsys, "compare", str(f), "-q", *option)
    line = error_line(err)
    assert code == 2
    assert line == f"rankopt compare: error: {message}"


@pytest.mark.parametrize(
    "option, message",
    [
        (("--nbytes", "0"), "argument --nbytes: --nbytes must be at least one byte; got '0'."),
        (("--time-limit", "nan"), "argument --time-limit: must be positive and finite; got 'nan'."),
        (("--time-limit", "-1"), "argument --time-limit: must be positive and finite; got '-1'."),
    ],
)
def test_launcher_refuses_a_bad_solve_option_before_it_probes(capsys, option, message):
    # python -m rankopt.mpi read these only in the solve, after a whole probe, and named
    # the solver's argument (`nbytes`, `time_limit`) instead of the option
    from rankopt.cli._mpi_main import main

    with pytest.raises(SystemExit) as exc:
        main([*option, "prog.py"])
    assert exc.value.code == 2
    assert error_line(capsys.readouterr().err) == f"python -m rankopt.mpi: error: {message}"


@pytest.mark.parametrize("flag", ["--order-out", "--rankfile", "--json"])
def test_output_over_the_input_matrix_is_refused(tmp_path, capsys, flag):
    f = tmp_path / "m.json"
    text = json.dumps({"matrix": [[0, 1, 2], [1, 0, 2], [2, 2, 0]], "labels": ["a", "b", "c"]})
    f.write_text(text)
    code, out, err = cli(capsys, "solve", str(f), "-q", flag, str(f))
    line = error_line(err)
    assert code == 1 and out == ""
    assert f"{flag} '{f}' is the input matrix file; give the output another name." in line
    assert f.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


@pytest.mark.parametrize("first, second", [("--order-out", "--hostfile"), ("--rankfile", "--json")])
def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys, first, second):
    """One file given to two outputs: refused before the solve, not overwritten by the second."""
    f = tmp_path / "m.json"
    f.write_text(
        json.dumps({"matrix": [[0, 1, 2], [1, 0, 2], [2, 2, 0]], "labels": ["a", "b", "c"]})
    )
    out_file = tmp_path / "out.txt"
    code, out, err = cli(
        capsys, "solve", str(f), "-q", first, str(out_file), second, f"{tmp_path}/./out.txt"
    )
    line = error_line(err)
    assert code == 1 and out == ""
    assert f"{second} '{tmp_path}/./out.txt' is also the file of {first}; give each" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


@pytest.mark.parametrize("from_env", [False, True])
def test_output_over_the_workload_file_is_refused(tmp_path, capsys, monkeypatch, from_env):
    """--json over the workload the solve reads (given, or $RANKOPT_WORKLOAD) overwrote it."""
    m, w = tmp_path / "m.csv", tmp_path / "app.json"
    m.write_text(M4)
    w.write_text('[["allreduce", 1048576, 3]]')
    if from_env:
        monkeypatch.setenv("RANKOPT_WORKLOAD", str(w))
    argv = ["solve", str(m), "-q", "--json", str(w)] + ([] if from_env else ["--workload", str(w)])
    code, out, err = cli(capsys, *argv)
    line = error_line(err)
    what = "$RANKOPT_WORKLOAD" if from_env else "--workload"
    assert code == 1 and out == ""
    assert f"--json '{w}' is the {what} file; give the output another name." in line
    assert w.read_text() == '[["allreduce", 1048576, 3]]'


@pytest.mark.parametrize("over", ["matrix", "workload"])
def test_compare_json_over_a_file_it_reads_is_refused(tmp_path, capsys, over):
    """compare --json over its matrix or workload overwrote it; refused as solve does."""
    m, w = tmp_path / "m.json", tmp_path / "app.json"
    m.write_text(json.dumps({"matrix": [[0, 1, 2], [1, 0, 2], [2, 2, 0]]}))
    w.write_text('[["allreduce", 1048576, 3]]')
    before = {p: p.read_text() for p in (m, w)}
    target = m if over == "matrix" else w
    code, out, err = cli(capsys, "compare", str(m), "--workload", str(w), "--json", str(target))
    line = error_line(err)
    what = "the input matrix file" if over == "matrix" else "the --workload file"
    assert code == 1 and out == ""
    assert line.endswith(f"--json '{target}' is {what}; give the output another name.")
    assert {p: p.read_text() for p in (m, w)} == before


def test_launcher_files_without_host_names_write_nothing(tmp_path, capsys):
    """The missing host names are found before the solve, so --order-out is not left behind."""
    f = tmp_path / "m.csv"
    f.write_text(M4)
    order, rankfile = tmp_path / "order.txt", tmp_path / "rankfile"
    code, out, err = cli(
        capsys, "solve", str(f), "-q", "--order-out", str(order), "--rankfile", str(rankfile)
    )
    line = error_line(err)
    assert code == 1 and out == ""
    assert f"'{f}' holds no host names; --rankfile/--hostfile/--slurm-hostfile need" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv"]


def test_workload_with_a_byte_order_mark(tmp_path, capsys):
    f = tmp_path / "m.csv"
    f.write_text(M4)
    w = tmp_path / "work.txt"
    w.write_bytes("\ufeffallreduce,16M,10\r\nallgather,1M,2\r\n".encode())
    code, out, err = cli(capsys, "solve", str(f), "-q", "--workload", str(w))
    assert code == 0, err
    assert sorted(int(x) for x in out.split()) == [0, 1, 2, 3]


def test_workload_errors_name_the_file(tmp_path):
    from rankopt.models.workload import load_workload

    lines = tmp_path / "calls.txt"
    lines.write_text("allreduce,16M,10\nallreduce,16X,1\n")
    with pytest.raises(RankoptInputError, match=r"calls.txt', line 2: .*16X"):
        load_workload(lines)
    listed = tmp_path / "calls.json"
    listed.write_text('[{"collective": "allreduce", "nbytes": 1024}, {"collective": "x"}]')
    with pytest.raises(RankoptInputError, match=r"workload file '.*calls.json': .*entry 1"):
        load_workload(listed)
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    with pytest.raises(RankoptInputError, match=r"empty.json': an object needs a 'workload'"):
        load_workload(empty)


FIFO_CASES = {
    "workload": (["solve", "{m}", "--workload", "{f}"], {}, "workload file '{f}' is a FIFO"),
    "rules": (
        ["solve", "{m}", "--engine", "openmpi"],
        {
            "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
            "OMPI_MCA_coll_tuned_dynamic_rules_filename": "{f}",
        },
        "dynamic_rules_filename file '{f}' is a FIFO",
    ),
}


@pytest.mark.parametrize("case", sorted(FIFO_CASES))
def test_a_fifo_given_as_an_input_file_is_refused_not_read(tmp_path, case):
    # reading a FIFO that no one writes would wait for ever
    import os
    import subprocess
    import sys

    m = tmp_path / "m.csv"
    m.write_text(M4)
    f = tmp_path / "pipe"
    os.mkfifo(f)
    argv, env, message = FIFO_CASES[case]
    argv = [a.format(m=m, f=f) for a in argv]
    env = {**os.environ, **{k: v.format(f=f) for k, v in env.items()}}
    code = "import sys; from rankopt.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, *argv, "-q"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert message.format(f=f) in error_line(done.stderr)


def test_a_fifo_given_as_a_profile_is_refused(tmp_path):
    import os

    from rankopt.adapters.profile import read_profile

    f = tmp_path / "pipe"
    os.mkfifo(f)
    with pytest.raises(RankoptInputError, match="profile '.*pipe' is a FIFO"):
        read_profile(f)


def test_a_missing_workload_file_is_said_once(tmp_path, capsys):
    m = tmp_path / "m.csv"
    m.write_text(M4)
    code, _, err = cli(capsys, "solve", str(m), "--workload", str(tmp_path / "none.json"))
    assert code == 1
    assert error_line(err).endswith(f"workload file '{tmp_path / 'none.json'}' does not exist.")


@pytest.mark.parametrize(("value", "bad"), [("nope", "nope"), ("ils,,two_opt", ""), ("ILS", "ILS")])
def test_compare_unknown_method_names_the_flag(tmp_path, capsys, value, bad):
    m = tmp_path / "m.csv"
    m.write_text(M4)
    code, _, err = cli(capsys, "compare", str(m), "--methods", value)
    line = error_line(err)
    assert code == 1
    assert f"--methods: unknown method {bad!r}; the methods are anneal, auto," in line


def test_compare_methods_with_spaces(tmp_path, capsys):
    m = tmp_path / "m.csv"
    m.write_text(M4)
    code, out, err = cli(capsys, "compare", str(m), "--methods", "ils, two_opt")
    assert code == 0, err
    assert "ils" in out and "two_opt" in out


def test_a_hint_to_pass_a_setting_the_command_has_no_option_for_is_left_out(tmp_path, capsys):
    # probe --plan reads a latency matrix but has no --nan: the library's hint
    # "Pass nan='symmetric'" named a setting no option gives; solve has --nan and keeps it
    lat = np.ones((4, 4))
    np.fill_diagonal(lat, 0.0)
    lat[0, 1] = np.nan
    f = tmp_path / "lat.npy"
    np.save(f, lat)
    code, _, err = cli(capsys, "probe", "--plan", "-n", "4", "--latency", str(f))
    line = error_line(err)
    assert code == 1 and "latency[0, 1] is nan" in line, line
    assert "Pass" not in line and "nan=" not in line, line
    code, _, err = cli(capsys, "solve", str(f), "-q")
    assert code == 1 and error_line(err).endswith(
        "Pass --nan symmetric to fill a missing entry from the reverse direction."
    )


@pytest.mark.parametrize(
    "item, message",
    [
        ("bogus=1", "--probe-option bogus=...: no such probe setting; the settings are"),
        ("repeats=x", "--probe-option: `repeats` must be an integer; got 'x' instead."),
        ("bandwidth=maybe", "--probe-option: `bandwidth` must be True or False"),
    ],
)
def test_a_bad_probe_option_is_refused_before_the_job_starts(capsys, tmp_path, item, message):
    # an unknown setting, or one of the wrong type, was found only once the probe ran
    from rankopt.cli._mpi_main import main as mpi_main

    prog = tmp_path / "prog.py"
    prog.write_text("pass\n")
    with pytest.raises(SystemExit) as exc:
        mpi_main(["--probe-option", item, str(prog)])
    assert exc.value.code == 2
    assert message in error_line(capsys.readouterr().err)


@pytest.mark.parametrize("methods", ["", " "])
def test_compare_with_an_empty_methods_list_is_refused(tmp_path, capsys, methods):
    # --methods "" compared every method, while --methods , was an error
    f = tmp_path / "m.csv"
    f.write_text(M4)
    code, out, err = cli(capsys, "compare", str(f), "-q", "--methods", methods)
    assert code == 1 and out == ""
    assert error_line(err).startswith("rankopt compare: error: --methods names no method")


@pytest.mark.parametrize("flag", ["--master-port", "--probe-port"])
@pytest.mark.parametrize("value", ["99999", "0", "x"])
def test_run_port_options_are_checked_as_read(capsys, flag, value):
    # --master-port 99999 was refused as MASTER_PORT, and only once a launcher was found
    code, out, err = cli(capsys, "run", flag, value, "--", "python", "-c", "pass")
    assert code == 2 and out == ""
    assert error_line(err).startswith(f"rankopt run: error: argument {flag}: must be"), err


def test_a_network_file_with_a_missing_latency_is_named(tmp_path, capsys):
    # a .npz network whose latency has a NaN was refused inside the solve, the file unnamed
    net = rankopt.synthetic_cloud(1, 2, 2, rng=0)
    good = tmp_path / "net.npz"
    net.save(good)
    arrays = dict(np.load(good, allow_pickle=True))
    arrays["latency"] = arrays["latency"].copy()
    arrays["latency"][0, 1] = np.nan
    bad = tmp_path / "nan.npz"
    np.savez(bad, **arrays)
    code, out, err = cli(capsys, "solve", str(bad), "-q")
    assert code == 1 and out == ""
    line = error_line(err)
    assert line.startswith(f"rankopt solve: error: network file '{bad}': `latency` must be finite")
    assert "Pass --nan symmetric" in line
    code, out, _ = cli(capsys, "solve", str(bad), "-q", "--nan", "symmetric")
    assert code == 0 and out.strip()
