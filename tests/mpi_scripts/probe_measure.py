"""Run the MPI probe and write what every rank got (used by tests/test_probe_mpi.py).

Usage: mpiexec -n N python probe_measure.py OUTDIR [KEY=VALUE ...]
Each rank writes OUTDIR/rank<r>.npz (the measurement) or OUTDIR/rank<r>.json (the
error it raised and when), so the test can compare ranks.
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
    try:
        m = measure(comm, **kwargs)
    except Exception as exc:  # report, then leave without waiting for the others
        info = {"error": type(exc).__name__, "message": str(exc),
                "elapsed": time.perf_counter() - t0,
                "phase": getattr(exc, "phase", None), "step": getattr(exc, "step", None),
                "pairs": getattr(exc, "pairs", None), "ranks": getattr(exc, "ranks", None)}
        with open(os.path.join(outdir, f"rank{rank}.json"), "w") as fh:
            json.dump(info, fh)
        sys.stdout.flush()
        os._exit(0)
    m.save(os.path.join(outdir, f"rank{rank}.npz"))
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as fh:
        json.dump({"error": None, "elapsed": time.perf_counter() - t0}, fh)


if __name__ == "__main__":
    main()
