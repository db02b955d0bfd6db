"""A torch.distributed (Gloo) program with a mix of collectives; rank 0 prints ``total_s``.

    python bench/_mixed_torch.py allreduce:65536:20 allreduce:16777216:2 broadcast:16777216:4

Each argument is ``COLLECTIVE:BYTES:COUNT`` (allreduce, broadcast, reduce,
alltoall; float32 tensors, rooted calls at rank 0). The calls are spread
evenly over the run, the way a training step interleaves them, after one
warm-up call of each. Started by ``bench/testbed_workload_torch.py`` under
``rankopt profile`` and ``rankopt run``.
"""

from __future__ import annotations

import sys
import time


def main() -> None:
    import torch
    import torch.distributed as dist

    from rankopt.adapters.torch import run_collective

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    n = dist.get_world_size()
    calls = []
    for arg in sys.argv[1:]:
        coll, nbytes, count = arg.split(":")
        elems = max(int(nbytes) // 4 // n, 1) * n  # alltoall splits evenly
        calls.append((coll, (torch.ones(elems), torch.empty(elems)), int(count)))

    for coll, (send, recv), _ in calls:
        run_collective(coll, send, recv)
    # interleave: call k of a collective with count c runs at slot k * total / c
    total = sum(c for _, _, c in calls)
    sched = sorted(
        ((k * total / c, i) for i, (_, _, c) in enumerate(calls) for k in range(c)),
    )
    dist.barrier()
    t0 = time.perf_counter()
    for _, i in sched:
        coll, (send, recv), _ = calls[i]
        run_collective(coll, send, recv)
    dist.barrier()
    dt = time.perf_counter() - t0
    if dist.get_rank() == 0:
        print(f"total_s {dt:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
