"""A pipeline over torch.distributed (Gloo): activations forward, gradients back.

Each of ``ITERATIONS`` (argv[1], default 3) rounds, rank ``r`` receives from
``r - 1`` and sends to ``r + 1``, then the reverse: point-to-point traffic
between neighbouring ranks only. Rank 0 prints ``pipeline done``.
"""

import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
r, w = dist.get_rank(), dist.get_world_size()
x = torch.ones(1 << 16)
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    if r > 0:
        dist.recv(x, r - 1)
    if r < w - 1:
        dist.send(x, r + 1)
        dist.recv(x, r + 1)
    if r > 0:
        dist.send(x, r - 1)
if r == 0:
    print("pipeline done", flush=True)
dist.destroy_process_group()
