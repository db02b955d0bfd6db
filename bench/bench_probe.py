"""Probe cost: full MPI probes (latency + bandwidth, default settings) for n = 2 ... 16.

Each case launches ``mpiexec -n N`` on this machine (``--oversubscribe``) and
records, next to the wall time of the whole job (start-up included), what the
probe itself took and how that splits into phases::

    pytest bench/bench_probe.py --benchmark-only
    RANKOPT_BENCH_PROBE_SIZES=2,3,4,6,8,12,16 pytest bench/bench_probe.py --benchmark-only

``extra_info``: ``probe_s`` (the probe on rank 0, from the call to the result),
``latency_s`` and ``bandwidth_s`` (the two phases), ``latency_rounds``,
``bandwidth_slots``, ``s_per_round`` and ``s_per_slot``. Target: 8 ranks in
under 1 s; the latency phase grows linearly in the number of rounds, the
bandwidth phase linearly in the number of slots (``n (n - 1) / 2`` on one host).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rankopt import load_measurement

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "mpi_scripts" / "probe_measure.py"
MPIEXEC = shutil.which("mpiexec")
SIZES = [int(s) for s in os.environ.get("RANKOPT_BENCH_PROBE_SIZES", "2,4,8,16").split(",")]

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found")


def _probe(n: int, outdir: Path) -> dict:
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    cmd = [
        MPIEXEC,
        "-n",
        str(n),
        "--oversubscribe",
        "-x",
        "PYTHONPATH",
        sys.executable,
        str(SCRIPT),
        str(outdir),
    ]
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
    return json.loads((outdir / "rank0.json").read_text())


@pytest.mark.parametrize("n", SIZES)
def test_probe_mpi(benchmark, n):
    if benchmark.disabled and n > 8:
        pytest.skip("smoke run (--benchmark-disable): sizes up to 8 only")
    with tempfile.TemporaryDirectory() as d:
        outdir = Path(d)
        report = benchmark.pedantic(_probe, args=(n, outdir), rounds=1, iterations=1)
        assert report["error"] is None, report
        m = load_measurement(outdir / "rank0.npz")
    rounds = m.parameters["latency_rounds"]
    slots = m.parameters["bandwidth_slots"]
    lat_s = report["phases"]["latency"]
    bw_s = report["phases"]["bandwidth"] - lat_s
    benchmark.extra_info.update(
        n=n,
        probe_s=report["elapsed"],
        latency_s=lat_s,
        bandwidth_s=bw_s,
        latency_rounds=rounds,
        bandwidth_slots=slots,
        s_per_round=lat_s / rounds,
        s_per_slot=bw_s / slots,
        target_1s_met=report["elapsed"] < 1.0 if n == 8 else None,
    )
