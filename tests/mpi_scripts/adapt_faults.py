"""Run under mpiexec: optimize() when a rank stops answering (used by tests/test_adapters_mpi.py).

Usage: mpiexec -n N python adapt_faults.py OUTDIR MODE TIMEOUT
MODE ``probe``: the probe's test hook (RANKOPT_PROBE_TEST_STALL) stops a rank in the probe;
MODE ``solve``: the root stops itself (SIGSTOP) while it solves. Every rank writes
OUTDIR/rank<r>.json with the error it raised and when, waits for the live ranks' reports,
then leaves (the job then ends through MPI_Abort, as optimize() arranges).
"""

import importlib
import json
import os
import signal
import sys
import time

from mpi4py import MPI
from probe_launch import wait_for_live_peers

from rankopt.adapters.mpi import optimize

outdir, mode, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
world = MPI.COMM_WORLD
rank = world.Get_rank()
if mode == "solve" and rank == 0:

    def stopped_solve(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGSTOP)

    # the root's solve step calls rankopt.solvers.solve.solve
    importlib.import_module("rankopt.solvers.solve").solve = stopped_solve

t0 = time.monotonic()
info = {"error": None}
try:
    optimize(
        world,
        time_limit=1.0,
        probe_options={"repeats": 2, "bandwidth": False, "timeout": timeout},
    )
except Exception as exc:
    info = {"error": type(exc).__name__, "message": str(exc), "ranks": getattr(exc, "silent", [])}
info["elapsed"] = time.monotonic() - t0
path = os.path.join(outdir, f"rank{rank}.json")
with open(path + ".tmp", "w") as fh:
    json.dump(info, fh)
os.replace(path + ".tmp", path)
wait_for_live_peers(outdir, world.Get_size(), info)
