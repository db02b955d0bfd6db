"""rankopt profile: the shim's recorder, the torch hook, the profile file and the launchers.

The ``mpi`` tests build the shim and run C and mpi4py programs on 4 ranks under
``rankopt profile``; the ``torch`` tests run a 2-process Gloo program (plain
collectives and a DDP model) and a 3-process one (point-to-point traffic)
under torchrun.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rankopt
from rankopt._validation import RankoptInputError
from rankopt.adapters import shim
from rankopt.adapters._shim_src import generate as gen
from rankopt.adapters.profile import (
    Profile,
    ProfileEntry,
    profile_command,
    read_profile,
    read_rank_files,
    workload_engine,
    write_profile,
)
from rankopt.cli import main
from rankopt.models.workload import Call, load_workload

PROGRAMS = Path(__file__).parent / "shim_programs"
SCRIPTS = Path(__file__).parent / "mpi_scripts"
N = 4

# --------------------------------------------------------------------------- the generated code

HEADER = """
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
    MPI_Op op, MPI_Comm comm);
int PMPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
    MPI_Op op, MPI_Comm comm);
int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
    int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int PMPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
    int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int MPI_Allgatherv_c(const void *, MPI_Count, MPI_Datatype, void *, const MPI_Count [],
    const MPI_Aint [], MPI_Datatype, MPI_Comm);
int PMPI_Allgatherv_c(const void *, MPI_Count, MPI_Datatype, void *, const MPI_Count [],
    const MPI_Aint [], MPI_Datatype, MPI_Comm);
"""


def test_generated_wrappers_record_the_collectives():
    entries = [
        gen.Entry("MPI_Allreduce", "coll", "sub", 1),
        gen.Entry("MPI_Ialltoall", "coll-nb", "sub", 2),
        gen.Entry("MPI_Allgatherv", "coll", "sub", 3),
    ]
    code = gen.generate(HEADER, entries).code
    # blocking: timed, recorded after the call
    assert (
        "    double t0_ = PMPI_Wtime();\n"
        "    int rc_ = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, rankopt_in(comm));\n"
        '    rankopt_record("allreduce", (long long)count, datatype, comm, 0, '
        "PMPI_Wtime() - t0_);"
    ) in code
    # non-blocking: recorded at the call, the receive side's counts times the size
    assert ('    rankopt_record("alltoall", (long long)recvcount, recvtype, comm, 1, 0.0);') in code
    # the large-count twin of a v-collective sums its MPI_Count array
    assert 'rankopt_record("allgather", rankopt_sum_counts_count(arg4, arg7), arg6, arg7, 0' in code
    assert all("rankopt_recording" in w for w in code.split("RANKOPT_EXPORT")[1:])
    assert {r.kind for r in gen.RECORDED.values()} == {
        "allreduce", "broadcast", "reduce", "allgather", "alltoall", "alltoallv",
        "reduce_scatter", "barrier",
    }  # fmt: skip
    assert "MPI_Allreduce_init" not in gen.RECORDED  # persistent calls run at MPI_Start


TRAFFIC_HEADER = """
int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
    MPI_Comm comm, MPI_Request *request);
int PMPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
    MPI_Comm comm, MPI_Request *request);
int MPI_Start(MPI_Request *request);
int PMPI_Start(MPI_Request *request);
int MPI_Put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
    int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype,
    MPI_Win win);
int PMPI_Put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
    int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype,
    MPI_Win win);
int MPI_Alltoallv_c(const void *, const MPI_Count [], const MPI_Aint [], MPI_Datatype, void *,
    const MPI_Count [], const MPI_Aint [], MPI_Datatype, MPI_Comm);
int PMPI_Alltoallv_c(const void *, const MPI_Count [], const MPI_Aint [], MPI_Datatype, void *,
    const MPI_Count [], const MPI_Aint [], MPI_Datatype, MPI_Comm);
"""


def test_generated_wrappers_record_the_traffic():
    entries = [
        gen.Entry("MPI_Send_init", "p2p", "sub", 1),
        gen.Entry("MPI_Start", "p2p", "record", 2),
        gen.Entry("MPI_Put", "rma", "record", 3),
        gen.Entry("MPI_Alltoallv", "coll", "sub", 4),
    ]
    out = gen.generate(TRAFFIC_HEADER, entries)
    assert out.wrapped == ("MPI_Send_init", "MPI_Start", "MPI_Put", "MPI_Alltoallv_c")
    code = out.code
    # a persistent send: remembered under its request once the call made it
    assert (
        "    int rc_ = PMPI_Send_init(buf, count, datatype, dest, tag, rankopt_in(comm), request);\n"
        "    if (rc_ == MPI_SUCCESS) rankopt_traffic_send(count, datatype, dest, "
        "rankopt_in(comm), request);\n    return rc_;"
    ) in code
    assert "    rankopt_traffic_start(1, request);\n    return PMPI_Start(request);" in code
    assert "rankopt_traffic_rma(origin_count, origin_datatype, target_rank, win, 0);" in code
    # the large-count twin's counts are MPI_Count (big = 1); the library sees the reordered comm
    assert (
        "rankopt_traffic_alltoallv(arg0, arg1, arg3, arg5, arg7, 1, rankopt_in(arg8), NULL);"
    ) in code
    assert 'rankopt_record("alltoallv", rankopt_sum_counts_count(arg1, arg8)' in code
    with pytest.raises(gen.TableError, match="action 'record' but no traffic is recorded"):
        gen.generate("int MPI_Wait(MPI_Request *r); int PMPI_Wait(MPI_Request *r);",
                     [gen.Entry("MPI_Wait", "p2p", "record", 5)])  # fmt: skip
    names = {e.name: e.action for e in gen.read_table()}
    for name in gen.TRAFFIC:  # every recorded call is wrapped, with a recording action
        assert names[name] in ("sub", "record"), name


# --------------------------------------------------------------------------- merging, the file


def _rank_file(folder: Path, rank: int, rows: list[str], source="mpi", extra="") -> None:
    head = f"# rankopt profile 1 source={source} world_rank={rank} world_size=4 {extra}\n"
    lib = "# library Open MPI v5.0.11, package: Open MPI\n" if source == "mpi" else ""
    (folder / f"{source}-rank-{rank}.tsv").write_text(head + lib + "\n".join(rows) + "\n")


def test_rank_files_merge_into_a_workload(tmp_path):
    for r in range(4):
        rows = [
            f"allreduce\t4096\t4\t{20 if r else 19}\t0.01",  # rank 0 disagrees
            "allreduce\t1048576\t4\t5\t0.5",
            "alltoall\t65536\t4\t3\t0.02",
            "allreduce\t64\t2\t7\t0.001",  # a sub-communicator
            "barrier\t0\t4\t2\t0.0",
        ]
        _rank_file(tmp_path, r, rows)
    prof = read_rank_files(tmp_path, command=["mpiexec", "./app"])
    assert (prof.world_size, prof.processes, prof.engine, prof.source) == (4, 4, "openmpi", "mpi")
    assert prof.workload() == (
        Call("allreduce", 1048576.0, 5.0),
        Call("alltoall", 65536.0, 3.0),
        Call("allreduce", 4096.0, 20.0),
    )
    assert {(e.collective, e.comm_size) for e in prof.others()} == {
        ("allreduce", 2),
        ("barrier", 4),
    }
    assert len(prof.notes) == 1 and "allreduce of 4096 bytes" in prof.notes[0]
    assert "counts 19..20" in prof.notes[0]
    # the file: a workload file for every entry point, the profile read back
    out = write_profile(tmp_path / "p.json", prof)
    assert load_workload(out) == prof.workload()
    assert read_profile(out) == prof
    assert workload_engine(out) == "openmpi"
    assert "(not priced)" in prof.summary()


def test_rank_file_errors(tmp_path):
    with pytest.raises(RankoptInputError, match="no profile files in"):
        read_rank_files(tmp_path)
    _rank_file(tmp_path, 0, ["allreduce\tmany\t4\t1\t0"])
    with pytest.raises(RankoptInputError, match=r"mpi-rank-0.tsv' line 3: expected"):
        read_rank_files(tmp_path)
    (tmp_path / "mpi-rank-0.tsv").write_text("allreduce\t8\t4\t1\t0\n")
    with pytest.raises(RankoptInputError, match="has no '# rankopt profile 1' header"):
        read_rank_files(tmp_path)
    (tmp_path / "x.json").write_text("[]")
    with pytest.raises(RankoptInputError, match="is not a rankopt profile"):
        read_profile(tmp_path / "x.json")


def test_rank_files_merge_the_traffic(tmp_path):
    for r in range(4):
        rows = ["allreduce\t4096\t4\t2\t0.01", f"alltoallv\t{40 + 8 * r}\t4\t1\t0.0"]
        rows += [f"p2p\t{r}\t{(r + 1) % 4}\t800\t3", f"p2p\t{r}\t{(r + 2) % 4}\t{r + 1}\t1"]
        _rank_file(tmp_path, r, rows)
    # a one-sided get: traffic into rank 1, recorded by rank 1
    (tmp_path / "mpi-rank-1.tsv").open("a").write("p2p\t2\t1\t56\t1\n")
    prof = read_rank_files(tmp_path)
    assert prof.traffic is not None and prof.traffic.n == 4
    assert prof.traffic.to_dict() == {
        "rankopt_traffic": 1,
        "n": 4,
        "pairs": [
            [0, 1, 800, 3], [0, 2, 1, 1], [1, 2, 800, 3], [1, 3, 2, 1],
            [2, 0, 3, 1], [2, 1, 56, 1], [2, 3, 800, 3], [3, 0, 800, 3], [3, 1, 4, 1],
        ],
    }  # fmt: skip
    assert not prof.notes  # alltoallv sizes are each process's own: no disagreement
    assert "point-to-point: 9 pairs, 3.189 KiB in 17 messages" in prof.summary()
    out = write_profile(tmp_path / "p.json", prof)
    data = json.loads(out.read_text())
    assert data["traffic"] == prof.traffic.to_dict()
    back = read_profile(out)
    assert back == prof and back.traffic.to_dict() == prof.traffic.to_dict()
    from rankopt.models.traffic import load_traffic

    assert load_traffic(out).total_bytes == prof.traffic.total_bytes
    assert load_workload(out) == prof.workload()
    # no traffic: no key, and None back
    for f in tmp_path.glob("mpi-rank-*.tsv"):
        f.write_text("\n".join(ln for ln in f.read_text().splitlines() if "p2p" not in ln) + "\n")
    prof = read_rank_files(tmp_path)
    assert prof.traffic is None and "traffic" not in prof.to_dict()
    assert "point-to-point" not in prof.summary()
    assert read_profile(write_profile(tmp_path / "q.json", prof)).traffic is None


def test_traffic_errors(tmp_path):
    _rank_file(tmp_path, 0, ["p2p\t0\t1\tmany\t1"])
    with pytest.raises(RankoptInputError, match=r"mpi-rank-0.tsv' line 3: expected 'p2p<TAB>src"):
        read_rank_files(tmp_path)
    _rank_file(tmp_path, 0, ["p2p\t0\t9\t10\t1"])
    with pytest.raises(RankoptInputError, match=r"traffic: destination of pair 0 is 9"):
        read_rank_files(tmp_path)
    prof = Profile((ProfileEntry("allreduce", 8, 4, 1),), world_size=4)
    good = json.loads(write_profile(tmp_path / "p.json", prof).read_text())
    bad = tmp_path / "bad.json"
    cases = [
        ({"rankopt_traffic": 1, "n": 4, "pairs": [[0, 1, -5, 1]]},
         r"bad.json': 'traffic': pair 0 \(0 -> 1\) has bytes .*-5.0"),
        ({"rankopt_traffic": 1, "n": 4, "pairs": [[0, 1, 5, 1.5]]},
         r"pair 0 \(0 -> 1\) has messages .*1.5"),
        ({"rankopt_traffic": 2, "n": 4, "pairs": []}, "'rankopt_traffic' must be 1"),
        ({"rankopt_traffic": 1, "n": 3, "pairs": []}, "is for 3 ranks; the profile's world_size is 4"),
        ("t.json", r"'traffic' must be an object"),
    ]  # fmt: skip
    for traffic, match in cases:
        bad.write_text(json.dumps({**good, "traffic": traffic}))
        with pytest.raises(RankoptInputError, match=match):
            read_profile(bad)


def test_torch_files_name_the_backend(tmp_path):
    for r in range(4):
        _rank_file(tmp_path, r, ["allreduce\t440\t4\t3\t0.0"], source="torch", extra="backend=gloo")
    prof = read_rank_files(tmp_path)
    assert (prof.engine, prof.source, prof.workload()) == (
        "gloo",
        "torch",
        (Call("allreduce", 440.0, 3.0),),
    )


def test_profile_command_environment(tmp_path):
    argv, env = profile_command(
        ["mpiexec", "-n", "4", "./app"],
        tmp_path / "p",
        shim="/s.so",
        propagate="x",
        environ={"PYTHONPATH": "/mine"},
    )
    site = tmp_path / "p" / "site"
    assert (
        site / "sitecustomize.py"
    ).read_text() == rankopt.adapters.profile.HOOK_SOURCE.read_text()
    assert argv[1:7:2] == ["-x"] * 3 and argv[-3:] == ["-n", "4", "./app"]
    flags = dict(a.split("=", 1) for a in argv[2:7:2])
    assert flags == {
        "LD_PRELOAD": "/s.so",
        "RANKOPT_PROFILE": str(tmp_path / "p"),
        "PYTHONPATH": f"{site}{os.pathsep}/mine",
    }
    argv, env = profile_command(["torchrun", "t.py"], tmp_path / "q", environ={})
    assert argv == ["torchrun", "t.py"] and "LD_PRELOAD" not in env
    assert env["PYTHONPATH"] == str(tmp_path / "q" / "site")
    with pytest.raises(RankoptInputError, match="`kind` must be 'auto', 'mpi' or 'torch'"):
        profile_command(["a"], tmp_path, kind="gpu")
    with pytest.raises(RankoptInputError, match="no command given"):
        profile_command([], tmp_path)


def test_profile_keep_under_a_file_is_refused_before_the_run(tmp_path, capsys):
    """--keep under a regular file: one line naming the option (was "[Errno 20] Not a
    directory: '.../site'"), and the program is not started."""
    (tmp_path / "f.txt").write_text("x")
    marker = tmp_path / "ran"
    keep = tmp_path / "f.txt" / "sub"
    out = tmp_path / "p.json"
    argv = ["profile", "-o", str(out), "--keep", str(keep), "--", "touch", str(marker)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.strip() == (
        f"rankopt profile: error: --keep '{keep}': '{tmp_path / 'f.txt'}' is not a directory."
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_hook_is_inert_under_its_own_name():
    import rankopt.adapters._profile_hook as hook

    assert not any(type(f).__name__ == "_Finder" for f in sys.meta_path)
    assert hook.write() is None  # nothing recorded, nothing written


# --------------------------------------------------------------------------- the launchers


def _profile_file(tmp_path: Path, engine="openmpi") -> Path:
    prof = Profile(
        (
            ProfileEntry("allreduce", 16 * 2**20, 8, 10),
            ProfileEntry("allreduce", 4096, 8, 200),
            ProfileEntry("alltoall", 2**20, 8, 5),
        ),
        world_size=8,
        engine=engine,
    )
    return write_profile(tmp_path / "prof.json", prof)


def _net():
    from rankopt.network.cloud import synthetic_cloud

    c = synthetic_cloud(1, 2, 4, 1, rng=1, noise=0.0, congested=0.0)
    return rankopt.Network.from_cloud(c)


def test_model_options_take_the_profile_and_its_engine(tmp_path, monkeypatch):
    from rankopt._model_args import model_options
    from rankopt.cli import build_parser
    from rankopt.cli._mpi_main import build_parser as mpi_parser

    path = _profile_file(tmp_path)
    monkeypatch.delenv("RANKOPT_WORKLOAD", raising=False)
    solve = build_parser()
    args = solve.parse_args(["solve", "x.npy", "--workload", str(path)])
    opts = model_options(args)
    assert opts["engine"] == "openmpi" and len(opts["workload"]) == 3
    # --engine and --algorithm still decide
    args = solve.parse_args(["solve", "x.npy", "--workload", str(path), "--engine", "mpich"])
    assert model_options(args)["engine"] == "mpich"
    args = solve.parse_args(["solve", "x.npy", "--workload", str(path), "--algorithm", "ring"])
    assert "engine" not in model_options(args)
    # RANKOPT_WORKLOAD when --workload is not given
    monkeypatch.setenv("RANKOPT_WORKLOAD", str(path))
    opts = model_options(solve.parse_args(["solve", "x.npy"]))
    assert opts["engine"] == "openmpi" and len(opts["workload"]) == 3
    # the launchers keep the engine they run under, with the profile's calls
    opts = model_options(mpi_parser().parse_args([]))
    assert opts["engine"] in ("openmpi", "mpich") and len(opts["workload"]) == 3
    opts = model_options(solve.parse_args(["run", "train.py"]))
    assert opts["engine"] == "gloo" and len(opts["workload"]) == 3


def test_solve_cli_takes_the_profile(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RANKOPT_WORKLOAD", raising=False)
    net = _net()
    net.save(tmp_path / "net.npz")
    path = _profile_file(tmp_path)
    assert main(["solve", str(tmp_path / "net.npz"), "--workload", str(path), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["collective"] == "workload"
    direct = rankopt.solve(net, workload=load_workload(path), engine="openmpi", rng=0)
    assert res["order"] == [int(x) for x in direct.order]
    assert res["cost"] == pytest.approx(direct.cost)


def test_run_mpi_solves_for_the_profile(tmp_path, capfd, monkeypatch):
    monkeypatch.delenv("RANKOPT_WORKLOAD", raising=False)
    monkeypatch.setenv("RANKOPT_CACHE_DIR", str(tmp_path / "cache"))
    net = _net()
    net.save(tmp_path / "net.npz")
    path = _profile_file(tmp_path)
    (tmp_path / "lib.so").write_text("")
    argv = ["run-mpi", "--shim", str(tmp_path / "lib.so"), "--network", str(tmp_path / "net.npz")]
    argv += ["--workload", str(path), "--propagate", "env", "--dry-run", "--", "srun", "./app"]
    assert main(argv) == 0
    out, err = capfd.readouterr()
    order_file = Path(out.split("RANKOPT_ORDER=")[1].split()[0])
    direct = rankopt.solve(net, workload=load_workload(path), engine="openmpi", rng=0)
    assert [int(x) for x in order_file.read_text().split()] == [int(x) for x in direct.order]
    assert "workload" in err
    assert main(["run-mpi", "--workload", str(path), "--", "srun", "./app"]) == 1
    assert "--workload needs --network" in capfd.readouterr().err


# --------------------------------------------------------------------------- real programs


def _mpi_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANKOPT_ORDER", "LD_PRELOAD")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


@pytest.fixture(scope="module")
def mpi(tmp_path_factory):
    mpiexec = shutil.which("mpiexec")
    try:
        mpicc = shim.find_mpicc()
    except shim.ShimBuildError as exc:
        pytest.skip(f"no MPI compiler: {exc}")
    if mpiexec is None:
        pytest.skip("no mpiexec on PATH")
    tmp = tmp_path_factory.mktemp("profile")
    lib = shim.build(outdir=tmp / "shim")
    exe = tmp / "mixed"
    subprocess.run(
        [str(mpicc), "-O1", "-o", str(exe), str(PROGRAMS / "mixed.c")],
        check=True,
        capture_output=True,
    )
    return {"mpiexec": mpiexec, "lib": lib, "tmp": tmp, "mixed": exe}


def _profile(tmp: Path, command: list[str], *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "rankopt", "profile", *extra, "--", *command]
    return subprocess.run(argv, env=_mpi_env(), capture_output=True, text=True, timeout=180)


@pytest.mark.mpi
def test_profile_records_an_unmodified_mpi_program(mpi):
    out = mpi["tmp"] / "mixed.json"
    cmd = [mpi["mpiexec"], "--oversubscribe", "-n", str(N), str(mpi["mixed"])]
    cmd += ["4096", "20", "1048576", "5", "65536", "3"]
    proc = _profile(mpi["tmp"], cmd, "-o", str(out), "--shim", str(mpi["lib"]))
    assert proc.returncode == 0, proc.stderr
    assert "total_s" in proc.stdout and "wrote" in proc.stdout
    prof = read_profile(out)
    assert (prof.world_size, prof.processes, prof.engine) == (N, N, "openmpi")
    got = {(e.collective, e.nbytes, e.comm_size): e.count for e in prof.entries}
    # one warm-up call of each phase; the timing allreduce (1 double) and the
    # Iallreduce (2 floats) are both 8 bytes; one barrier before each phase
    assert got == {
        ("allreduce", 4096, N): 21,
        ("allreduce", 2**20, N): 6,
        ("alltoall", 65536, N): 4,
        ("allreduce", 8, N): 7,
        ("broadcast", 4, N): 1,
        ("barrier", 0, N): 6,
    }
    big = next(e for e in prof.entries if e.nbytes == 2**20)
    assert big.seconds > 0
    assert load_workload(out)[0] == Call("allreduce", float(2**20), 6.0)
    assert not prof.notes


MPI4PY_PROGRAM = """
import numpy as np
from mpi4py import MPI

c = MPI.COMM_WORLD
p = c.Get_size()
c.Allgather(np.zeros(8), np.zeros(8 * p))                          # 8 doubles per rank
c.Alltoall(np.zeros(4 * p, dtype=np.int32), np.zeros(4 * p, dtype=np.int32))  # 4 ints per peer
c.Reduce_scatter_block(np.zeros(2 * p, dtype=np.float32), np.zeros(2, dtype=np.float32))
c.Reduce(np.zeros(3), np.zeros(3), root=0)
half = c.Split(c.Get_rank() % 2)
half.Allreduce(np.zeros(16), np.zeros(16))
"""


@pytest.mark.mpi
def test_profile_sizes_follow_rankopts_convention(mpi):
    pytest.importorskip("mpi4py")
    script = mpi["tmp"] / "prog.py"
    script.write_text(textwrap.dedent(MPI4PY_PROGRAM))
    out = mpi["tmp"] / "py.json"
    cmd = [mpi["mpiexec"], "--oversubscribe", "-n", str(N), sys.executable, str(script)]
    proc = _profile(mpi["tmp"], cmd, "-o", str(out), "--shim", str(mpi["lib"]))
    assert proc.returncode == 0, proc.stderr
    prof = read_profile(out)
    got = {(e.collective, e.nbytes, e.comm_size): e.count for e in prof.entries}
    assert got[("allgather", 8 * 8 * N, N)] == 1  # the gathered output
    assert got[("alltoall", 4 * 4 * N, N)] == 1  # each rank's whole send buffer
    assert got[("reduce_scatter", 2 * 4 * N, N)] == 1  # the input vector
    assert got[("reduce", 3 * 8, N)] == 1
    assert got[("allreduce", 16 * 8, N // 2)] == 1  # a sub-communicator: not priced
    assert Call("allreduce", 128.0, 1.0) not in prof.workload()


def expected_traffic(p: int = N) -> dict[tuple[int, int], list[int]]:
    """What ``mpi_scripts/profile_traffic.py`` sends, pair by pair: [bytes, messages]."""
    want: dict[tuple[int, int], list[int]] = {}

    def add(s: int, d: int, nbytes: int, messages: int = 1) -> None:
        if s != d:
            slot = want.setdefault((s, d), [0, 0])
            slot[0] += nbytes
            slot[1] += messages

    for r in range(p):
        right, left, opposite = (r + 1) % p, (r - 1) % p, (r + 2) % p
        add(r, right, 3 * 800, 3)  # Sendrecv, 100 doubles, 3 steps each way
        add(r, left, 3 * 800, 3)
        add(r, right, 40)  # Sendrecv_replace, 10 int32
        add(r, opposite, 2 * 4000, 2)  # Isend, 1000 int32, twice
        add(r, right, 5 * 128, 5)  # Send_init, 16 doubles, 3 Start + 2 Startall
        add(r, left, 20)  # Neighbor_alltoall on a periodic ring: 5 int32 each way
        add(r, right, 20)
        add(r, left, 2 * 12, 2)  # Neighbor_alltoall_init: 3 int32 each way, started twice
        add(r, right, 2 * 12, 2)
        row, col = divmod(r, 2)  # Neighbor_allgather on a 2 x 2 grid: 3 doubles
        add(r, (1 - row) * 2 + col, 24)
        add(r, row * 2 + 1 - col, 24)
        add(r, right, 8)  # Neighbor_alltoallv on a dist graph: 1 double right, 2 opposite
        add(r, opposite, 16)
        for j in range(p):  # Alltoallv: 10 r + j + 1 int32 to rank j
            add(r, j, 4 * (10 * r + j + 1))
            add(r, j, 8 * (j + 1))  # Alltoallv_init: j + 1 doubles to rank j, started once
    add(2, 0, 33)  # Send on a sub-communicator (sub-ranks are not world ranks)
    add(3, 1, 33)
    add(0, 3, 200)  # Put, 25 doubles
    add(2, 1, 56)  # Get, 7 doubles: from the target to the origin
    return want


@pytest.mark.mpi
def test_profile_records_the_point_to_point_traffic(mpi):
    pytest.importorskip("mpi4py")
    out = mpi["tmp"] / "traffic.json"
    cmd = [mpi["mpiexec"], "--oversubscribe", "-n", str(N), sys.executable]
    cmd += [str(SCRIPTS / "profile_traffic.py")]
    proc = _profile(mpi["tmp"], cmd, "-o", str(out), "--shim", str(mpi["lib"]))
    assert proc.returncode == 0, proc.stderr
    prof = read_profile(out)
    assert prof.traffic is not None
    got = {(s, d): [b, m] for s, d, b, m in prof.traffic.to_dict()["pairs"]}
    assert got == expected_traffic()
    assert json.loads(out.read_text())["traffic"]["rankopt_traffic"] == 1
    total = sum(b for b, _ in got.values())
    assert f"point-to-point: {len(got)} pairs" in proc.stdout and f"{total}" not in proc.stdout
    assert {e.collective for e in prof.entries} == {"alltoallv"} and not prof.notes


TORCH_PROGRAM = """
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
p = dist.get_world_size()
for _ in range(3):
    dist.all_reduce(torch.zeros(1000))             # 4000 bytes
dist.all_reduce(torch.zeros(64, dtype=torch.float64))
dist.all_to_all_single(torch.zeros(8 * p), torch.zeros(8 * p))
dist.broadcast(torch.zeros(5), src=0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(10, 10))
for _ in range(2):
    model(torch.randn(4, 10)).sum().backward()
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.torch
def test_profile_records_a_torch_program(tmp_path):
    pytest.importorskip("torch.distributed")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TORCH_PROGRAM))
    out = tmp_path / "torch.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--master-port", "0", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0"]
    cmd += [str(script)]
    proc = _profile(tmp_path, cmd, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    prof = read_profile(out)
    assert (prof.world_size, prof.processes, prof.engine, prof.source) == (2, 2, "gloo", "torch")
    got = {(e.collective, e.nbytes, e.comm_size): e.count for e in prof.entries}
    assert got[("allreduce", 4000, 2)] == 3
    assert got[("allreduce", 512, 2)] == 1
    assert got[("alltoall", 8 * 2 * 4, 2)] == 1
    assert got[("broadcast", 20, 2)] == 1
    assert got[("allreduce", 110 * 4, 2)] == 2  # the DDP bucket: 110 parameters, per step
    assert got[("barrier", 0, 2)] == 1


TORCH_TRAFFIC = """
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
r, p = dist.get_rank(), dist.get_world_size()
right, left = (r + 1) % p, (r - 1) % p
if r % 2 == 0:                                          # 100 floats to the right
    dist.send(torch.zeros(100), dst=right)
    dist.recv(torch.empty(100), src=left)
else:
    dist.recv(torch.empty(100), src=left)
    dist.send(torch.zeros(100), dst=right)
for _ in range(2):                                      # 50 doubles to the left, twice
    works = [dist.isend(torch.zeros(50, dtype=torch.float64), dst=left),
             dist.irecv(torch.empty(50, dtype=torch.float64), src=right)]
    for w in works:
        w.wait()
ops = [dist.P2POp(dist.isend, torch.zeros(7, dtype=torch.int32), right),   # 28 bytes right
       dist.P2POp(dist.irecv, torch.empty(7, dtype=torch.int32), left),
       dist.P2POp(dist.isend, torch.zeros(9, dtype=torch.int64), left),    # 72 bytes left
       dist.P2POp(dist.irecv, torch.empty(9, dtype=torch.int64), right)]
for w in dist.batch_isend_irecv(ops):
    w.wait()
# uneven all_to_all_single: r + j + 1 rows of 3 floats from rank r to rank j
ins, outs = [r + j + 1 for j in range(p)], [j + r + 1 for j in range(p)]
dist.all_to_all_single(torch.empty(sum(outs), 3), torch.zeros(sum(ins), 3), outs, ins)
dist.all_to_all_single(torch.empty(3 * p), torch.zeros(3 * p), [3] * p, [3] * p)  # even
g = dist.new_group([0, 2])                              # group rank 1 is global rank 2
if r == 0:
    dist.send(torch.zeros(11, dtype=torch.uint8), group=g, group_dst=1)
if r == 2:
    dist.recv(torch.empty(11, dtype=torch.uint8), group=g, group_src=0)
# all ranks leave together: Gloo can abort a rank that tears down while its peers
# still use a group ("terminate called without an active exception")
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.torch
def test_profile_records_torch_point_to_point_traffic(tmp_path):
    # Gloo refuses dist.all_to_all with tensors of different sizes ("invalid tensor
    # size"), so the uneven list form is not run here; all_to_all_single is.
    pytest.importorskip("torch.distributed")
    script = tmp_path / "p2p.py"
    script.write_text(textwrap.dedent(TORCH_TRAFFIC))
    out = tmp_path / "p2p.json"
    p = 3
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(p)]
    cmd += ["--master-port", "0", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0"]
    cmd += [str(script)]
    proc = _profile(tmp_path, cmd, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    prof = read_profile(out)
    assert prof.traffic is not None and prof.traffic.n == p
    want: dict[tuple[int, int], list[int]] = {}
    for r in range(p):
        for d, nbytes, messages in [
            ((r + 1) % p, 400 + 28, 2),
            ((r - 1) % p, 2 * 400 + 72, 3),
        ] + [(j, (r + j + 1) * 12, 1) for j in range(p) if j != r]:
            slot = want.setdefault((r, d), [0, 0])
            slot[0] += nbytes
            slot[1] += messages
    want[(0, 2)][0] += 11
    want[(0, 2)][1] += 1
    got = {(s, d): [b, m] for s, d, b, m in prof.traffic.to_dict()["pairs"]}
    assert got == want
    classes = {(e.collective, e.comm_size) for e in prof.entries}
    # uneven: traffic; even: priced; the closing barrier moves no data
    assert classes == {("alltoallv", p), ("alltoall", p), ("barrier", p)}
    assert prof.workload() == (Call("alltoall", 3.0 * p * 4, 1.0),)


def test_profile_cli_usage(capsys):
    assert main(["profile"]) == 1
    assert "no command given" in capsys.readouterr().err
