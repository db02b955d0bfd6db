"""Allreduce timing worker for Open MPI (mpi4py); started by ``run_mpi``.

``python -m rankopt.testbed.worker_mpi config.json``: optionally runs rankopt's
MPI probe, then times ``Allreduce`` on communicators reordered by each order
of the configuration (``rankopt.adapters.mpi.reorder``).  Under
``python -m rankopt.mpi`` its ``MPI.COMM_WORLD`` is the reordered world.
"""

from __future__ import annotations

import socket
import time

import numpy as np

from rankopt.testbed._worker_common import load_config, save_measurement, timing_loop, write_result


def main() -> None:
    cfg = load_config()
    from mpi4py import MPI

    from rankopt.adapters.mpi import reorder

    world = MPI.COMM_WORLD
    world.Barrier()
    # wall clock once every rank is up (the launcher's probe and solve are behind it)
    result: dict = {"engine": "mpi", "t_ready": time.time()}
    result["hostnames"] = world.gather(socket.gethostname())
    if cfg.get("probe"):
        from rankopt.probe.mpi import measure

        t0 = time.perf_counter()
        m = measure(world, **cfg.get("probe_kwargs", {}))
        result["probe_s"] = time.perf_counter() - t0
        if world.rank == 0:
            save_measurement(m, cfg["probe"])
    comms = [reorder(world, np.asarray(o)) for o in cfg["orders"]]

    def allreduce(o: int, buf: tuple[np.ndarray, np.ndarray]) -> float:
        c = comms[o]
        c.Barrier()
        t0 = time.perf_counter()
        c.Allreduce(buf[0], buf[1], op=MPI.SUM)
        dt = time.perf_counter() - t0
        return float(c.allreduce(dt, op=MPI.MAX))

    def make_buffer(nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(nbytes // 4, np.float32), np.empty(nbytes // 4, np.float32)

    if cfg["jobs"]:
        result["times"] = timing_loop(cfg, allreduce, make_buffer)
    if world.rank == 0:
        write_result(cfg, result)
    for c in comms:
        c.Free()


if __name__ == "__main__":
    main()
