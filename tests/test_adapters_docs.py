"""The integration recipes documented for other frameworks, run where the package is installed."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest

from rankopt import invert


def _xgb_worker(args: dict, task_id: str, queue) -> None:
    from xgboost import collective as coll

    with coll.CommunicatorContext(**args, dmlc_task_id=task_id):
        rank = coll.get_rank()
        total = coll.allreduce(np.array([float(rank)]), coll.Op.SUM)
        queue.put((task_id, rank, float(total[0])))


@pytest.mark.slow
def test_xgboost_tracker_sorted_by_task_id_follows_the_order():
    xgb_tracker = pytest.importorskip("xgboost.tracker")
    n = 4
    order = np.array([0, 3, 1, 2])
    rank_of = invert(order)
    tracker = xgb_tracker.RabitTracker(n_workers=n, host_ip="127.0.0.1", sortby="task")
    tracker.start()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    # the documented recipe: worker i (launch order) passes its new rank, zero-padded, as task id
    procs = [
        ctx.Process(target=_xgb_worker, args=(tracker.worker_args(), f"{rank_of[i]:06d}", queue))
        for i in range(n)
    ]
    for p in procs:
        p.start()
    got = sorted(queue.get(timeout=120) for _ in range(n))
    for p in procs:
        p.join(timeout=60)
    tracker.wait_for(60)
    assert [rank for _, rank, _ in got] == list(range(n))
    assert [task for task, _, _ in got] == [f"{k:06d}" for k in range(n)]
    assert all(total == n * (n - 1) / 2 for _, _, total in got)
