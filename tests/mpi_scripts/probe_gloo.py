"""Run the torch.distributed (Gloo) probe in N local processes (used by tests/test_probe_torch.py).

Usage: python probe_gloo.py N OUTDIR [KEY=JSON ...]
torch is imported once, then N processes are forked; each joins a Gloo group on a
free local port, runs the probe and writes OUTDIR/rank<r>.npz and OUTDIR/rank<r>.json
(see probe_launch.py).
"""

import datetime
import multiprocessing
import os
import socket
import sys

import torch.distributed as dist
from probe_launch import parse_kwargs, report_run

from rankopt.adapters.cache import probe_arguments
from rankopt.probe.torch import measure


def worker(rank: int, n: int, port: int, outdir: str, kwargs: dict) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=n,
        timeout=datetime.timedelta(seconds=60),
    )
    report_run(outdir, rank, lambda cb: measure(callback=cb, **kwargs))
    sys.stdout.flush()
    os._exit(0)  # a failed group still holds unanswered operations: do not tear it down


def main() -> None:
    n, outdir, kwargs = int(sys.argv[1]), sys.argv[2], probe_arguments(parse_kwargs(sys.argv[3:]))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=worker, args=(r, n, port, outdir, kwargs)) for r in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
