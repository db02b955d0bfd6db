"""Apply a rank order to an MPI communicator (mpi4py).

- :func:`reorder` -- ``comm.Split(0, key=rank_of[rank])``: a new communicator in
  which process ``order[k]`` has rank ``k``.
- :func:`optimize` -- probe, solve on the root, broadcast, reorder.
- :func:`run_program` -- run an unmodified mpi4py program with ``MPI.COMM_WORLD``
  replaced by a reordered communicator (``python -m rankopt.mpi``).
- :func:`original_world` -- the real ``MPI_COMM_WORLD`` after a replacement.

Why ``Split``: MPI's ``reorder=1`` topology constructors are free to ignore the
flag (MPICH does; Open MPI only reorders within a node), while ``MPI_Comm_split``
with one colour orders ranks by ``key`` by definition.

mpi4py is imported inside functions only: importing ``mpi4py.MPI`` initialises MPI.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import RankoptInputError, check_order
from rankopt.adapters._common import option_digests, order_digest
from rankopt.errors import RankoptMPIError

if TYPE_CHECKING:
    from mpi4py import MPI

    from rankopt.solvers.result import SolveResult

__all__ = ["reorder", "optimize", "run_program", "original_world", "RankoptMPIError"]

logger = logging.getLogger("rankopt")

_ORIGINAL_WORLD: list[Any] = []


_TAG_AGREE = 0x7A20
DEFAULT_TIMEOUT = 30.0  # the probe's default timeout, also the agreement's deadline
DEFAULT_SOLVE_WAIT = 300.0  # how long the other ranks wait for the root's solve
FAREWELL = 5.0  # seconds a rank that does not print waits for the one that does, then aborts


_ABANDONED: list[Any] = []  # requests given up on: they (and their buffers) must stay alive


def _wait(requests: list[Any], deadline: float, *, busy: bool = False) -> bool:
    """Test ``requests`` until all are complete (True) or ``MPI.Wtime() >= deadline``.

    ``busy``: test again at once (yielding the core) instead of sleeping up to
    2 ms between tests -- for timed transfers, whose large messages make
    progress only while they are tested, and for requests of several rounds
    (``MPI_Comm_idup``), each of which waits for the slowest sleeper. Requests
    still pending at the deadline are kept referenced for good: MPI may still
    write into their buffers.
    """
    from mpi4py import MPI

    pause = 1e-4
    while not MPI.Request.Testall(requests):
        if MPI.Wtime() >= deadline:
            _ABANDONED.append(requests)
            return False
        if busy:
            os.sched_yield()
        else:
            time.sleep(pause)
            pause = min(2 * pause, 0.002)
    return True


def _exchange(
    comm: MPI.Comm, report: tuple[Any, ...], suspects: Sequence[int], timeout: float
) -> tuple[list[Any], list[int]]:
    """Send ``report`` to every rank and collect theirs, for at most ``timeout`` seconds.

    Point to point (tag ``_TAG_AGREE``), so that a rank that never answers blocks
    nobody. Waiting stops early once every missing rank is one that some report
    (or ``suspects``, this rank's own) names as unresponsive. Returns the report of
    every rank (``None`` where none arrived) and the ranks that sent none.
    """
    from mpi4py import MPI

    n, me = comm.Get_size(), comm.Get_rank()
    sends = [
        comm.isend((*report, tuple(suspects)), dest=q, tag=_TAG_AGREE) for q in range(n) if q != me
    ]
    got: list[Any] = [None] * n
    got[me] = report
    named = set(suspects)
    pending = set(range(n)) - {me}
    deadline = MPI.Wtime() + timeout
    pause = 1e-4
    while pending - named and MPI.Wtime() < deadline:
        for q in sorted(pending):
            msg = comm.improbe(source=q, tag=_TAG_AGREE)
            if msg is not None:
                *theirs, their_suspects = msg.recv()
                got[q] = tuple(theirs)
                named.update(their_suspects)
                pending.discard(q)
        time.sleep(pause)
        pause = min(2 * pause, 0.002)
    if pending:  # sends to silent ranks may never complete: they are abandoned
        _ABANDONED.append(sends)
    else:
        _wait(sends, MPI.Wtime() + timeout)
    return got, sorted(pending)


def _agree(
    comm: MPI.Comm,
    error: str | None,
    digest: str | None,
    what: str,
    *,
    input_error: bool = False,
    timeout: float | None = None,
    suspects: Sequence[int] = (),
) -> None:
    """Every rank learns whether any rank failed or disagrees; all raise alike.

    With ``timeout=None``, one blocking allgather. Otherwise the reports are
    exchanged point to point with that deadline (see :func:`_exchange`; pass the
    ranks this rank already knows to be unresponsive as ``suspects``), and a rank
    that sent none makes every rank raise ``RankoptMPIError`` naming it. The
    decision depends only on the reports: the first error in rank order wins.

    With ``input_error``, an error reported identically by every rank (the same bad
    input everywhere) is raised as a ``RankoptInputError``; otherwise errors are
    raised as ``RankoptMPIError``.
    """
    silent: list[int] = []
    if timeout is None:
        reports = comm.allgather((error, digest))
    else:
        reports, silent = _exchange(comm, (error, digest), suspects, timeout)
    if silent:
        _abort_at_exit()
    errors = [None if rep is None else rep[0] for rep in reports]
    if input_error and not silent and errors[0] is not None and all(e == errors[0] for e in errors):
        raise RankoptInputError(errors[0])
    for r, err in enumerate(errors):
        if err is not None:
            raise RankoptMPIError(f"{what} failed on rank {r}: {err}", silent=silent)
    if silent:
        raise RankoptMPIError(
            f"{what} failed: {_ranks(silent)} did not answer within {timeout:g} s.",
            silent=silent,
        )
    digests = [d for _, d in reports]
    if len(set(digests)) > 1:
        odd = next(r for r, d in enumerate(digests) if d != digests[0])
        raise RankoptMPIError(
            f"`order` differs between ranks: rank {odd} holds a different order than rank 0 "
            f"(digests {digests[odd]} != {digests[0]}); pass the same order on every rank."
        )


def agree_options(
    comm: MPI.Comm,
    options: Mapping[str, Any],
    what: str = "",
    *,
    timeout: float = DEFAULT_TIMEOUT,
    flags: bool = False,
) -> None:
    """Raise on every rank unless every rank was given the same ``options``.

    Options that shape the result (the collective, the model, the seed, the
    root) decide nothing silently: a value that differs on some rank is an
    error naming the option, the rank and both values, raised on every rank
    alike (as :class:`rankopt.RankoptInputError`). Exchanged with a deadline,
    like every agreement here. ``what`` prefixes the message; with ``flags``
    options are named as command-line flags (``--nbytes``).
    """
    mine = option_digests(options)
    reports, silent = _exchange(comm, (None, mine), (), timeout)
    if silent:
        _abort_at_exit()
        raise RankoptMPIError(
            f"{what or 'option check'} failed: {_ranks(silent)} did not answer within "
            f"{timeout:g} s.",
            silent=silent,
        )
    first = reports[0][1]
    pre = f"{what}: " if what else ""
    for r, rep in enumerate(reports):
        theirs = rep[1]
        for key in sorted(set(first) | set(theirs)):
            a, b = first.get(key), theirs.get(key)
            if (a and a[0]) != (b and b[0]):
                name = "--" + key.replace("_", "-") if flags else f"`{key}`"
                raise RankoptInputError(
                    f"{pre}option {name} differs between ranks: rank 0 has "
                    f"{a[1] if a else 'none'}, rank {r} has {b[1] if b else 'none'}; give every "
                    "rank the same options."
                )


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _abort_at_exit() -> None:
    """Make MPI abort the job at exit: ``MPI_Finalize`` would wait for a silent rank."""
    from mpi4py.run import set_abort_status

    set_abort_status(1)


def _dup(comm: MPI.Intracomm, timeout: float) -> MPI.Intracomm:
    """A private duplicate of ``comm`` for rankopt's own messages, within ``timeout``."""
    from mpi4py import MPI

    private, request = comm.Idup()
    # busy: Open MPI's Idup runs several rounds that advance only while tested; with
    # sleeps between tests it took 0.3 s of a cached 9-process launch (0.02 s busy)
    if not _wait([request], MPI.Wtime() + timeout, busy=True):
        _abort_at_exit()
        raise RankoptMPIError(
            f"not every rank of the communicator started within {timeout:g} s "
            "(MPI_Comm_idup did not complete)."
        )
    return private  # type: ignore[no-any-return]


def _bcast(
    comm: MPI.Intracomm, payload: Any, root: int, deadline: float, wait: float
) -> tuple[str | None, Any]:
    """Broadcast ``payload`` (pickled) from ``root``, until ``deadline`` (``MPI.Wtime``).

    Returns ``(error, value)``: ``error`` is ``None`` or why this rank did not get
    the value in time (``value`` is then ``None``); ``wait`` is the wait it names.
    """
    import pickle

    from mpi4py import MPI

    rank = comm.Get_rank()
    size = np.zeros(1, dtype=np.int64)
    data = b""
    if rank == root:
        data = pickle.dumps(payload)
        size[0] = len(data)
    if not _wait([comm.Ibcast(size, root=root)], deadline):
        return f"no answer from rank {root} within {wait:g} s", None
    buf = bytearray(data) if rank == root else bytearray(int(size[0]))
    if not _wait([comm.Ibcast([buf, MPI.BYTE], root=root)], deadline):
        return f"the result from rank {root} did not arrive within {wait:g} s", None
    return None, payload if rank == root else pickle.loads(buf)


def _solve_wait(probe_options: Mapping[str, Any], solve_options: Mapping[str, Any]) -> float:
    """Seconds the other ranks wait for the root's solve: its ``time_limit`` plus the
    probe's timeout, or :data:`DEFAULT_SOLVE_WAIT` plus the timeout without a limit."""
    limit = solve_options.get("time_limit")
    try:
        limit = DEFAULT_SOLVE_WAIT if limit is None else float(limit)
    except (TypeError, ValueError):  # the solver rejects it on the root
        limit = DEFAULT_SOLVE_WAIT
    return _probe_timeout(probe_options) + max(limit, 0.0)


def _probe_timeout(probe_options: Mapping[str, Any]) -> float:
    """The probe's ``timeout``, also the deadline of the agreements that follow it."""
    value = probe_options.get("timeout", DEFAULT_TIMEOUT)
    try:
        value = float(value)
    except (TypeError, ValueError):  # the probe rejects it on every rank
        return DEFAULT_TIMEOUT
    return value if np.isfinite(value) and value > 0 else DEFAULT_TIMEOUT


def _split(comm: MPI.Intracomm, order: NDArray[np.int64], name: str | None) -> MPI.Intracomm:
    """``comm.Split(0, key=rank_of[rank])``, checked; named ``name``."""
    from rankopt.order import invert

    rank_of = invert(order)
    rank = comm.Get_rank()
    new: MPI.Intracomm = comm.Split(0, key=int(rank_of[rank]))  # type: ignore[assignment]
    if new.Get_rank() != rank_of[rank]:
        got = new.Get_rank()
        new.Free()
        raise RankoptMPIError(
            f"MPI_Comm_split did not honour the key: rank {rank} got new rank {got}, "
            f"expected {int(rank_of[rank])}."
        )
    if name:
        new.Set_name(name)
    return new


def reorder(
    comm: MPI.Intracomm,
    order: ArrayLike,
    *,
    check: bool = True,
    name: str | None = "rankopt_reordered",
) -> MPI.Intracomm:
    """Return a communicator in which original rank ``order[k]`` has rank ``k``.

    Collective over ``comm``: every process must call it with the same order.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator to renumber (``MPI.COMM_WORLD`` or any intracommunicator).
    order : array_like of int, shape (comm.size,)
        ``order[k]`` is the rank in ``comm`` of the process that gets new rank ``k``
        (a ``SolveResult`` is accepted too).
    check : bool, default True
        Verify with one small ``allgather`` that every rank holds a valid and
        identical order before splitting. With ``check=False`` an invalid order
        still raises locally, but a rank-dependent order is not detected.
    name : str or None
        Name given to the new communicator (``comm.Set_name``).

    Returns
    -------
    mpi4py.MPI.Intracomm
        ``comm.Split(0, key=rank_of[comm.rank])``; free it with ``Free()`` when done.

    Raises
    ------
    RankoptInputError
        If ``order`` is not a permutation of ``range(comm.size)`` (raised on every
        rank before any communication when all ranks got the same bad order).
    RankoptMPIError
        On every rank, if the order is invalid on some ranks only or differs between
        ranks, or if MPI did not honour the split keys.

    Notes
    -----
    The order is validated locally first; the agreement check then exchanges
    one 16-character digest per rank, so ranks never disagree about whether to
    raise (a rank that raised alone would leave the others waiting in ``Split``).
    Cost: one ``allgather`` plus one ``MPI_Comm_split``.

    Examples
    --------
    Run under ``mpiexec -n 4``:

    >>> from mpi4py import MPI                                   # doctest: +SKIP
    >>> new = reorder(MPI.COMM_WORLD, [3, 2, 1, 0])               # doctest: +SKIP
    >>> new.rank == 3 - MPI.COMM_WORLD.rank                       # doctest: +SKIP
    True
    """
    if hasattr(order, "order") and not isinstance(order, np.ndarray):
        order = order.order
    n = comm.Get_size()
    error: str | None = None
    arr = None
    try:
        arr = check_order(order, n)
    except RankoptInputError as exc:
        if not check:
            raise
        error = str(exc)
    if check:
        _agree(
            comm,
            error,
            None if arr is None else order_digest(arr),
            "order validation",
            input_error=True,
        )
    assert arr is not None
    return _split(comm, arr, name)


def optimize(
    comm: MPI.Intracomm,
    collective: str = "allreduce",
    algorithm: str = "ring",
    *,
    root: int = 0,
    probe_options: Mapping[str, Any] | None = None,
    progress: bool = False,
    direction_trial: bool = True,
    **solve_options: Any,
) -> tuple[MPI.Intracomm, SolveResult]:
    """Measure the network of ``comm``, find a better rank order, return it applied.

    Collective over ``comm``: probe all pairs (``rankopt.probe.mpi.measure``),
    make it a :class:`rankopt.Network` (hosts, bandwidth hierarchy and
    uplinks inferred), solve on ``root`` (``rankopt.solve``, whose defaults
    price the contention model at 16 MiB when bandwidth was measured and keep
    the launch order when the modelled gain is within the measured spread),
    broadcast the result, :func:`reorder`.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator to optimise, usually ``MPI.COMM_WORLD``.
    collective, algorithm : str
        The collective and algorithm the order is tuned for (see ``rankopt.solve``).
    root : int
        Rank that solves.
    probe_options : mapping, optional
        Keyword arguments for ``rankopt.probe.mpi.measure``.
    progress : bool
        The root prints the probe's and the solve's progress on standard
        error (plain lines at a modest rate under a launcher, a bar on a
        terminal; see :class:`rankopt._progress.Progress`).
    direction_trial : bool, default True
        Where the solve found a ring beside another tenant's load that the model
        prices alike with its groups the other way round
        (``result.extra["ring_alternative"]``), time both with the collective
        before applying one (:mod:`rankopt.adapters.direction`; a few calls of
        at most 4 MiB each). False applies the order found.
    **solve_options
        Keyword arguments for ``rankopt.solve`` (``objective``, ``nbytes``,
        ``uplink_bandwidth``, ``method``, ``rng``, ``time_limit``,
        ``keep_rank0``, ...); the same options as ``python -m rankopt.mpi``'s
        flags.

    Returns
    -------
    comm : mpi4py.MPI.Intracomm
        The reordered communicator (identical rank numbering to ``result.order``).
    result : SolveResult
        The same object on every rank.

    Raises
    ------
    RankoptMPIError
        On every live rank, if the probe or the solver fails on any rank, or if
        a rank stops answering: every step after the probe has a deadline (see
        Notes), and the error's ``silent`` lists the ranks that did not answer.

    Notes
    -----
    *Deadlines.* rankopt's own messages travel on a private duplicate of
    ``comm``, and none of its collectives waits for ever. Each agreement
    (after the probe, after the broadcast of the result) exchanges one report
    per rank point to point, with the probe's ``timeout`` (default 30 s) as
    deadline, and stops early once every missing rank is one that a report
    names as unresponsive. The other ranks wait for the root's solve for its
    ``time_limit`` plus ``timeout`` (``DEFAULT_SOLVE_WAIT`` = 300 s plus
    ``timeout`` without a limit); a root that finishes later reports that it
    was late. Every live rank then raises, within about two timeouts of a
    rank's stop when it stops in the probe.

    *Ending the job.* With a silent rank, ``MPI_Finalize`` would wait for it
    forever, so the job is set to end with ``MPI_Abort`` at exit
    (``mpi4py.run.set_abort_status``) instead: the last resort that ends the
    job rather than hanging it. ``comm`` itself stays usable only when every
    rank raised without a silent rank (an input or solver error).

    Examples
    --------
    >>> from mpi4py import MPI                                       # doctest: +SKIP
    >>> comm, result = optimize(MPI.COMM_WORLD, "allreduce", "ring")  # doctest: +SKIP
    >>> comm.Allreduce(sendbuf, recvbuf)                              # doctest: +SKIP
    """
    new, result = _optimize(
        comm,
        collective,
        algorithm,
        root,
        probe_options,
        progress,
        True,
        solve_options,
        trial=direction_trial,
    )
    assert result is not None  # shared: every rank holds it
    return new, result


def _optimize(
    comm: MPI.Intracomm,
    collective: str,
    algorithm: str,
    root: int,
    probe_options: Mapping[str, Any] | None,
    progress: bool,
    share_result: bool,
    solve_options: dict[str, Any],
    *,
    trial: bool = True,
) -> tuple[MPI.Intracomm, SolveResult | None]:
    """:func:`optimize`; with ``share_result`` False the other ranks receive the order
    alone and get ``None`` for the result (they do not import the solvers to read
    a :class:`~rankopt.SolveResult`); ``trial``: ``direction_trial``."""
    from mpi4py import MPI

    from rankopt.probe.mpi import measure_at_root

    rank = comm.Get_rank()
    size = comm.Get_size()
    if not isinstance(trial, (bool, np.bool_)):
        raise RankoptInputError(
            f"`direction_trial` must be True or False; got {trial!r} on rank {rank}."
        )
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < size:
        raise RankoptInputError(
            f"`root` must be a rank of `comm`, 0..{size - 1}; got {root!r} on rank {rank}."
        )
    timeout = _probe_timeout(probe_options or {})
    private = _dup(comm, timeout)  # rankopt's own messages, apart from the program's
    # options that shape the result must be the same on every rank
    agree_options(
        private,
        {"collective": collective, "algorithm": algorithm, "root": int(root), **solve_options},
        "optimize",
        timeout=timeout,
    )
    err: str | None = None
    suspects: list[int] = []
    measurement = network = None
    from rankopt._progress import Progress

    shown = Progress("rankopt", enabled=bool(progress) and rank == root)
    try:
        from rankopt.adapters.cache import probe_arguments

        measurement = measure_at_root(  # only the root solves
            comm, int(root), **probe_arguments(probe_options), callback=shown.probe_callback()
        )
        shown.finish()
    except Exception as exc:  # noqa: BLE001 - reported identically on every rank
        err = f"{type(exc).__name__}: {exc}"
        suspects = list(getattr(exc, "ranks", None) or [])
        shown.finish("failed")
    _agree(private, err, "", "probe", timeout=timeout, suspects=suspects)
    wait = _solve_wait(probe_options or {}, solve_options)
    waiting_since = MPI.Wtime()  # the other ranks wait for the result from now on
    payload: tuple[str, Any]
    if rank == root:
        try:
            from rankopt.solvers.solve import solve

            if measurement is None:
                raise RankoptMPIError(f"the probe returned no measurement on root rank {root}")
            from rankopt.adapters.cache import network_of, solved_once

            network = network_of(measurement)  # built once: the cache may have built it

            def run() -> SolveResult:
                shown.start(f"solve ({size} processes)", 0, "")
                out = solve(network, collective, algorithm, **solve_options)
                shown.finish(f"{out.method}, modelled {out.speedup:.3g}x")
                return out

            what = {"collective": collective, "algorithm": algorithm, **solve_options}
            cache_opt = (probe_options or {}).get("cache")
            payload = ("ok", solved_once(cache_opt, measurement, network, what, run))
        except Exception as exc:  # noqa: BLE001
            shown.finish("failed")
            payload = ("error", f"{type(exc).__name__}: {exc}")
    else:
        payload = ("", None)
    result, order, plan, err, digest = _share_result(
        private, payload, root, wait, waiting_since, share_result
    )
    _agree(private, err, digest, "solve", timeout=timeout, suspects=[] if digest else [root])
    if rank == root and network is not None:  # on the root only: what order files record
        result.extra["network_object"] = network
    if rank == root and result is not None and measurement is not None:
        result.extra["probe_cache"] = measurement.parameters.get("cache")
    del measurement  # no rank keeps the probe's n x n matrices past this point
    assert order is not None  # the agreement raised otherwise
    if trial:
        order, result = _direction_trial(private, result, order, plan, timeout)
    logger.info("rankopt: %d ranks, %s", comm.Get_size(), _summary(result))
    new = _split(comm, order, "rankopt_reordered")
    private.Free()
    return new, result


def _direction_trial(
    comm: MPI.Intracomm,
    result: SolveResult | None,
    order: NDArray[np.int64],
    trial: dict[str, Any] | None,
    timeout: float,
) -> tuple[NDArray[np.int64], SolveResult | None]:
    """The order to apply after :mod:`rankopt.adapters.direction`'s trial of ``trial``
    (the plan that reached every rank with the order; None: nothing to time), and the
    result with the trial's line (where this rank holds it). Collective over ``comm``;
    every step has the deadline ``timeout`` (all live ranks raise alike)."""
    from rankopt.adapters import direction

    if trial is None:
        return order, result
    wins, line = time_directions(comm, order, trial, timeout)
    if wins:
        order = check_order(trial["alternative"], comm.Get_size())
        if result is not None:
            result = direction.applied(result, order, float(trial["cost"]), line)
    elif result is not None:
        result = direction.noted(result, line)
    return order, result


def time_directions(
    comm: MPI.Intracomm, order: ArrayLike, trial: Mapping[str, Any], timeout: float
) -> tuple[bool, str]:
    """Time ``order`` against ``trial["alternative"]`` (a plan of
    :func:`rankopt.adapters.direction.plan`) with the MPI collective itself:
    ``(the alternative wins, the report's line)``, the same on every rank of ``comm``.
    Collective; every step has the deadline ``timeout``."""
    from rankopt.adapters import direction

    n = comm.Get_size()
    mine = check_order(order, n, name="order")
    alt = check_order(trial["alternative"], n, name="alternative")
    comms = [_split(comm, mine, None), _split(comm, alt, None)]
    try:
        return direction.measure(MPITimer(comms, trial["collective"], timeout), dict(trial))
    finally:
        for c in comms:
            c.Free()


#: Collectives :class:`MPITimer` times.
TIMED_COLLECTIVES = ("allreduce", "allgather", "broadcast", "alltoall")


def _check_timed(collective: str) -> None:
    if collective not in TIMED_COLLECTIVES:
        raise RankoptInputError(
            f"`collective` must be one of {', '.join(TIMED_COLLECTIVES)} for verify; "
            f"got {collective!r}."
        )


class MPITimer:
    """Time one blocking MPI collective on the launch or the candidate communicator.

    Parameters
    ----------
    comms : sequence of two mpi4py.MPI.Intracomm
        Launch order, candidate.
    collective : str
    timeout : float
        Seconds one step may take before it is an error.
    """

    def __init__(self, comms: Sequence[Any], collective: str, timeout: float) -> None:
        _check_timed(collective)
        self.comms = list(comms)
        self.collective = collective
        self.timeout = float(timeout)
        self.n = self.comms[0].Get_size()
        self._buffers: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _buffer(self, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        if nbytes not in self._buffers:
            n = self.n
            count = max(nbytes // 4, 1)
            if self.collective in ("allgather", "alltoall"):
                count = max(count // n, 1) * n
            send_count = count // n if self.collective == "allgather" else count
            self._buffers = {nbytes: (np.ones(send_count, np.float32), np.empty(count, np.float32))}
        return self._buffers[nbytes]

    def _sync(self, comm: Any, what: str) -> None:
        from mpi4py import MPI

        if not _wait([comm.Ibarrier()], MPI.Wtime() + self.timeout):
            _abort_at_exit()
            raise RankoptMPIError(
                f"verify: {what} did not complete within {self.timeout:g} s on every rank "
                "(a peer stopped or died)."
            )

    def __call__(self, which: int, nbytes: int) -> float:
        from mpi4py import MPI

        comm = self.comms[which]
        send, recv = self._buffer(nbytes)
        self._sync(comm, "the barrier before a timed call")
        watchdog = threading.Timer(self.timeout, _watchdog_abort, args=(self.timeout,))
        watchdog.daemon = True
        watchdog.start()
        t0 = MPI.Wtime()
        if self.collective == "allreduce":
            comm.Allreduce(send, recv, op=MPI.SUM)
        elif self.collective == "allgather":
            comm.Allgather(send, recv)
        elif self.collective == "broadcast":
            comm.Bcast(recv, root=0)
        else:
            comm.Alltoall(send, recv)
        dt = np.array([MPI.Wtime() - t0])
        watchdog.cancel()
        out = np.empty(1)
        if not _wait([comm.Iallreduce(dt, out, op=MPI.MAX)], MPI.Wtime() + self.timeout):
            _abort_at_exit()
            raise RankoptMPIError(
                f"verify: the time of a call did not reach every rank within {self.timeout:g} s."
            )
        return float(out[0])


def _watchdog_abort(timeout: float) -> None:
    """A timed call outlived its deadline: end the job rather than hang it."""
    logger.error(
        "rankopt verify: a timed collective took longer than %g s "
        "(a peer stopped or died); aborting the job",
        timeout,
    )
    original_world().Abort(1)


def _share_result(
    comm: MPI.Intracomm,
    payload: tuple[str, Any],
    root: int,
    wait: float,
    waiting_since: float,
    share: bool = True,
) -> tuple[Any, NDArray[np.int64] | None, dict[str, Any] | None, str | None, str | None]:
    """Broadcast the root's ``(status, value)`` with a deadline; what this rank reports.

    Returns the result (or None; None off the root unless ``share``: the others
    then receive the order alone, with the ring direction's trial plan,
    :func:`rankopt.adapters.direction.plan`), the order, that plan (None: nothing to
    time), this rank's error for the agreement
    that follows (the root's solve error is reported by the root alone) and the
    digest of the order received. A root that finishes solving after the others
    stopped waiting (``wait`` seconds after ``waiting_since``, less a second for
    the broadcast) reports that instead of a result nobody waits for any more.
    """
    from mpi4py import MPI

    rank = comm.Get_rank()
    if rank == root and payload[0] == "ok" and MPI.Wtime() - waiting_since > wait - 1.0:
        payload = (
            "error",
            f"the solve took longer than the {wait:g} s the other ranks wait for it "
            "(bound it with time_limit)",
        )
    from rankopt.adapters.direction import plan

    kept = payload[1] if rank == root and payload[0] == "ok" else None
    if not share and kept is not None:
        payload = ("order", (np.asarray(kept.order, dtype=np.int64), plan(kept)))
    # the others' deadline is common; the root only needs its sends to complete
    deadline = MPI.Wtime() + min(wait, 30.0) if rank == root else waiting_since + wait
    late, received = _bcast(comm, payload, root, deadline, wait)
    if late is not None:
        return None, None, None, late, None
    status, value = received
    if status == "error":
        return None, None, None, value if rank == root else None, "error"
    result = kept if rank == root else (value if status == "ok" else None)
    if status == "order":
        value, trial = value
    else:
        trial = plan(value)
    order = check_order(value if status == "order" else value.order, comm.Get_size())
    return result, order, trial, None, order_digest(order)


def _summary(result: Any) -> str:
    if result is None:
        return "the root's order"
    try:
        return f"cost {result.cost:.3g} s (identity {result.baseline_cost:.3g} s)"
    except Exception:  # noqa: BLE001
        return repr(result)


def original_world() -> MPI.Intracomm:
    """The real ``MPI_COMM_WORLD``, also after :func:`run_program` replaced the attribute."""
    from mpi4py import MPI

    return _ORIGINAL_WORLD[0] if _ORIGINAL_WORLD else MPI.COMM_WORLD


def _world_class() -> type:
    from mpi4py import MPI

    predefined = tuple(
        getattr(MPI, k)
        for k in (
            "TAG_UB",
            "HOST",
            "IO",
            "WTIME_IS_GLOBAL",
            "UNIVERSE_SIZE",
            "APPNUM",
            "LASTUSEDCODE",
        )
        if hasattr(MPI, k)
    )

    class ReorderedWorld(MPI.Intracomm):  # type: ignore[misc]
        """The reordered world; predefined attributes are read from the real world."""

        def Get_attr(self, keyval: Any) -> Any:  # noqa: N802 - mpi4py's name
            value = super().Get_attr(keyval)
            if value is None and keyval in predefined:
                return original_world().Get_attr(keyval)
            return value

    return ReorderedWorld


def replace_world(comm: MPI.Intracomm) -> MPI.Intracomm:
    """Make ``mpi4py.MPI.COMM_WORLD`` refer to ``comm`` for code that looks it up later.

    The object installed is a subclass of ``MPI.Intracomm`` on the same MPI
    communicator whose ``Get_attr`` falls back to the real world for the
    predefined attributes (``MPI.TAG_UB``, ``MPI.UNIVERSE_SIZE``, ``MPI.APPNUM``,
    ...), which MPI caches on ``MPI_COMM_WORLD`` only. Returns that object.
    """
    from mpi4py import MPI

    if not _ORIGINAL_WORLD:
        _ORIGINAL_WORLD.append(MPI.COMM_WORLD)
    world = _world_class()(comm)
    MPI.COMM_WORLD = world  # type: ignore[misc]  # the point: later lookups see it
    return world


def run_program(
    args: Sequence[str],
    order: ArrayLike | None = None,
    collective: str = "allreduce",
    algorithm: str = "ring",
    *,
    probe_options: Mapping[str, Any] | None = None,
    on_reorder: Callable[[MPI.Intracomm, SolveResult | None], None] | None = None,
    share_result: bool = True,
    **solve_options: Any,
) -> Any:
    """Run ``[pyfile | -m mod | -c cmd] arg ...`` with a reordered ``MPI.COMM_WORLD``.

    Collective over ``MPI_COMM_WORLD``. Obtains the order (``order`` if given,
    else :func:`optimize`), replaces the ``COMM_WORLD`` attribute of the
    ``mpi4py.MPI`` module with the reordered communicator, then runs the program
    with ``runpy`` in this interpreter. An uncaught exception in the program
    aborts the whole job (``MPI_Abort``), as ``python -m mpi4py`` does.

    Parameters
    ----------
    args : sequence of str
        Program and its arguments, as for ``python -m mpi4py``.
    order : array_like of int, optional
        Apply this order instead of measuring.
    collective, algorithm, probe_options, **solve_options
        Passed to :func:`optimize`.
    on_reorder : callable, optional
        Called as ``on_reorder(comm, result)`` with the reordered communicator
        and the :class:`~rankopt.SolveResult` (``None`` when ``order`` was
        given) before the program starts (e.g. to save the order or print the
        report); an exception in it aborts the job.
    share_result : bool, default True
        With False the result reaches the root only (``None`` on the others,
        in ``on_reorder`` and returned): the other ranks receive the order
        alone and do not import the solvers to read a
        :class:`~rankopt.SolveResult` (about 0.1 s of CPU on each rank, much
        of a cached launch's start-up when ranks share cores).

    Returns
    -------
    SolveResult or None
        The result used (None when ``order`` was given).

    Raises
    ------
    RankoptInputError, RankoptMPIError
        Raised alike on every rank when the order cannot be obtained or applied;
        the program is not started. Any other exception aborts the job.

    Notes
    -----
    What sees the new numbering: every Python lookup of ``MPI.COMM_WORLD`` made
    after the replacement -- ``from mpi4py import MPI; MPI.COMM_WORLD``,
    ``from mpi4py.MPI import COMM_WORLD`` at the program's import time,
    ``mpi4py.futures``, ``mpi4py.util``. What does not: C, C++ or Cython code that
    uses the C constant ``MPI_COMM_WORLD`` (e.g. a library initialised with its
    own default communicator), objects created before the replacement, and
    launcher environment variables (``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``),
    which keep the launch numbering. ``MPI.COMM_WORLD`` is then an ordinary
    communicator of a subclass of ``MPI.Intracomm``: ``Get_attr`` of the
    predefined attributes (``MPI.TAG_UB``, ``MPI.UNIVERSE_SIZE``, ``MPI.APPNUM``;
    MPI caches them on the real world only) is answered from the real world, but
    C code reading them from the new communicator finds nothing; ``type(comm) is
    MPI.Intracomm`` is false; ``Free()`` on it is legal. Errors abort through the
    real world (:func:`original_world`).
    """
    from mpi4py import MPI
    from mpi4py.run import run_command_line, set_abort_status

    if not args:
        raise RankoptInputError("`args` must name a program: pyfile | -m mod | -c cmd.")
    world = original_world()
    result = None
    try:
        if order is None:
            root = solve_options.pop("root", 0)
            comm, result = _optimize(
                world,
                collective,
                algorithm,
                root,
                probe_options,
                bool(solve_options.pop("progress", False)),
                share_result,
                solve_options,  # this call's own keywords: popping them is safe
                trial=solve_options.pop("direction_trial", True),
            )
        else:
            comm = reorder(world, order)
    except (RankoptInputError, RankoptMPIError):
        raise  # raised alike on every rank: no abort needed
    except BaseException as exc:
        set_abort_status(exc)
        raise
    try:
        if on_reorder is not None:
            on_reorder(comm, result)
    except BaseException as exc:
        set_abort_status(exc)
        raise
    world_now = replace_world(comm)
    assert MPI.COMM_WORLD is world_now
    try:
        run_command_line(list(args))
    except BaseException as exc:
        set_abort_status(exc)
        raise
    return result
