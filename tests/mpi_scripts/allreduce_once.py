"""One MPI_Allreduce (sum of float64) of NBYTES bytes on MPI_COMM_WORLD, nothing else."""

import sys

import numpy as np
from mpi4py import MPI

nbytes = int(sys.argv[1])
a = np.ones(max(nbytes // 8, 1))
b = np.empty_like(a)
MPI.COMM_WORLD.Allreduce(a, b, op=MPI.SUM)
assert b[0] == MPI.COMM_WORLD.Get_size()
