"""rankopt profile: the shim's recorder, the torch hook, the profile file and the launchers.

The ``mpi`` tests build the shim and run C and mpi4py programs on 4 ranks under
``rankopt profile``; the ``torch`` test runs a 2-process Gloo program (plain
collectives and a DDP model) under torchrun.
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


def test_profile_cli_usage(capsys):
    assert main(["profile"]) == 1
    assert "no command given" in capsys.readouterr().err
