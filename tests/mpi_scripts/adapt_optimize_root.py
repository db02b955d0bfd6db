"""Run under mpiexec: run_program(share_result=False), the result on the root only."""

import sys

from mpi4py import MPI

from rankopt.adapters.mpi import run_program

world = MPI.COMM_WORLD
n, rank = world.Get_size(), world.Get_rank()
root = n - 1
seen = {}


def after(comm, result):
    seen["comm"], seen["result"] = comm, result


out = run_program(
    ["-c", "pass"],
    None,
    "allreduce",
    "ring",
    root=root,
    share_result=False,
    on_reorder=after,
    rng=0,
    probe_options={"repeats": 3, "bandwidth": False, "timeout": 20.0},
)
result, comm = seen["result"], seen["comm"]
assert out is result
# the others got the order alone: no result, and no solver imported to read one
solvers = "rankopt.solvers" in sys.modules
state = world.allgather((result is None, solvers))
assert state[root] == (False, True), state
assert all(s == (True, False) for r, s in enumerate(state) if r != root), state
order = world.bcast(None if result is None else [int(x) for x in result.order], root=root)
assert sorted(order) == list(range(n))
assert comm.allgather(rank) == order  # the communicator follows the root's order
if rank == root:
    print(f"adapt_optimize_root ok n={n} order={order}")
