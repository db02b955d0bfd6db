"""What MPICH really runs, against :mod:`rankopt.engines.mpich`.

Runs only where this interpreter's mpi4py is built on MPICH (the ``mpich``
wheel) and MPICH's ``mpiexec`` (hydra) is beside it or on PATH. The traffic
of every call is read from the kernel's TCP counters (``bench/mpich_check.py``
has the method); the algorithm MPICH runs by default is the forced one
(``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM``) whose traffic it equals.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import numpy as np
import pytest

from rankopt.engines import mpich

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import mpich_check  # noqa: E402

KIB = 1 << 10

# (n, nbytes) of every size class of the allreduce rule (MPICH 4.x/5.0's
# src/mpi/coll/coll_selection.json: recursive doubling when the vector is at
# most 8 bytes or count < pof2, else reduce_scatter_allgather), on 4, 8, 9 and
# 16 ranks (float64 SUM)
PAIRS = [
    (4, 8), (4, 16), (4, 64), (4, 2 * KIB + 8), (4, 1 << 20),
    (8, 8), (8, 2 * KIB), (8, 64 * KIB),
    (9, 16), (9, 64), (9, 1 << 20),
    (16, 64),  # count 8 < pof2 16: recursive doubling
    (16, 2 * KIB), (16, 1 << 20),
]  # fmt: skip


def _have_mpich() -> str | None:
    try:
        importlib.metadata.distribution("mpich")
    except importlib.metadata.PackageNotFoundError:
        return None
    return mpich_check.find_mpiexec()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Traffic of every case, by MPICH's default and by each forced allreduce, per n."""
    exe = _have_mpich()
    if exe is None:
        pytest.skip("MPICH not found (pip install mpich mpi4py in this interpreter's env)")
    wd = tmp_path_factory.mktemp("mpich")
    out = {}
    for n in sorted({n for n, _ in PAIRS}):
        sizes = [b for m, b in PAIRS if m == n]
        cases = [("allreduce", s) for s in sizes]
        res = {"default": mpich_check.run_job(exe, n, cases, {}, wd)["cases"]}
        for alg in mpich.ALLREDUCE_ALGORITHMS:
            res[alg] = mpich_check.run_job(exe, n, cases, {"allreduce": alg}, wd)["cases"]
        out[n] = (sizes, res)
    return out


def _runs_what(runs, n, nbytes) -> str:
    sizes, res = runs[n]
    k = sizes.index(nbytes)
    got = np.array(res["default"][k]["bytes"])
    dist = {
        alg: mpich_check.distance(got, np.array(res[alg][k]["bytes"]))
        for alg in mpich.ALLREDUCE_ALGORITHMS
        if not res[alg][k]["fell_back"]
    }
    best = min(dist, key=dist.__getitem__)
    # the default is one of the forced algorithms, and clearly that one (tiny
    # calls carry a few bytes of transport header per message: some noise)
    assert dist[best] < 0.2, dist
    assert all(d > 2 * dist[best] + 0.1 for a, d in dist.items() if a != best), dist
    return best


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("n,nbytes", PAIRS)
def test_mpich_runs_the_predicted_allreduce(runs, n, nbytes):
    """The forced algorithm whose traffic equals the default's is the predicted one."""
    _, params = mpich.algorithm("allreduce", nbytes, n, env={})
    assert _runs_what(runs, n, nbytes) == params["engine_algorithm"], params


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("n", [4, 8, 16])
def test_mpich_recursive_doubling_traffic_is_the_schedule(runs, n):
    """Forced recursive doubling moves what rankopt's schedule moves (1 MiB, pairs and bytes)."""
    sizes, res = runs[n]
    big = max(sizes)
    got = np.array(res["recursive_doubling"][sizes.index(big)]["bytes"])
    want = mpich_check.model_matrix("allreduce", "recursive_doubling", n, big)
    assert ((got > 0.01 * big) == (want > 0)).all()
    assert mpich_check.distance(got, want) < 0.02


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("n", [4, 9, 16])
def test_mpich_reduce_scatter_allgather_traffic_is_the_schedule(runs, n):
    """Forced reduce_scatter_allgather moves what rankopt's ``rabenseifner_mpich`` moves (1 MiB).

    MPICH exchanges half the vector at distance 1 first (on 9 ranks: ranks 1
    and 2, after rank 0 has folded into 1), not at distance p2/2 as the
    textbook ``rabenseifner`` does.
    """
    sizes, res = runs[n]
    big = max(sizes)
    got = np.array(res["reduce_scatter_allgather"][sizes.index(big)]["bytes"])
    want = mpich_check.model_matrix("allreduce", "rabenseifner_mpich", n, big)
    assert mpich_check.distance(got, want) < 0.02
    assert (
        mpich_check.distance(got, mpich_check.model_matrix("allreduce", "rabenseifner", n, big))
        > 0.2
    )


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("n", [4, 8, 9, 16])
def test_mpich_runs_what_the_engine_predicts_for_every_collective(n, tmp_path):
    """Every collective and size class of ``bench/mpich_check.py``: the default is the prediction.

    And where rankopt has a schedule of what MPICH runs, its traffic is the
    forced algorithm's (calls of 16 KiB and more: smaller ones carry a few
    bytes of transport header per message).
    """
    if _have_mpich() is None:
        pytest.skip("MPICH not found (pip install mpich mpi4py in this interpreter's env)")
    rows = mpich_check.check([n], list(mpich_check.SIZES), tmp_path)
    bad = [r for r in rows if not r["match"]]
    assert not bad, mpich_check.format_rows(bad)
    for r in rows:
        if r["nbytes"] >= 16 * KIB and r["model_distance"] is not None:
            assert r["model_distance"] < 0.02, mpich_check.format_rows([r])


@pytest.mark.root
@pytest.mark.mpi
def test_testbed_exec_runs_mpich(tmp_path):
    """``rankopt testbed exec --mpi mpich``: one rank per host, in launch order, through hydra."""
    import os
    import shutil
    import subprocess
    import uuid

    if _have_mpich() is None:
        pytest.skip("MPICH not found (pip install mpich mpi4py in this interpreter's env)")
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("needs root and iproute2 (network namespaces)")
    prefix = f"rkq{uuid.uuid4().hex[:4]}"
    cmd = 'echo "rank $PMI_RANK of $PMI_SIZE on $(hostname)"'
    p = subprocess.run(
        [sys.executable, "-m", "rankopt", "testbed", "exec", "--prefix", prefix,
         "--racks", "2,1", "--hosts", "2,0,1", "--mpi", "mpich", "--", "sh", "-c", cmd],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    lines = sorted(p.stdout.split("\n")[:-1])
    hosts = dict(ln.replace("rank ", "").split(" of 3 on ") for ln in lines)
    assert [hosts[str(r)].rsplit("-", 1)[1] for r in range(3)] == ["h2", "h0", "h1"]
