"""A torch.distributed program that knows nothing of rankopt.

Run it reordered:  torchrun --standalone --nproc-per-node 4 -m rankopt.run -- python train.py
"""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR/PORT from the launcher
x = torch.full((1 << 16,), float(dist.get_rank()))
dist.all_reduce(x)
launch_rank = os.environ.get("RANKOPT_LAUNCH_RANK", os.environ["RANK"])
print(f"rank {dist.get_rank()} (launched as {launch_rank}): sum of ranks {x[0].item():g}")
dist.destroy_process_group()
