"""An ordinary mpi4py program (nothing rankopt-specific): prints its rank and checks a sum."""

import os
import sys

from mpi4py import MPI
from mpi4py.MPI import COMM_WORLD

comm = MPI.COMM_WORLD
assert comm is COMM_WORLD
assert comm.Get_attr(MPI.TAG_UB) >= 32767  # predefined attributes still answer
total = comm.allreduce(comm.rank, op=MPI.SUM)
assert total == comm.size * (comm.size - 1) // 2
launch_rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
names = comm.gather((comm.rank, launch_rank), root=0)
if comm.rank == 0:
    print("ARGV", " ".join(sys.argv[1:]))
    print("NEWRANK_OF_LAUNCH", " ".join(str(r) for _, r in sorted(names)))
    sys.stdout.flush()
