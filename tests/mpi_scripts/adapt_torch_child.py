"""An ordinary torch.distributed program (no rankopt import): reports what it was given."""

import json
import os
import socket
import sys

import torch
import torch.distributed as dist

listening = None
if os.environ.get("ADAPT_CHECK_STORE"):  # is rank 0's store up before this rank connects?
    try:
        socket.create_connection(
            (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])), 5
        ).close()
        listening = True
    except OSError:
        listening = False
dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
rank, size = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"])
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
# a ring step over the process group: receive from rank - 1
left = torch.tensor([-1.0])
send = dist.isend(
    torch.tensor([float(os.environ.get("RANKOPT_LAUNCH_RANK", -1))]), (rank + 1) % size
)
dist.recv(left, (rank - 1) % size)
send.wait()
report = {
    "rank": rank,
    "size": size,
    "sum": t.item(),
    "launch_rank": int(os.environ.get("RANKOPT_LAUNCH_RANK", -1)),
    "local_rank": os.environ.get("LOCAL_RANK"),
    "left_launch_rank": int(left.item()),
    "argv": sys.argv[1:],
    "pid": os.getpid(),
    "store_listening": listening,
}
with open(os.path.join(os.environ["ADAPT_OUT"], f"rank{rank}.json"), "w") as fh:
    json.dump(report, fh)
dist.barrier()
dist.destroy_process_group()
