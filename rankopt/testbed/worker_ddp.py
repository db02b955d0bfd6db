"""A short torch DDP training loop (CPU, Gloo); started by ``run_gloo``.

``python -m rankopt.testbed.worker_ddp config.json``: an MLP whose gradients
total ``grad_mb`` MB, ``warmup`` + ``steps`` optimiser steps on random data;
rank 0 writes the steps per second.  The order is applied by the launcher
(each process's ``RANK``), as ``python -m rankopt.run`` does.
"""

from __future__ import annotations

import datetime
import time

from rankopt.testbed._worker_common import load_config, write_result


def main() -> None:
    cfg = load_config()
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=cfg.get("timeout", 600)))
    width = int(cfg.get("width", 1024))
    layers = max(1, round(cfg.get("grad_mb", 24) * 1e6 / (4 * width * (width + 1))))
    model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.ReLU())])
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(int(cfg.get("batch", 16)), width)
    n_params = sum(p.numel() for p in model.parameters())

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        ddp(x).square().mean().backward()
        opt.step()

    for _ in range(int(cfg.get("warmup", 2))):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    steps = int(cfg.get("steps", 5))
    for _ in range(steps):
        step()
    dist.barrier()
    elapsed = time.perf_counter() - t0
    if dist.get_rank() == 0:
        write_result(
            cfg,
            {
                "steps": steps,
                "seconds": elapsed,
                "steps_per_s": steps / elapsed,
                "grad_bytes": 4 * n_params,
                "layers": layers,
            },
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
