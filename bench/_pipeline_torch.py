"""A pipeline over torch.distributed (Gloo): rank 0 prints ``iteration_s``.

    python bench/_pipeline_torch.py BYTES MICROBATCHES ITERATIONS

Every rank is one stage. Per iteration, ``MICROBATCHES`` activations of
``BYTES`` flow forward (stage ``r`` receives from ``r - 1`` and sends to
``r + 1``) and as many gradients flow back: point-to-point traffic between
neighbouring ranks only, the pattern of GPipe-style pipeline parallelism
without the compute. Rank 0 prints the median iteration time after one
untimed iteration. Started by ``bench/testbed_pipeline_torch.py`` under
``rankopt profile`` and ``rankopt run``.
"""

from __future__ import annotations

import statistics
import sys
import time


def main() -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    nbytes, micro, iterations = int(float(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
    dist.init_process_group("gloo")
    r, w = dist.get_rank(), dist.get_world_size()
    act = torch.ones(max(nbytes // 4, 1))
    grad = torch.ones_like(act)

    def iteration() -> None:
        for _ in range(micro):  # forward
            if r > 0:
                dist.recv(act, r - 1)
            if r < w - 1:
                dist.send(act, r + 1)
        for _ in range(micro):  # backward
            if r < w - 1:
                dist.recv(grad, r + 1)
            if r > 0:
                dist.send(grad, r - 1)

    times = []
    for k in range(iterations + 1):
        dist.barrier()
        t0 = time.perf_counter()
        iteration()
        dist.barrier()
        if k:
            times.append(time.perf_counter() - t0)
    if r == 0:
        print(f"iteration_s {statistics.median(times):.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
