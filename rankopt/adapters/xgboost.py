"""XGBoost: apply an order through the collective tracker's task ids.

XGBoost's CPU collective (``xgboost.collective``) runs ring allreduce and
ring allgather over the ranks its tracker (``xgboost.tracker.RabitTracker``)
hands out. A tracker started with ``sortby="task"`` numbers the workers by
their ``dmlc_task_id`` strings in sorted order, so giving worker ``i`` (launch
order) the task id of its new rank, zero-padded, makes XGBoost's rank ``k``
the process ``order[k]``: the ring follows rankopt's order with no change to
XGBoost.

Contents
--------
task_ids
    The task id of every launch rank.
start_tracker
    A ``RabitTracker`` that sorts by task id (xgboost imported here).
worker_args
    ``CommunicatorContext`` arguments for one worker.
HISTOGRAM_ALGORITHM
    The rankopt model of XGBoost's allreduce.

Examples
--------
>>> task_ids([0, 3, 1, 2])
['000000', '000002', '000003', '000001']

Worker 1 gets new rank 2 (``order[2] == 1``), so its task id sorts third.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["HISTOGRAM_ALGORITHM", "start_tracker", "task_ids", "worker_args"]

#: XGBoost's CPU allreduce (``src/collective/allreduce.cc``) is a ring
#: (reduce-scatter then allgather; small buffers: a ring allgather and a
#: local reduction), over the tracker's ranks.
HISTOGRAM_ALGORITHM = "ring"


def task_ids(order: Sequence[int] | np.ndarray, *, width: int = 6) -> list[str]:
    """Task id of every launch rank, so that a ``sortby="task"`` tracker applies ``order``.

    Parameters
    ----------
    order : sequence of int
        ``order[k]`` is the launch rank of the process that gets new rank ``k``.
    width : int
        Zero padding (at least the digits of ``n - 1``), so that string order
        is numeric order.

    Returns
    -------
    list of str
        ``ids[i]`` is launch rank ``i``'s ``dmlc_task_id``.

    Raises
    ------
    rankopt.RankoptInputError
        If ``order`` is not a permutation.
    """
    from rankopt.adapters._common import as_order
    from rankopt.order import invert

    arr = as_order(order)
    digits = max(width, len(str(len(arr) - 1)))
    return [f"{int(k):0{digits}d}" for k in invert(arr)]


def start_tracker(n_workers: int, host_ip: str, port: int = 0, **kwargs: Any) -> Any:
    """Start an ``xgboost.tracker.RabitTracker`` that ranks workers by task id.

    Returns the started tracker; ``tracker.worker_args()`` gives what every
    worker passes to ``xgboost.collective.CommunicatorContext`` (with
    :func:`worker_args`), ``tracker.wait_for()`` waits for the job.
    """
    from xgboost.tracker import RabitTracker

    tracker = RabitTracker(n_workers=n_workers, host_ip=host_ip, port=port, sortby="task", **kwargs)
    tracker.start()
    return tracker


def worker_args(
    tracker_args: Mapping[str, Any], launch_rank: int, order: Sequence[int] | np.ndarray
) -> dict[str, Any]:
    """``CommunicatorContext`` arguments of launch rank ``launch_rank`` under ``order``.

    Examples
    --------
    >>> worker_args({"dmlc_tracker_uri": "10.0.0.1", "dmlc_tracker_port": 9091}, 1, [0, 3, 1, 2])
    {'dmlc_tracker_uri': '10.0.0.1', 'dmlc_tracker_port': 9091, 'dmlc_task_id': '000002'}
    """
    return {**dict(tracker_args), "dmlc_task_id": task_ids(order)[launch_rank]}
