"""What MPICH runs for each collective, next to what rankopt predicts.

    python bench/mpich_check.py                  # 4, 8, 9 and 16 ranks, every case
    python bench/mpich_check.py --ranks 8 --collectives allreduce --json out.json

Needs mpi4py built on MPICH (``pip install mpich mpi4py``) and MPICH's
``mpiexec`` (hydra) beside this interpreter or on PATH. Every rank runs on
this host, with ``MPIR_CVAR_NOLOCAL=1`` (each process its own node, as in the
testbed, where each rank has a host of its own) and UCX restricted to TCP
(``UCX_TLS=tcp,self``), so that every byte of a collective crosses a TCP
connection. The worker reads the kernel's per-connection counters
(``TCP_INFO``: bytes received) around a few calls of each case and maps each
connection to the peer rank that owns its other end: the result is the matrix
``bytes[src, dst]`` one call moves.

MPICH prints no algorithm choice, so the job runs once with its default
selection and once per *forced* variant (``MPIR_CVAR_<COLL>_INTRA_ALGORITHM``),
all collectives of a variant in one launch. What the default runs is the
forced algorithm whose traffic matrix it equals (relative L1 distance); a
forced algorithm that MPICH cannot apply to a case falls back to the default
selection (``MPIR_CVAR_COLLECTIVE_FALLBACK=print`` reports it on stderr, which
the worker watches per case) and is left out of that case. The traffic of
rankopt's schedule of the same algorithm is shown next to it (``model``: its
L1 distance from the forced run), where rankopt models that algorithm.
Algorithms with identical traffic (alltoall pairwise and scattered) are
reported together.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from rankopt.engines.mpich import CVARS  # the variable of each collective's algorithm

KIB = 1 << 10
MIB = 1 << 20


#: Calls per case (bytes are per call): more for small cases, where a stray
#: control message of the transport weighs more.
def _calls(nbytes: int) -> int:
    return 3 if nbytes >= 256 * KIB else 20


#: Cases per collective, in bytes: the vector (allreduce, reduce, broadcast) or
#: one rank's block (allgather, reduce_scatter, alltoall: per peer); rankopt's
#: ``nbytes`` is then the block times n (the gathered output, the input
#: vector, a rank's whole send buffer).
SIZES: dict[str, tuple[int, ...]] = {
    "allreduce": (8, 16, 64, 2 * KIB, 2 * KIB + 8, 64 * KIB, MIB),
    "allgather": (128, 8 * KIB, 128 * KIB),
    "reduce_scatter": (2 * KIB, 64 * KIB),
    "broadcast": (KIB, 64 * KIB, MIB),
    "reduce": (KIB, 64 * KIB),
    "alltoall": (128, 4 * KIB, 64 * KIB),
}
PER_RANK = ("allgather", "reduce_scatter", "alltoall")

#: Forced variants: one algorithm per collective in each launch.
VARIANTS: tuple[dict[str, str], ...] = (
    {
        "allreduce": "recursive_doubling",
        "allgather": "recursive_doubling",
        "reduce_scatter": "recursive_halving",
        "broadcast": "binomial",
        "reduce": "binomial",
        "alltoall": "pairwise",
    },
    {
        "allreduce": "reduce_scatter_allgather",
        "allgather": "brucks",
        "reduce_scatter": "pairwise",
        "broadcast": "scatter_recursive_doubling_allgather",
        "reduce": "reduce_scatter_gather",
        "alltoall": "scattered",
    },
    {
        "allreduce": "ring",
        "allgather": "ring",
        "broadcast": "scatter_ring_allgather",
        "alltoall": "brucks",
    },
)


def model_map() -> dict[tuple[str, str], str | None]:
    """MPICH algorithm -> rankopt model with the same traffic (None: not modelled).

    The engine's own map, but for alltoall Bruck, which it prices as pairwise.
    """
    from rankopt.engines.mpich import MODELS as ENGINE_MODELS

    out: dict[tuple[str, str], str | None] = {
        (c, a): m for c, algs in ENGINE_MODELS.items() for a, m in algs.items()
    }
    out["alltoall", "brucks"] = None  # no Bruck alltoall model
    return out


#: Environment of every check job: one node per process, TCP only.
JOB_ENV = {
    "MPIR_CVAR_NOLOCAL": "1",
    "MPIR_CVAR_CH4_NETMOD": "ucx",
    "UCX_TLS": "tcp,self",
    "MPIR_CVAR_COLLECTIVE_FALLBACK": "print",
    "OMP_NUM_THREADS": "1",
}

_FALLBACK_TEXT = b"cannot be applied"
_TCPI_BYTES_RECEIVED = 128  # offset of tcpi_bytes_received in struct tcp_info


def _nbytes_of(collective: str, size: int, n: int) -> int:
    return size * n if collective in PER_RANK else size


# ----------------------------------------------------------------- worker side
def _connections() -> dict[int, tuple[tuple[str, int], tuple[str, int], int]]:
    """This process's connected TCP sockets: fd -> (local, peer, bytes received)."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            s = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            peer = s.getpeername()[:2]
            info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
            got = struct.unpack_from("=Q", info, _TCPI_BYTES_RECEIVED)[0]
            out[int(name)] = (s.getsockname()[:2], peer, got)
        except OSError:
            continue
        finally:
            s.close()
    return out


def _call(comm: Any, MPI: Any, collective: str, size: int) -> Any:
    """A function that runs the case once (``size`` as in :data:`SIZES`)."""
    n = comm.size
    if collective in ("allreduce", "reduce"):
        a = np.ones(size // 8)
        b = np.empty_like(a)
        if collective == "reduce":
            return lambda: comm.Reduce(a, b, op=MPI.SUM, root=0)
        return lambda: comm.Allreduce(a, b, op=MPI.SUM)
    if collective == "reduce_scatter":
        a, b = np.ones(size // 8 * n), np.empty(size // 8)
        return lambda: comm.Reduce_scatter_block(a, b, op=MPI.SUM)
    if collective == "broadcast":
        a = np.ones(size, np.uint8)
        return lambda: comm.Bcast(a, root=0)
    if collective == "allgather":
        a, b = np.ones(size, np.uint8), np.empty(size * n, np.uint8)
        return lambda: comm.Allgather(a, b)
    a, b = np.ones(size * n, np.uint8), np.empty(size * n, np.uint8)
    return lambda: comm.Alltoall(a, b)


def worker(cases: list[tuple[str, int]], out: str, err_path: str) -> None:
    """Run in every rank: the traffic matrix of each case, written by rank 0."""
    # MPICH writes its fallback notes to this process's stderr: a file of
    # its own, read back after every case (hydra forwards stderr late)
    err_file = f"{err_path}.{os.environ.get('PMI_RANK', '0')}"
    fd = os.open(err_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    err = os.open(err_file, os.O_RDONLY)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    me, n = comm.rank, comm.size

    def window(run: Any) -> dict[int, tuple[Any, Any, int]]:
        # counters before the barrier that starts the calls and after the one that
        # ends them: no rank starts before every rank has read its counters, and
        # every byte the calls send has been received (matched) when they end
        before = _connections()
        comm.Barrier()
        run()
        comm.Barrier()
        after = _connections()
        return {
            fd: (loc, peer, got - (before[fd][2] if fd in before else 0))
            for fd, (loc, peer, got) in after.items()
        }

    results = []
    for collective, size in cases:
        fn = _call(comm, MPI, collective, size)
        fn()  # opens the connections this case uses
        comm.Barrier()
        base = window(lambda: None)  # the two barriers' own traffic
        mark = os.fstat(err).st_size
        calls = _calls(_nbytes_of(collective, size, n))

        def run(fn: Any = fn, calls: int = calls) -> None:
            for _ in range(calls):
                fn()

        after = window(run)
        os.lseek(err, mark, os.SEEK_SET)
        fell_back = _FALLBACK_TEXT in os.read(err, 1 << 20)
        # the peer owning the other end of each connection (endpoint -> rank)
        mine = {loc: me for loc, _, _ in after.values()}
        owner: dict[Any, int] = {}
        for d in comm.allgather(mine):
            owner.update(d)
        row = np.zeros(n)
        for fd, (_, peer, got) in after.items():
            src = owner.get(peer)
            if src is not None and src != me:
                row[src] += got - (base[fd][2] if fd in base else 0)
        rows = comm.gather(row / calls, root=0)
        fell = comm.allreduce(int(fell_back), op=MPI.MAX)
        if me == 0:
            matrix = np.array(rows).T  # [src, dst]
            results.append(
                {
                    "collective": collective,
                    "size": size,
                    "bytes": matrix.tolist(),
                    "fell_back": fell,
                }
            )
    if me == 0:
        Path(out).write_text(json.dumps({"version": MPI.Get_library_version(), "cases": results}))


# ----------------------------------------------------------------- driver side
def find_mpiexec() -> str | None:
    """MPICH's ``mpiexec`` (hydra): beside this interpreter, else on PATH."""
    for cand in (Path(sys.executable).parent / "mpiexec", shutil.which("mpiexec")):
        if cand and Path(cand).exists():
            try:
                text = subprocess.run(
                    [str(cand), "--version"], capture_output=True, text=True, timeout=30
                ).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            if "HYDRA" in text:
                return str(cand)
    return None


def run_job(
    mpiexec: str, n: int, cases: list[tuple[str, int]], variant: dict[str, str], workdir: Path
) -> dict[str, Any]:
    """One launch: every case under ``variant`` (empty: MPICH's default selection)."""
    tag = "-".join(sorted(variant.values())) or "default"
    spec = workdir / f"cases-{n}-{abs(hash(tag))}.json"
    out = spec.with_suffix(".out.json")
    err = spec.with_suffix(".err")
    spec.write_text(json.dumps(cases))
    env = {**os.environ, **JOB_ENV, **{CVARS[c]: a for c, a in variant.items()}}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [mpiexec, "-n", str(n), sys.executable, __file__, "--worker", str(spec), str(out)]
    cmd.append(str(err))
    with open(err, "wb") as fh:
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=fh, check=True, timeout=600)
    return json.loads(out.read_text())


def model_matrix(collective: str, model: str, n: int, nbytes: int) -> np.ndarray:
    """Bytes ``[src, dst]`` of rankopt's schedule of ``model``."""
    from rankopt.models.schedule import schedule

    m = np.zeros((n, n))
    for step in schedule(collective, model, n, nbytes=nbytes).steps():
        for x, y, f in step:
            m[x, y] += f * nbytes
    return m


def _model_or_inf(collective: str, model: str, n: int, nbytes: int, like: np.ndarray) -> np.ndarray:
    try:
        return model_matrix(collective, model, n, nbytes)
    except Exception:  # a model that needs more than (n, nbytes), e.g. hierarchical groups
        return np.full_like(like, np.inf)


def distance(a: np.ndarray, b: np.ndarray) -> float:
    """Relative L1 distance of two traffic matrices."""
    return float(np.abs(a - b).sum() / max(a.sum(), b.sum(), 1.0))


def predicted(collective: str, nbytes: int, n: int) -> tuple[str, str | None]:
    """rankopt's model for the call and MPICH's algorithm name when it gives one."""
    from rankopt.engines import get

    model, params = get("mpich").algorithm(collective, nbytes, n, env={})
    return model, params.get("engine_algorithm")


def check(ranks: list[int], collectives: list[str], workdir: Path) -> list[dict[str, Any]]:
    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise SystemExit("MPICH's mpiexec (hydra) not found beside this python or on PATH.")
    from rankopt.models.schedule import ALGORITHMS

    models = model_map()
    rows = []
    for n in ranks:
        cases = [(c, s) for c in collectives for s in SIZES[c]]
        default = run_job(mpiexec, n, cases, {}, workdir)["cases"]
        forced = []
        for v in VARIANTS:
            sel = {c: a for c, a in v.items() if c in collectives}
            forced.append((sel, run_job(mpiexec, n, cases, sel, workdir)["cases"]))
        for k, (collective, size) in enumerate(cases):
            nbytes = _nbytes_of(collective, size, n)
            got = np.array(default[k]["bytes"])
            dists = {}
            for sel, res in forced:
                if collective in sel and not res[k]["fell_back"]:
                    dists[sel[collective]] = (distance(got, np.array(res[k]["bytes"])), res[k])
            best = min(dists.values(), key=lambda t: t[0])[0] if dists else float("nan")
            runs = sorted(a for a, (d, _) in dists.items() if d <= max(0.05, 1.5 * best))
            model, engine_alg = predicted(collective, nbytes, n)
            run_models = {models[collective, a] for a in runs}
            model_d = None
            if len(runs) >= 1 and models[collective, runs[0]] is not None:
                mm = model_matrix(collective, models[collective, runs[0]], n, nbytes)
                model_d = distance(np.array(dists[runs[0]][1]["bytes"]), mm)
            near = None
            if runs:
                ref = np.array(dists[runs[0]][1]["bytes"])
                near = min(
                    ALGORITHMS[collective],
                    key=lambda m: distance(ref, _model_or_inf(collective, m, n, nbytes, ref)),
                )
            rows.append(
                {
                    "n": n,
                    "collective": collective,
                    "size": size,
                    "nbytes": nbytes,
                    "mpich_runs": runs,
                    "distance": best,
                    "distances": {a: round(d, 4) for a, (d, _) in dists.items()},
                    "predicted_model": model,
                    "predicted_engine": engine_alg,
                    # MPICH's own name when the engine gives one (algorithms of the
                    # same traffic are reported together), else the model
                    "match": bool(runs)
                    and (engine_alg in runs if engine_alg else run_models == {model}),
                    "model_distance": model_d,
                    "nearest_model": near,
                    "bytes_per_call": float(got.sum()),
                }
            )
    return rows


def _fmt_size(b: int) -> str:
    for unit, k in (("MiB", MIB), ("KiB", KIB)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"


def format_rows(rows: list[dict[str, Any]]) -> str:
    head = (
        "| n | collective | nbytes | MPICH runs (L1 to forced) | rankopt predicts | match "
        "| model L1 | nearest model |\n|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        runs = " / ".join(r["mpich_runs"]) or "?"
        pred = r["predicted_model"] + (
            f" ({r['predicted_engine']})" if r["predicted_engine"] else " (untabulated)"
        )
        md = "-" if r["model_distance"] is None else f"{r['model_distance']:.3f}"
        lines.append(
            f"| {r['n']} | {r['collective']} | {_fmt_size(r['nbytes'])} | {runs} "
            f"({r['distance']:.3f}) | {pred} | {'yes' if r['match'] else 'NO'} | {md} "
            f"| {r['nearest_model'] or '-'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)  # rankopt from this checkout, as the workers get it
    if argv and argv[0] == "--worker":
        worker([tuple(c) for c in json.loads(Path(argv[1]).read_text())], argv[2], argv[3])
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="4,8,9,16", help="communicator sizes (default: %(default)s)")
    p.add_argument("--collectives", default=",".join(SIZES), help="comma list (default: all)")
    p.add_argument("--json", default=None, help="write the rows here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rankopt-mpich-") as d:
        rows = check([int(x) for x in args.ranks.split(",")], args.collectives.split(","), Path(d))
    print(format_rows(rows))
    bad = sum(not r["match"] for r in rows)
    print(f"\n{len(rows) - bad}/{len(rows)} cases: rankopt's prediction is what MPICH runs")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
