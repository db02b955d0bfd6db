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


def _xgb_adapter_worker(tracker_args: dict, launch_rank: int, order: list, queue) -> None:
    from xgboost import collective as coll

    from rankopt.adapters.xgboost import worker_args

    with coll.CommunicatorContext(**worker_args(tracker_args, launch_rank, order)):
        # XGBoost's ring allreduce of one-hot rows shows who is where
        row = np.zeros(len(order))
        row[coll.get_rank()] = launch_rank
        got = coll.allreduce(row, coll.Op.SUM)
        queue.put((launch_rank, coll.get_rank(), [int(x) for x in got]))


def test_xgboost_task_ids():
    from rankopt.adapters.xgboost import task_ids

    assert task_ids([2, 0, 1]) == ["000001", "000002", "000000"]
    assert task_ids(list(range(12)), width=1)[11] == "11"
    with pytest.raises(ValueError, match="order"):
        task_ids([0, 0, 1])


@pytest.mark.slow
def test_xgboost_adapter_applies_the_order():
    pytest.importorskip("xgboost.tracker")
    from rankopt.adapters.xgboost import start_tracker

    n = 4
    order = [2, 0, 3, 1]
    tracker = start_tracker(n, "127.0.0.1", timeout=120)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    args = tracker.worker_args()
    procs = [
        ctx.Process(target=_xgb_adapter_worker, args=(args, i, order, queue)) for i in range(n)
    ]
    for p in procs:
        p.start()
    got = sorted(queue.get(timeout=120) for _ in range(n))
    for p in procs:
        p.join(timeout=60)
    tracker.wait_for(60)
    rank_of = invert(np.array(order))
    assert [rank for _, rank, _ in got] == [int(rank_of[i]) for i in range(n)]
    assert all(gathered == order for _, _, gathered in got)  # rank k is launch rank order[k]
