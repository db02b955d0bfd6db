"""Run under mpiexec: ordered_group (new_group with sort_ranks=False) and its re-init fallback."""

import os

import numpy as np
import torch
import torch.distributed as dist

from rankopt.adapters.torch import ordered_group, reinit

os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
dist.init_process_group("gloo")
rank, n = dist.get_rank(), dist.get_world_size()
order = np.random.default_rng(7).permutation(n)
expected = int(np.flatnonzero(order == rank)[0])


def check(group, new_rank):
    assert dist.get_rank(group) == new_rank, (dist.get_rank(group), new_rank)
    t = torch.tensor([float(new_rank + 1)])
    dist.all_reduce(t, group=group)
    assert t.item() == n * (n + 1) / 2
    # ring neighbour in the group: group rank new_rank - 1 is global rank order[new_rank - 1]
    left = torch.tensor([-1.0])
    me = dist.get_rank(group)
    send = dist.isend(torch.tensor([float(rank)]), group_dst=(me + 1) % n, group=group)
    dist.recv(left, group_src=(me - 1) % n, group=group)
    send.wait()
    assert int(left.item()) == order[(new_rank - 1) % n], (left, order)


# 1. new_group(ranks=order, sort_ranks=False)
g = ordered_group(order)
check(g, expected)

# 2. the fallback where torch cannot keep the order: re-initialise the default group
real_new_group = dist.new_group


def old_torch_new_group(*args, sort_ranks=True, **kwargs):
    if not sort_ranks:
        raise TypeError("new_group() got an unexpected keyword argument 'sort_ranks'")
    return real_new_group(*args, **kwargs)


dist.new_group = old_torch_new_group
try:
    w = ordered_group(order)
finally:
    dist.new_group = real_new_group
assert w is dist.group.WORLD and dist.get_rank() == expected
check(None, expected)

# 3. reinit again with the inverse: back to the launch numbering
inverse = np.argsort(order)  # = rank_of: launch rank k (current rank rank_of[k]) gets rank k
reinit(inverse)
assert dist.get_rank() == rank, (dist.get_rank(), rank)
dist.barrier()
if rank == 0:
    print(f"adapt_torch_group ok n={n} order={order.tolist()}", flush=True)
dist.destroy_process_group()
