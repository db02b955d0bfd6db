"""Run under mpiexec -n 2: optimize() refuses a bad root and options that differ by rank."""

from mpi4py import MPI

from rankopt import RankoptInputError
from rankopt.adapters.mpi import optimize

world = MPI.COMM_WORLD
n, rank = world.Get_size(), world.Get_rank()
probe = {"repeats": 2, "bandwidth": False, "timeout": 20.0}
for root in (n + 3, -1):
    try:
        optimize(world, root=root, probe_options=probe)
    except RankoptInputError as exc:
        assert f"`root` must be a rank of `comm`, 0..{n - 1}; got {root}" in str(exc), exc
    else:
        raise AssertionError(f"root={root} was accepted")
try:  # rank 0 and rank 1 ask for different sizes: every rank raises alike
    optimize(world, nbytes=1e6 * (1 + rank), probe_options=probe)
except RankoptInputError as exc:
    assert "option `nbytes` differs between ranks: rank 0 has 1000000.0, rank 1 has" in str(exc)
else:
    raise AssertionError("options that differ were accepted")
comm, result = optimize(world, nbytes=1e6, probe_options=probe)  # still usable afterwards
assert comm.Get_size() == n
if rank == 0:
    print("reliability_options ok")
