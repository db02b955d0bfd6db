"""Run under mpiexec: the ring-direction trial of ``rankopt run`` on torch.distributed Gloo.

``rankopt.adapters._launch._direction_trial`` times both orders with Gloo's all_reduce
on groups numbered as the orders (a temporary process group on the launcher's store);
the verdict is the same on every rank (the slowest rank's times). ``force`` (argv[1]):
``other`` replaces the verdict (its rule is unit-tested); ``rule`` keeps it.
"""

import os
import sys
from datetime import timedelta
from types import SimpleNamespace

import torch.distributed as dist

from rankopt.adapters import direction
from rankopt.adapters._launch import _direction_trial

force = sys.argv[1]
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
n = int(os.environ["OMPI_COMM_WORLD_SIZE"])
port = int(os.environ["MASTER_PORT"])
real = direction.decide
seen = []


def forced(a, b, nbytes):
    seen.append((list(a), list(b)))
    wins, line = real(a, b, nbytes)
    return (wins if force == "rule" else force == "other"), line


direction.decide = forced
store = dist.TCPStore("127.0.0.1", port, n, rank == 0, timeout=timedelta(seconds=60))
order = [0, *range(n - 1, 0, -1)]
trial = {"alternative": list(range(n)), "collective": "allreduce", "nbytes": 1 << 16, "cost": 1.0}
decision = {"order": order, "trial": trial, "summary": "solved"}
info = SimpleNamespace(rank=rank, world_size=n)
out = _direction_trial(info, store, timedelta(seconds=30), decision)
line = out["summary"].splitlines()[-1]
assert line.startswith("ring direction timed beside the load"), out
calls = len(seen[0][0])  # whole rounds of TRIAL_BLOCK calls
assert calls % direction.TRIAL_BLOCK == 0
assert direction.TRIAL_BLOCK <= calls <= direction.TRIAL_BLOCK * direction.TRIAL_VISITS_SPLIT
if force == "other":
    assert out["order"] == list(range(n)), out
else:
    assert out["order"] in (order, list(range(n)))
# every rank holds the same decision: compared through the store
store.set(f"decision/{rank}", repr((out["order"], seen[0])))
theirs = [store.get(f"decision/{r}").decode() for r in range(n)]
assert all(t == theirs[0] for t in theirs), theirs
store.add("done", 1)
while int(store.add("done", 0)) < n:  # rank 0 keeps the store up until all have read
    pass
if rank == 0:
    print(f"adapt_direction_gloo ok n={n} force={force} order={out['order']}")
