"""Run the MPI probe and write what every rank got (used by tests/test_probe_mpi.py).

Usage: mpiexec -n N python probe_measure.py OUTDIR [KEY=JSON ...]
Each rank writes OUTDIR/rank<r>.npz (the measurement) and OUTDIR/rank<r>.json: the
error it raised (if any), how long the probe ran and how long after its last
completed round it raised.
"""

import json
import os
import sys
import time

from mpi4py import MPI

from rankopt.probe.mpi import measure


def main() -> None:
    outdir = sys.argv[1]
    kwargs = {}
    for arg in sys.argv[2:]:
        key, value = arg.split("=")
        kwargs[key] = json.loads(value)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    t0 = time.perf_counter()
    last = [t0]
    phases = {}

    def progress(p):
        last[0] = time.perf_counter()
        if p.step == p.steps:
            phases[p.phase] = p.elapsed

    info = {"error": None}
    try:
        measure(comm, callback=progress, **kwargs).save(os.path.join(outdir, f"rank{rank}.npz"))
    except Exception as exc:
        info = {
            "error": type(exc).__name__,
            "message": str(exc),
            "phase": getattr(exc, "phase", None),
            "step": getattr(exc, "step", None),
            "pairs": getattr(exc, "pairs", None),
            "ranks": getattr(exc, "ranks", None),
        }
    now = time.perf_counter()
    info.update(elapsed=now - t0, since_last_round=now - last[0], phases=phases)
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as fh:
        json.dump(info, fh)
    if info["error"]:
        sys.stdout.flush()
        os._exit(0)  # leave without waiting for a dead peer in MPI_Finalize


if __name__ == "__main__":
    main()
