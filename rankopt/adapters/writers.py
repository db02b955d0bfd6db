"""Launcher files that place each new rank on the host of the process it replaces.

A rank order found in one job is applied to the *next* launch by telling the
launcher where each rank goes:

- :func:`write_rankfile` -- Open MPI rankfile, ``rank k=HOST slot=S`` lines.
  Open MPI 5.x: ``mpiexec --map-by rankfile:file=PATH``; 4.x: ``mpirun --rankfile PATH``.
- :func:`write_hostfile` -- sequential hostfile (one host per line, line k is rank k),
  for ``mpiexec --hostfile PATH --map-by seq`` (Open MPI 4.x and 5.x).
- :func:`write_slurm_hostfile` -- the same list for Slurm:
  ``SLURM_HOSTFILE=PATH srun --distribution=arbitrary ...``.
- :func:`write_deepspeed_hostfile` -- ``HOST slots=N`` lines in node order, for
  DeepSpeed's launcher (and the node ranks to give ``torchrun --node-rank``:
  :func:`node_ranks`).
- :func:`launch_options` -- the matching command-line options.

Line ``k`` of every file describes new rank ``k``, which runs where original
rank ``order[k]`` ran (``hosts[order[k]]``). Files are written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import RankoptInputError
from rankopt.adapters._common import as_order, atomic_write_text, check_hosts

__all__ = [
    "rank_hosts",
    "format_rankfile",
    "write_rankfile",
    "format_hostfile",
    "write_hostfile",
    "write_slurm_hostfile",
    "node_ranks",
    "write_deepspeed_hostfile",
    "launch_options",
]

SlotSpec = None | Literal["original", "new"] | Sequence[int | str] | NDArray[np.integer]


def rank_hosts(order: ArrayLike, hosts: Any) -> list[str]:
    """Host of every new rank: ``[hosts[order[k]] for k in range(n)]``.

    Parameters
    ----------
    order : array_like of int, shape (n,)
        ``order[k]`` is the original rank of the process that gets new rank ``k``.
    hosts : sequence of str or Measurement
        Host name of every original rank (or an object with ``.hosts``).

    Returns
    -------
    list of str

    Examples
    --------
    >>> rank_hosts([2, 0, 1], ["a", "b", "c"])
    ['c', 'a', 'b']
    """
    arr = as_order(order)
    names = check_hosts(hosts, arr.size)
    return [names[i] for i in arr]


def _slots(arr: NDArray[np.int64], names: tuple[str, ...], slots: Any) -> list[str] | None:
    n = arr.size
    if slots is None:
        return None
    if isinstance(slots, str):
        if slots not in ("original", "new"):
            raise RankoptInputError(
                f"`slots` must be 'original', 'new' or one slot per process; got {slots!r}."
            )
        local = np.empty(n, dtype=np.int64)
        count: dict[str, int] = {}
        seq = range(n) if slots == "original" else arr
        for i in seq:
            local[i] = count.get(names[i], 0)
            count[names[i]] = local[i] + 1
        return [str(local[i]) for i in arr]
    vals = list(slots)
    if len(vals) != n:
        raise RankoptInputError(f"`slots` must have one entry per process ({n}); got {len(vals)}.")
    out = []
    for i, v in enumerate(vals):
        s = str(v).strip()
        if not s or any(c.isspace() or c in "=#" for c in s):
            raise RankoptInputError(
                f"`slots` entries must be core numbers like 3, '0-1' or '1:2'; slots[{i}] is {v!r}."
            )
        out.append(s)
    return [out[i] for i in arr]


def format_rankfile(
    order: ArrayLike, hosts: Any, *, slots: SlotSpec = None, comment: bool = True
) -> str:
    """Text of an Open MPI rankfile for ``order``.

    Parameters
    ----------
    order : array_like of int, shape (n,)
        The rank order (``order[k]`` = original rank that gets new rank ``k``).
    hosts : sequence of str or Measurement
        Host name of every original rank.
    slots : None, {"original", "new"} or sequence, default None
        Core (Open MPI "slot") of each new rank. ``None``: no ``slot=`` at all,
        so Open MPI places each rank on its host as it would by default (a
        slot that is not the rank's real binding -- ``slot=2`` on a 2-core
        host -- makes Open MPI refuse the whole file, with or without
        ``--bind-to core:overload-allowed``). A sequence gives the slot of
        every *original* rank: pass the cores each process is really bound to
        (``python -m rankopt.mpi --rankfile`` does, when every rank of a host
        is bound to its own cores). ``"original"``: new rank ``k``
        takes the slot original rank ``order[k]`` had under a by-slot launch
        (its index among the original ranks of its host), so every process
        lands on the core its predecessor was measured on. ``"new"``: slots are
        numbered per host in new-rank order. A sequence gives the slot of every
        *original* rank (an int, or an Open MPI slot string such as ``"0-1"``
        or ``"1:2"``).
    comment : bool
        Start with ``#`` lines naming the launch options (Open MPI accepts them).

    Returns
    -------
    str

    Examples
    --------
    >>> print(format_rankfile([1, 0, 3, 2], ["a", "a", "b", "b"], comment=False), end="")
    rank 0=a
    rank 1=a
    rank 2=b
    rank 3=b
    >>> print(format_rankfile([1, 0], ["a", "a"], slots=[0, 1], comment=False), end="")
    rank 0=a slot=1
    rank 1=a slot=0
    """
    arr = as_order(order)
    names = check_hosts(hosts, arr.size)
    slot_of = _slots(arr, names, slots)
    lines = []
    if comment:
        lines += [
            f"# rank order for {arr.size} processes (line k: new rank k, original rank order[k])",
            "# Open MPI 5.x: mpiexec --map-by rankfile:file=THIS_FILE ...",
            "# Open MPI 4.x: mpirun --rankfile THIS_FILE ...",
        ]
    if slot_of is None:
        lines += [f"rank {k}={names[i]}" for k, i in enumerate(arr)]
    else:
        lines += [f"rank {k}={names[i]} slot={slot_of[k]}" for k, i in enumerate(arr)]
    return "\n".join(lines) + "\n"


def write_rankfile(
    path: str | os.PathLike[str],
    order: ArrayLike,
    hosts: Any,
    *,
    slots: SlotSpec = None,
    comment: bool = True,
    what: str = "rankfile",
) -> Path:
    """Write an Open MPI rankfile that places new rank ``k`` on ``hosts[order[k]]``.

    Use it with ``mpiexec --map-by rankfile:file=PATH`` (Open MPI 5.x) or
    ``mpirun --rankfile PATH`` (4.x); see :func:`launch_options`. Slots are
    written only when given (the cores each process is really bound to).

    Parameters
    ----------
    path : path-like
        Output file; written atomically (temporary file + rename). A symbolic
        link, FIFO, socket or directory there is refused, a character device
        (``/dev/null``) written in place; see :func:`rankopt._files.atomic_write`.
    order, hosts, slots, comment
        See :func:`format_rankfile`.
    what : str
        How errors name ``path`` (the CLI passes its option, ``"--rankfile"``).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    RankoptInputError
        If ``order`` is not a permutation, ``hosts`` has the wrong length or a
        name a launcher cannot read, or ``path`` is not a writable place for a
        regular file (a :class:`rankopt.errors.RankoptFileError`).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "rankfile"
    >>> _ = write_rankfile(p, [1, 0], ["node1", "node2"], comment=False)
    >>> print(p.read_text(), end="")
    rank 0=node2
    rank 1=node1
    """
    text = format_rankfile(order, hosts, slots=slots, comment=comment)
    return atomic_write_text(path, text, what=what)


def format_hostfile(order: ArrayLike, hosts: Any, *, comment: bool = False) -> str:
    """Text of a sequential hostfile: line ``k`` is the host of new rank ``k``.

    Examples
    --------
    >>> print(format_hostfile([2, 0, 1], ["a", "b", "c"]), end="")
    c
    a
    b
    """
    lines = rank_hosts(order, hosts)
    if comment:
        lines = ["# line k: host of new rank k (mpiexec --hostfile THIS_FILE --map-by seq)"] + lines
    return "\n".join(lines) + "\n"


def write_hostfile(
    path: str | os.PathLike[str],
    order: ArrayLike,
    hosts: Any,
    *,
    comment: bool = True,
    what: str = "hostfile",
) -> Path:
    """Write a sequential hostfile for ``mpiexec --hostfile PATH --map-by seq``.

    Line ``k`` names the host of new rank ``k`` (``hosts[order[k]]``). The
    sequential mapper places ranks on hosts only; cores follow the launcher's
    binding policy.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "hosts"
    >>> _ = write_hostfile(p, [1, 0], ["node1", "node2"], comment=False)
    >>> p.read_text().split()
    ['node2', 'node1']
    """
    return atomic_write_text(path, format_hostfile(order, hosts, comment=comment), what=what)


def write_slurm_hostfile(
    path: str | os.PathLike[str], order: ArrayLike, hosts: Any, *, what: str = "Slurm hostfile"
) -> Path:
    """Write a Slurm hostfile for ``SLURM_HOSTFILE=PATH srun --distribution=arbitrary``.

    Line ``k`` is the node of task ``k``. Host names must be Slurm node names
    (as in ``SLURM_JOB_NODELIST``), and the file must have at least as many
    lines as ``srun -n`` tasks; no comments are written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "slurm_hosts"
    >>> _ = write_slurm_hostfile(p, [1, 2, 0], ["n1", "n2", "n3"])
    >>> p.read_text().split()
    ['n2', 'n3', 'n1']
    """
    return atomic_write_text(path, format_hostfile(order, hosts, comment=False), what=what)


def node_ranks(order: ArrayLike, hosts: Any) -> dict[str, int]:
    """Node rank of every host for a node-contiguous order (``torchrun --node-rank``).

    Launchers that number ranks node by node (torchrun with a static
    rendezvous, DeepSpeed) apply an order through the node order only: the node
    of new rank 0 gets node rank 0, and so on.

    Raises
    ------
    RankoptInputError
        If some host's new ranks are not consecutive (such an order cannot be
        expressed node by node; use :func:`rankopt.adapters.nccl.solve_nodes`).

    Examples
    --------
    >>> node_ranks([2, 3, 0, 1], ["a", "a", "b", "b"])
    {'b': 0, 'a': 1}
    """
    names = rank_hosts(order, hosts)
    out: dict[str, int] = {}
    for k, h in enumerate(names):
        if h not in out:
            out[h] = len(out)
        elif names[k - 1] != h:
            raise RankoptInputError(
                f"`order` must keep each host's ranks consecutive; host {h!r} reappears "
                f"at new rank {k}."
            )
    return out


def write_deepspeed_hostfile(
    path: str | os.PathLike[str], order: ArrayLike, hosts: Any, *, what: str = "DeepSpeed hostfile"
) -> Path:
    """Write a DeepSpeed hostfile (``HOST slots=N``) listing hosts in the order's node order.

    DeepSpeed's launcher numbers ranks host by host in hostfile order, so a
    node-contiguous order is applied by listing its hosts in that order
    (``deepspeed --hostfile PATH train.py``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "hostfile"
    >>> _ = write_deepspeed_hostfile(p, [2, 3, 0, 1], ["a", "a", "b", "b"])
    >>> print(p.read_text(), end="")
    b slots=2
    a slots=2
    """
    names = rank_hosts(order, hosts)
    ranks = node_ranks(order, hosts)
    lines = [f"{h} slots={names.count(h)}" for h in sorted(ranks, key=ranks.__getitem__)]
    return atomic_write_text(path, "\n".join(lines) + "\n", what=what)


def launch_options(
    path: str | os.PathLike[str],
    kind: Literal["rankfile", "hostfile", "slurm"] = "rankfile",
    *,
    openmpi: int = 5,
) -> list[str]:
    """Launcher options that apply a file written by this module.

    Parameters
    ----------
    path : path-like
        The file.
    kind : {"rankfile", "hostfile", "slurm"}
        Which writer produced it.
    openmpi : {4, 5}
        Open MPI major version (rankfile option syntax changed in 5.0).

    Returns
    -------
    list of str
        Options for ``mpiexec``/``mpirun``; for ``"slurm"`` the ``srun`` options
        (``SLURM_HOSTFILE=PATH`` must also be exported).

    Examples
    --------
    >>> launch_options("rf")
    ['--map-by', 'rankfile:file=rf']
    >>> launch_options("rf", openmpi=4)
    ['--rankfile', 'rf']
    >>> launch_options("hosts", "hostfile")
    ['--hostfile', 'hosts', '--map-by', 'seq']
    """
    p = os.fspath(path)
    if openmpi not in (4, 5):
        raise RankoptInputError(f"`openmpi` must be 4 or 5; got {openmpi!r}.")
    if kind == "rankfile":
        return ["--map-by", f"rankfile:file={p}"] if openmpi == 5 else ["--rankfile", p]
    if kind == "hostfile":
        return ["--hostfile", p, "--map-by", "seq"]
    if kind == "slurm":
        return ["--distribution=arbitrary"]
    raise RankoptInputError(f"`kind` must be 'rankfile', 'hostfile' or 'slurm'; got {kind!r}.")
