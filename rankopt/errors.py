"""rankopt's exceptions: one base class, each error also a standard Python error.

``except rankopt.RankoptError`` catches every error rankopt raises on purpose;
each class also derives from the builtin a caller would expect (bad input is
a ``ValueError``, a timeout or a failed peer a ``RuntimeError``, a file that
cannot be written an ``OSError``), so existing handlers keep working.

=========================  =========================================  ===============
class                      raised for                                 also a
=========================  =========================================  ===============
``RankoptInputError``      bad arguments, matrices, files' contents   ``ValueError``
``RankoptFileError``       a path that is not a regular file, limits  ``OSError``
``ProbeTimeoutError``      a probe peer that did not answer           ``RuntimeError``
``RankoptMPIError``        an MPI adapter step failed on some rank    ``RuntimeError``
``LaunchError``            ``rankopt run`` could not find an order    ``RuntimeError``
``ShimBuildError``         the PMPI shim could not be built           ``RuntimeError``
``TestbedError``           the emulated testbed cannot run            ``RuntimeError``
=========================  =========================================  ===============
"""

from __future__ import annotations

__all__ = ["RankoptError"]


class RankoptError(Exception):
    """Base class of every exception rankopt raises on purpose."""
