"""Shared parts of the timing workers (configuration, timing loop, output)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rankopt._files import atomic_write, atomic_write_text

#: Size of the per-order warm-up allreduce (opens connections, faults pages in).
WARMUP_BYTES = 64 * 1024


def load_config() -> dict[str, Any]:
    """The JSON configuration whose path is the worker's first argument."""
    return json.loads(Path(sys.argv[1]).read_text())


def timing_loop(
    cfg: dict[str, Any],
    allreduce: Callable[[int, Any], float],
    make_buffer: Callable[[int], Any] = lambda nbytes: None,
) -> list[list[float]]:
    """Time every job ``(order_index, nbytes)`` ``repeats`` times.

    ``allreduce(order_index, buffer)`` runs one allreduce and returns the slowest
    rank's time.  Jobs are visited in rounds so that slow phases of a busy
    machine hit every order alike, and every round after the first visits the
    jobs in a new order (a permutation drawn from ``cfg["seed"]``, the same on
    every rank): a neighbour whose load comes and goes on a period would
    otherwise meet each job at the same phase on every round, and a job could
    read fast or slow for where it sits in the list.  A visit runs
    ``cfg["block"]`` timed allreduces back to back (default 1): a job runs its
    collective back to back, and beside a TCP neighbour an order timed right
    after another order's traffic reads faster than the same order in a run of
    its own (the neighbour's flows are still backing off from the other one).
    """
    jobs: Sequence[tuple[int, int]] = [(int(o), int(b)) for o, b in cfg["jobs"]]
    sizes = sorted({b for _, b in jobs} | {WARMUP_BYTES})
    buffers = {b: make_buffer(b) for b in sizes}
    for o in sorted({o for o, _ in jobs}):
        allreduce(o, buffers[WARMUP_BYTES])
    times: list[list[float]] = [[] for _ in jobs]
    deadline = time.monotonic() + float(cfg.get("budget_s", 1e9))
    gen = np.random.default_rng(int(cfg.get("seed", 0)))
    repeats = int(cfg.get("repeats", 3))
    block = max(1, int(cfg.get("block", 1)))
    for rnd in range(-(-repeats // block)):
        for k in gen.permutation(len(jobs)) if rnd else range(len(jobs)):
            o, b = jobs[k]
            for _ in range(min(block, repeats - len(times[k]))):
                times[k].append(allreduce(o, buffers[b]))
        if time.monotonic() > deadline:
            break
    return times


def write_result(cfg: dict[str, Any], result: dict[str, Any]) -> None:
    """Write the rank-0 result next to the configuration."""
    atomic_write_text(cfg["out"], json.dumps(result), what="worker result file")


def save_measurement(m: Any, path: str) -> None:
    """Save a probe Measurement (its own ``save`` when it has one)."""
    if hasattr(m, "save"):
        m.save(path)
        return
    arrays: dict[str, Any] = {
        "latency": np.asarray(m.latency),
        "bandwidth": np.asarray(getattr(m, "bandwidth", np.zeros_like(m.latency))),
        "hosts": np.asarray(getattr(m, "hosts", []), dtype=str),
    }
    atomic_write(path, lambda fh: np.savez(fh, **arrays), what="measurement file")
