"""rankopt's exceptions, all in this one module: one base class, each also a standard error.

``except rankopt.RankoptError`` catches every error rankopt raises on purpose;
each class also derives from the builtin a caller would expect (bad input is
a ``ValueError``, a timeout or a failed peer a ``RuntimeError``, a file that
cannot be written an ``OSError``), so existing handlers keep working. The
modules that raise them re-export them under their old homes too
(``rankopt.probe.ProbeTimeoutError``, ``rankopt.adapters.mpi.RankoptMPIError``...).

=========================  =========================================  ===============
class                      raised for                                 also a
=========================  =========================================  ===============
``RankoptInputError``      bad arguments, matrices, files' contents   ``ValueError``
``RankoptLimitError``      a size-like input above its bound          ``ValueError``
``RankoptFileError``       a path that is not a regular file, limits  ``OSError``
``ProbeTimeoutError``      a probe peer that did not answer           ``RuntimeError``
``RankoptMPIError``        an MPI adapter step failed on some rank    ``RuntimeError``
``RendezvousError``        a torch.distributed rendezvous timed out   ``RuntimeError``
``LaunchError``            ``rankopt run`` could not find an order    ``RuntimeError``
``ShimBuildError``         the PMPI shim could not be built           ``RuntimeError``
``TestbedError``           the emulated testbed cannot run            ``RuntimeError``
=========================  =========================================  ===============
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "RankoptError",
    "RankoptInputError",
    "RankoptLimitError",
    "RankoptFileError",
    "ProbeTimeoutError",
    "RankoptMPIError",
    "RendezvousError",
    "LaunchError",
    "ShimBuildError",
    "TestbedError",
]


class RankoptError(Exception):
    """Base class of every exception rankopt raises on purpose."""


class RankoptInputError(RankoptError, ValueError):
    """Raised when an argument passed to rankopt is invalid."""


class RankoptLimitError(RankoptInputError):
    """A size-like input above its bound (:mod:`rankopt._limits`)."""


class RankoptFileError(RankoptInputError, OSError):
    """A file rankopt refuses to write or read: wrong kind, too large, or unreadable.

    Both a :class:`rankopt.RankoptInputError` (a ``ValueError``) and an ``OSError``.
    """


class ProbeTimeoutError(RankoptError, RuntimeError):
    """A peer did not answer within the probe's timeout.

    Raised on every process that is still alive, with the same phase and step.

    Attributes
    ----------
    phase : str
        ``"start"``, ``"latency"``, ``"bandwidth"``, ``"recheck"``,
        ``"sharing"`` or ``"gather"``.
    step : int
        1-based round (latency) or slot (bandwidth) in which it happened.
    pairs : list of (int, int)
        Pairs in which a process waited in vain for its partner.
    ranks : list of int
        Processes that did not report back at all.
    """

    def __init__(
        self,
        message: str,
        *,
        phase: str = "",
        step: int = 0,
        pairs: list[tuple[int, int]] | None = None,
        ranks: list[int] | None = None,
    ) -> None:
        super().__init__(message)
        self.phase = phase
        self.step = step
        self.pairs = list(pairs or [])
        self.ranks = list(ranks or [])


class RankoptMPIError(RankoptError, RuntimeError):
    """Raised identically on every rank when a collective adapter step fails.

    Attributes
    ----------
    silent : list of int
        Ranks that did not answer within the deadline (empty when every rank
        answered). With a silent rank, ``MPI_Finalize`` would wait for it forever,
        so MPI is set to abort the job at exit (``mpi4py.run.set_abort_status``).
    """

    def __init__(self, message: str, *, silent: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.silent = sorted(set(silent))


class RendezvousError(RankoptError, RuntimeError):
    """A torch.distributed rendezvous that did not complete within its timeout."""


class LaunchError(RankoptError, RuntimeError):
    """The launcher could not produce an order (same message on every rank)."""


class ShimBuildError(RankoptError, RuntimeError):
    """The shim cannot be built: no MPI compiler wrapper, or the compile failed."""


class TestbedError(RankoptError, RuntimeError):
    """The testbed cannot be built or used on this machine."""

    __test__ = False  # not a pytest test class
