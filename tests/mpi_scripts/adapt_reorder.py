"""Run under mpiexec: reorder gives the expected ranks and a correct Allreduce."""

import sys

import numpy as np
from mpi4py import MPI

from rankopt._validation import RankoptInputError
from rankopt.adapters.mpi import RankoptMPIError, reorder

world = MPI.COMM_WORLD
n, rank = world.Get_size(), world.Get_rank()

# A fixed, non-trivial permutation: new rank k is held by original rank order[k].
order = np.random.default_rng(12345).permutation(n)
new = reorder(world, order)
expected = int(np.flatnonzero(order == rank)[0])
assert new.Get_rank() == expected, (rank, new.Get_rank(), expected)
assert new.Get_size() == n
# Every process knows who holds each new rank.
holders = new.allgather(rank)
assert holders == order.tolist(), (holders, order)
# Allreduce of the new ranks: 0 + ... + n-1; an in-order reduction gives the same sum.
buf = np.array([new.Get_rank() + 1.0, rank], dtype=np.float64)
out = np.empty_like(buf)
new.Allreduce(buf, out, op=MPI.SUM)
assert out[0] == n * (n + 1) / 2 and out[1] == n * (n - 1) / 2, out
# A ring shift over the new communicator goes to new rank + 1.
right = new.sendrecv(rank, dest=(new.rank + 1) % n, source=(new.rank - 1) % n)
assert right == order[(new.rank - 1) % n], (right, order)
new.Free()

# Same bad order on every rank: an input error, raised identically everywhere.
try:
    reorder(world, [0] * n)
except RankoptInputError as exc:
    assert "permutation" in str(exc), exc
else:
    raise AssertionError("duplicate order accepted")

# Rank-dependent orders: detected on every rank, no hang.
skew = np.arange(n)
if rank == n - 1:
    skew = skew[::-1].copy()
try:
    reorder(world, skew)
except RankoptMPIError as exc:
    assert f"rank {n - 1}" in str(exc), exc
else:
    raise AssertionError("disagreeing orders accepted")

# Invalid on one rank only: every rank raises, none hangs.
bad = np.arange(n) if rank else np.arange(n + 1)
try:
    reorder(world, bad)
except RankoptMPIError as exc:
    assert "rank 0" in str(exc) and "length" in str(exc), exc
else:
    raise AssertionError("one-rank invalid order accepted")


# A SolveResult-like object is accepted.
class _R:
    order = order[::-1].copy()


again = reorder(world, _R())
assert again.Get_rank() == int(np.flatnonzero(_R.order == rank)[0])
again.Free()
world.Barrier()
if rank == 0:
    print(f"adapt_reorder ok n={n}")
sys.stdout.flush()
