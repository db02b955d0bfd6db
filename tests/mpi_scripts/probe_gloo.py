"""Run the torch.distributed (Gloo) probe in N local processes (used by tests/test_probe_torch.py).

Usage: python probe_gloo.py N OUTDIR [KEY=VALUE ...]
torch is imported once, then N processes are forked; each joins a Gloo group on a
free local port, runs the probe and writes OUTDIR/rank<r>.npz (the measurement) and
OUTDIR/rank<r>.json (the error it raised, if any, how long the probe ran and how
long after its last completed round it raised).
"""

import datetime
import json
import multiprocessing
import os
import socket
import sys
import time

import torch.distributed as dist

from rankopt.probe.torch import measure


def worker(rank: int, n: int, port: int, outdir: str, kwargs: dict) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=n,
        timeout=datetime.timedelta(seconds=60),
    )
    t0 = time.perf_counter()
    last = [t0]

    def progress(p):
        last[0] = time.perf_counter()

    info = {"error": None}
    try:
        measure(callback=progress, **kwargs).save(os.path.join(outdir, f"rank{rank}.npz"))
    except Exception as exc:
        info = {
            "error": type(exc).__name__,
            "message": str(exc),
            "phase": getattr(exc, "phase", None),
            "step": getattr(exc, "step", None),
            "pairs": getattr(exc, "pairs", None),
            "ranks": getattr(exc, "ranks", None),
        }
    now = time.perf_counter()
    info.update(elapsed=now - t0, since_last_round=now - last[0])
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as fh:
        json.dump(info, fh)
    sys.stdout.flush()
    os._exit(0)  # a failed group still holds unanswered operations: do not tear it down


def main() -> None:
    n, outdir = int(sys.argv[1]), sys.argv[2]
    kwargs = {}
    for arg in sys.argv[3:]:
        key, value = arg.split("=")
        kwargs[key] = json.loads(value)
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
