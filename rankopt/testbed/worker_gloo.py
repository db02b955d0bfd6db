"""Collective timing worker for torch.distributed with Gloo; started by ``run_gloo``.

``python -m rankopt.testbed.worker_gloo config.json``: optionally runs rankopt's
torch probe, then times ``all_reduce`` on one process group per order
(``new_group(ranks=order, sort_ranks=False)``: group rank ``k`` is launch rank
``order[k]``, so Gloo's ring follows the order). The configuration's
``collective`` (default ``"allreduce"``) may instead name ``"broadcast"`` or
``"reduce"`` (rooted at group rank 0, as rankopt's schedules are) or
``"alltoall"``.
"""

from __future__ import annotations

import datetime
import socket
import time

from rankopt.testbed._worker_common import load_config, save_measurement, timing_loop, write_result


def main() -> None:
    cfg = load_config()
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=float(cfg.get("timeout", 600)))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    dist.barrier()
    t_ready = time.time()  # every rank is up (a launcher's probe and solve are behind it)
    names: list = [None] * dist.get_world_size()
    dist.all_gather_object(names, socket.gethostname())
    result: dict = {"engine": "gloo", "hostnames": names, "t_ready": t_ready}
    if cfg.get("probe"):
        from rankopt.probe.torch import measure

        t0 = time.perf_counter()
        m = measure(dist.group.WORLD, **cfg.get("probe_kwargs", {}))
        result["probe_s"] = time.perf_counter() - t0
        if rank == 0:
            save_measurement(m, cfg["probe"])
    groups = [
        dist.new_group(ranks=[int(x) for x in o], sort_ranks=False, timeout=timeout)
        for o in cfg["orders"]
    ]

    from rankopt.adapters.torch import run_collective

    collective = cfg.get("collective", "allreduce")

    def allreduce(o: int, buf: tuple[torch.Tensor, torch.Tensor]) -> float:
        g = groups[o]
        dist.barrier(group=g)
        t0 = time.perf_counter()
        run_collective(collective, buf[0], buf[1], g)
        dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=g)
        return float(dt.item())

    if cfg["jobs"]:
        result["times"] = timing_loop(
            cfg, allreduce, lambda b: (torch.ones(b // 4), torch.empty(b // 4))
        )
    if rank == 0:
        write_result(cfg, result)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
