"""Run under mpiexec: optimize = probe + solve on rank 0 + bcast + reorder, end to end."""

import numpy as np
from mpi4py import MPI

from rankopt import SolveResult, invert
from rankopt.adapters.mpi import optimize

world = MPI.COMM_WORLD
n, rank = world.Get_size(), world.Get_rank()
comm, result = optimize(
    world,
    "allreduce",
    "ring",
    rng=0,
    keep_rank0=True,
    probe_options={"repeats": 3, "bandwidth": False, "timeout": 20.0},
)
assert isinstance(result, SolveResult)
order = np.asarray(result.order)
assert sorted(order.tolist()) == list(range(n)) and order[0] == 0
# every rank holds the same result and the communicator follows it
orders = world.allgather(order.tolist())
assert all(o == orders[0] for o in orders)
assert comm.Get_rank() == invert(order)[rank]
assert comm.allgather(rank) == order.tolist()
buf = np.array([float(rank)])
out = np.empty(1)
comm.Allreduce(buf, out, op=MPI.SUM)
assert out[0] == n * (n - 1) / 2
comm.Free()
if rank == 0:
    print(f"adapt_optimize ok n={n} order={order.tolist()} cost={result.cost:.3g}")
