"""Run under mpiexec: report this rank's host name and the cores it is bound to."""

import os

from mpi4py import MPI

comm = MPI.COMM_WORLD
info = comm.gather((comm.rank, MPI.Get_processor_name(), sorted(os.sched_getaffinity(0))), root=0)
if comm.rank == 0:
    for rank, host, cores in sorted(info):
        print("PLACED", rank, host, ",".join(map(str, cores)), flush=True)
