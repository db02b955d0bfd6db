"""Run under mpiexec: the ring-direction trial (rankopt.adapters.direction) on MPI.

Rank 0 holds a solve result that records the other way round; the trial times both
orders with MPI_Allreduce and every rank ends with the same order. ``force`` (argv[1])
replaces the verdict: ``keep`` or ``other`` (the verdict's rule is unit-tested).
"""

import dataclasses
import sys

import numpy as np
from mpi4py import MPI

import rankopt
from rankopt.adapters import direction
from rankopt.adapters.mpi import _direction_trial, _dup

force = sys.argv[1]
world = MPI.COMM_WORLD
n, rank = world.Get_size(), world.Get_rank()
order = np.array([0, *range(n - 1, 0, -1)], dtype=np.int64)
alt = np.arange(n, dtype=np.int64)[[0, *range(1, n)]]
real = direction.decide


def forced(a, b, nbytes):
    # whole rounds of TRIAL_BLOCK calls each: one at the job's size when decisive, two
    # or more at 4 MiB
    assert len(a) == len(b) and len(a) % direction.TRIAL_BLOCK == 0
    assert direction.TRIAL_BLOCK <= len(a) <= direction.TRIAL_BLOCK * direction.TRIAL_VISITS_SPLIT
    assert all(t > 0 for t in (*a, *b))
    _, line = real(a, b, nbytes)
    return force == "other", line


direction.decide = forced
result = None
if rank == 0:
    lat = np.full((n, n), 1e-5)
    np.fill_diagonal(lat, 0.0)
    res = rankopt.solve(lat, rng=0, keep_rank0=True)
    result = dataclasses.replace(
        res,
        order=order,
        collective="allreduce",
        nbytes=1 << 16,
        extra={**res.extra, "ring_alternative": {"order": alt.tolist(), "hops": 0,
                                                 "order_hops": 1, "cost": 1.5}},
    )  # fmt: skip
private = _dup(world, 20.0)
plan = world.bcast(direction.plan(result) if rank == 0 else None, root=0)
got, res = _direction_trial(private, result, order, plan, 20.0)
want = alt if force == "other" else order
assert np.array_equal(got, want), (got, want)
orders = world.allgather(got.tolist())
assert all(o == orders[0] for o in orders)
if rank == 0:
    assert np.array_equal(res.order, want)
    assert res.notes[-1].startswith("ring direction timed beside the load"), res.notes
    assert (res.cost == 1.5) == (force == "other")
    print(f"adapt_direction ok n={n} force={force} line={res.notes[-1]}")
else:
    assert res is None
# no plan on the root (no alternative recorded): nothing timed, the order unchanged
got2, _ = _direction_trial(private, None, order, None, 20.0)
assert np.array_equal(got2, order)
private.Free()
# a direction_trial that is not a bool: the same clear error on every rank, nothing run
from rankopt import RankoptInputError  # noqa: E402
from rankopt.adapters.mpi import optimize  # noqa: E402

try:
    optimize(world, direction_trial="no", probe_options={"timeout": 20.0})
except RankoptInputError as exc:
    assert "`direction_trial` must be True or False; got 'no'" in str(exc), exc
else:
    raise AssertionError("direction_trial='no' was accepted")
