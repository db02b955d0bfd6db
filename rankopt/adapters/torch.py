"""Apply a rank order to torch.distributed.

- :func:`ordered_group` -- a process group whose ranks follow ``order``
  (``new_group(ranks=order, sort_ranks=False)``), falling back to
  :func:`reinit` where torch cannot keep an unsorted rank list.
- :func:`reinit` -- re-create the default process group with renumbered ranks,
  over the same store.

What ``rankopt run`` does in each process before it execs the program (probe
over a temporary Gloo group, solve on rank 0 with rank 0 pinned, broadcast,
return the new rank) is :func:`rankopt.adapters._launch.launch`.

Gloo's ring follows process-group rank, so a reordered group reorders its ring.
NCCL's inter-node ring and trees follow *node* order; see :mod:`rankopt.adapters.nccl`.
torch is imported inside functions only.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from rankopt.adapters._common import as_order

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

__all__ = ["ordered_group", "reinit", "run_collective"]

logger = logging.getLogger("rankopt")

_REINIT_COUNT = [0]


def ordered_group(
    order: ArrayLike,
    *,
    backend: str | None = None,
    timeout: timedelta | None = None,
    fallback: bool = True,
    group_desc: str | None = "rankopt_ordered",
) -> ProcessGroup:
    """A process group in which global rank ``order[k]`` has group rank ``k``.

    Collective over the default group: every rank calls it with the same order.

    Parameters
    ----------
    order : array_like of int, shape (world_size,)
        ``order[k]`` is the global rank that gets group rank ``k`` (a
        ``SolveResult`` is accepted).
    backend : str, optional
        Backend of the new group (default: that of the default group).
    timeout : datetime.timedelta, optional
        Timeout of the new group.
    fallback : bool, default True
        Where ``new_group`` cannot keep an unsorted rank list (torch without
        ``sort_ranks``, or the TorchComms path), call :func:`reinit` instead and
        return the new default group. With ``False`` such torch raises.
    group_desc : str, optional
        Description of the new group.

    Returns
    -------
    torch.distributed.ProcessGroup
        Pass it as ``group=`` to collectives; ``dist.get_rank(group)`` is the new rank.

    Raises
    ------
    RankoptInputError
        If ``order`` is not a permutation of the world's ranks.
    RuntimeError
        If torch returned a group whose ranks do not follow ``order``.

    Examples
    --------
    >>> import torch.distributed as dist                # doctest: +SKIP
    >>> g = ordered_group([3, 2, 1, 0])                 # doctest: +SKIP
    >>> dist.get_rank(g) == 3 - dist.get_rank()         # doctest: +SKIP
    True
    >>> dist.all_reduce(tensor, group=g)                # doctest: +SKIP
    """
    import torch.distributed as dist

    n = dist.get_world_size()
    arr = as_order(order, n)
    kwargs: dict[str, Any] = {"ranks": arr.tolist(), "backend": backend, "sort_ranks": False}
    if timeout is not None:
        kwargs["timeout"] = timeout
    if group_desc is not None:
        kwargs["group_desc"] = group_desc
    try:
        group = dist.new_group(**kwargs)
    except (TypeError, NotImplementedError) as exc:
        if not fallback:
            raise
        logger.info("new_group cannot keep the rank order (%s); re-initialising instead", exc)
        return reinit(arr, backend=backend, timeout=timeout)
    rank = dist.get_rank()
    expected = int(np.flatnonzero(arr == rank)[0])
    got = dist.get_rank(group)
    if got != expected:
        raise RuntimeError(
            f"torch.distributed.new_group ignored the rank order: global rank {rank} got "
            f"group rank {got}, expected {expected}."
        )
    return group


def reinit(
    order: ArrayLike, *, backend: str | None = None, timeout: timedelta | None = None
) -> ProcessGroup:
    """Re-create the default process group with ``order`` applied; return it.

    Collective. Destroys the default group (and every group made from it) and
    initialises a new one over the same store under a fresh prefix, with rank
    ``rank_of[rank]``. The store server keeps running in the process that hosts
    it; groups, tensors placed with the old ranks and ``RANK`` in the
    environment are not updated.

    Examples
    --------
    >>> pg = reinit([1, 0])                             # doctest: +SKIP
    """
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _get_default_store

    n = dist.get_world_size()
    arr = as_order(order, n)
    rank = dist.get_rank()
    backend = backend or dist.get_backend()
    store = _get_default_store()
    dist.destroy_process_group()
    _REINIT_COUNT[0] += 1
    prefixed = dist.PrefixStore(f"rankopt/reinit/{_REINIT_COUNT[0]}/", store)
    new_rank = int(np.flatnonzero(arr == rank)[0])
    kwargs: dict[str, Any] = {}
    if timeout is not None:
        kwargs["timeout"] = timeout
    dist.init_process_group(backend, store=prefixed, rank=new_rank, world_size=n, **kwargs)
    group = dist.group.WORLD
    assert group is not None
    return group


def run_collective(collective: str, send: Any, recv: Any, group: Any = None) -> None:
    """One call of ``collective`` on ``group`` (default: the world), rooted at its rank 0.

    ``send`` is the input (allreduce and reduce work in place on it); ``recv``
    the output of allgather and alltoall and the buffer a broadcast fills
    (pass the same tensor as ``send`` where there is none).
    """
    import torch.distributed as dist

    root = 0 if group is None else dist.get_global_rank(group, 0)
    if collective == "allreduce":
        dist.all_reduce(send, group=group)
    elif collective == "allgather":
        dist.all_gather_into_tensor(recv, send, group=group)
    elif collective == "broadcast":
        dist.broadcast(recv, src=root, group=group)
    elif collective == "reduce":
        dist.reduce(send, dst=root, group=group)
    elif collective == "alltoall":
        dist.all_to_all_single(recv, send, group=group)
    else:
        raise ValueError(
            f"`collective` must be allreduce, allgather, broadcast, reduce or alltoall; "
            f"got {collective!r}."
        )
