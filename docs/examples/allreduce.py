"""An mpi4py program that knows nothing of rankopt: an allreduce on COMM_WORLD.

Run it reordered:  mpiexec -n 4 --oversubscribe python -m rankopt.mpi allreduce.py
"""

import os

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
launch_rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "?"))
x = np.full(1 << 16, comm.rank, dtype=np.float64)
total = np.empty_like(x)
comm.Allreduce(x, total)
print(f"rank {comm.rank} (launched as {launch_rank}): sum of ranks {total[0]:g}")
