"""Run the MPI probe and write what every rank got (used by tests/test_probe_mpi.py).

Usage: mpiexec -n N python probe_measure.py OUTDIR [KEY=JSON ...]
Each rank writes OUTDIR/rank<r>.npz and OUTDIR/rank<r>.json (see probe_launch.py).
``root=R`` runs ``measure_at_root`` with root R (``"mixed"``: rank parity, a
mismatch on purpose).
"""

import os
import sys

from mpi4py import MPI
from probe_launch import parse_kwargs, report_run, wait_for_live_peers

from rankopt.adapters.cache import probe_arguments
from rankopt.probe.mpi import measure, measure_at_root


def main() -> None:
    outdir, kwargs = sys.argv[1], probe_arguments(parse_kwargs(sys.argv[2:]))
    comm = MPI.COMM_WORLD
    root = kwargs.pop("root", None)
    if root == "mixed":
        root = comm.Get_rank() % 2

    def probe(cb):
        if root is None:
            return measure(comm, callback=cb, **kwargs)
        return measure_at_root(comm, root, callback=cb, **kwargs)

    info = report_run(outdir, comm.Get_rank(), probe)
    if info["error"]:
        wait_for_live_peers(outdir, comm.Get_size(), info)
        sys.stdout.flush()
        os._exit(0)  # leave without waiting for a dead peer in MPI_Finalize


if __name__ == "__main__":
    main()
