"""The result of a probe: measured latency and bandwidth matrices, and where they came from.

Contents
--------
Measurement
    Frozen dataclass with the matrices, their spreads, host names, counts,
    timestamps and the probe's parameters; ``save`` writes an ``.npz`` file.
load_measurement
    Read such a file back (no pickle).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._files import atomic_write, hierarchy_arrays, load_npz
from rankopt._validation import RankoptInputError, check_host_names

__all__ = ["Measurement", "load_measurement"]

FORMAT = "rankopt.measurement/1"
_REQUIRED = ("latency", "hosts")


def _frozen(a: ArrayLike | None, dtype: type, name: str = "array") -> NDArray[Any] | None:
    """A read-only copy as ``dtype``; booleans, complex, text and dates are refused.

    Counts (``dtype`` int64) must be finite, whole and non-negative: a NaN
    count would otherwise be cast to an arbitrary integer.
    """
    if a is None:
        return None
    raw = np.asarray(a)
    if raw.dtype.kind not in "iuf":
        raise RankoptInputError(
            f"`{name}` must hold real numbers; got dtype {raw.dtype} instead"
            + (" (the imaginary part would be lost)." if raw.dtype.kind == "c" else ".")
        )
    if dtype is np.int64 and raw.dtype.kind == "f":
        bad = ~np.isfinite(raw) | (raw != np.round(raw))
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise RankoptInputError(
                f"`{name}` must hold whole numbers of samples; {name}{list(where)} is "
                f"{raw[where]!r}."
            )
    if dtype is np.int64 and raw.size and np.min(raw) < 0:
        raise RankoptInputError(f"`{name}` must hold counts >= 0; got {np.min(raw)!r}.")
    out: NDArray[Any] = np.array(raw, dtype=dtype, copy=True, order="C")
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class Measurement:
    """Latency and bandwidth between every pair of processes, as measured by a probe.

    Parameters
    ----------
    latency : array_like, shape (n, n)
        ``latency[i, j]``: one-way latency from ``i`` to ``j`` in seconds
        (median round-trip time of ping-pongs started by ``i``, halved).
        Zero diagonal.
    bandwidth : array_like, shape (n, n), optional
        ``bandwidth[i, j]``: point-to-point bandwidth from ``i`` to ``j`` in
        bytes/s (median over transfers); ``None`` when the bandwidth phase
        was skipped. Zero diagonal.
    hosts : sequence of str
        Host name of every process (index = rank in the probed group).
    latency_spread, bandwidth_spread : array_like, shape (n, n), optional
        Median absolute deviation of the samples behind each entry (same
        unit as the entry). Zeros when not given.
    pair_counts, bandwidth_counts : array_like of int, shape (n, n), optional
        How many times each direction was measured in the latency and the
        bandwidth phase (a complete probe measures every direction once).
    started_at, finished_at : float
        Unix times at which the probe started and finished.
    backend : str
        Engine that produced the measurement (``"mpi"``, ``"gloo"``, ...).
    parameters : mapping
        The probe's settings and schedule sizes (JSON-serialisable values).

    See Also
    --------
    load_measurement : read a saved measurement.
    rankopt.probe.mpi.measure, rankopt.probe.torch.measure : take one.

    Notes
    -----
    The object is immutable (arrays are read-only). ``rankopt.solve`` accepts
    it in place of a latency matrix: it reads ``latency`` and ``bandwidth``.

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt import Measurement
    >>> m = Measurement(latency=np.array([[0.0, 2e-6], [3e-6, 0.0]]), bandwidth=None,
    ...                 hosts=("a", "a"))
    >>> m.n, m.host_groups().tolist(), m.ranks_per_host()
    (2, [0, 0], {'a': 2})
    """

    latency: NDArray[np.float64]
    bandwidth: NDArray[np.float64] | None
    hosts: tuple[str, ...]
    latency_spread: NDArray[np.float64] | None = None
    bandwidth_spread: NDArray[np.float64] | None = None
    pair_counts: NDArray[np.int64] | None = None
    bandwidth_counts: NDArray[np.int64] | None = None
    started_at: float = 0.0
    finished_at: float = 0.0
    backend: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        lat = _frozen(self.latency, np.float64, "latency")
        if lat is None or lat.ndim != 2 or lat.shape[0] != lat.shape[1]:
            raise RankoptInputError(
                f"`latency` must be a square matrix; got shape {np.shape(self.latency)} instead."
            )
        n = lat.shape[0]
        set_(self, "latency", lat)
        set_(self, "hosts", check_host_names(self.hosts, n, "hosts"))
        has_bw = self.bandwidth is not None
        for name, dtype, default in (
            ("bandwidth", np.float64, None),
            ("latency_spread", np.float64, np.zeros((n, n))),
            ("bandwidth_spread", np.float64, np.zeros((n, n)) if has_bw else None),
            ("pair_counts", np.int64, None),
            ("bandwidth_counts", np.int64, None),
        ):
            value = getattr(self, name)
            arr = _frozen(default if value is None else value, dtype, name)
            if arr is not None and arr.shape != (n, n):
                raise RankoptInputError(
                    f"`{name}` must have shape ({n}, {n}) like `latency`; got {arr.shape} instead."
                )
            set_(self, name, arr)
        set_(self, "started_at", float(self.started_at))
        set_(self, "finished_at", float(self.finished_at))
        set_(self, "backend", str(self.backend))
        if not isinstance(self.parameters, Mapping):
            raise RankoptInputError(
                f"`parameters` must be a mapping of the probe's settings; got "
                f"{type(self.parameters).__name__} instead."
            )
        set_(self, "parameters", dict(self.parameters))

    @property
    def n(self) -> int:
        """Number of processes."""
        return int(self.latency.shape[0])

    @property
    def duration(self) -> float:
        """Seconds the probe took."""
        return self.finished_at - self.started_at

    def host_groups(self) -> NDArray[np.int64]:
        """Host label of every process: hosts numbered in order of first appearance.

        Processes with equal labels share a host (same host name), so later
        steps can order whole nodes or the ranks inside them.

        Examples
        --------
        >>> import numpy as np
        >>> from rankopt import Measurement
        >>> m = Measurement(np.zeros((3, 3)), None, hosts=("n2", "n1", "n2"))
        >>> m.host_groups()
        array([0, 1, 0])
        """
        from rankopt.probe._topology import host_labels

        return host_labels(self.hosts)

    def ranks_per_host(self) -> dict[str, int]:
        """Number of processes on each host, in order of first appearance."""
        counts: dict[str, int] = {}
        for h in self.hosts:
            counts[h] = counts.get(h, 0) + 1
        return counts

    def __repr__(self) -> str:
        bw = "no bandwidth" if self.bandwidth is None else "with bandwidth"
        hosts = len(self.ranks_per_host())
        return (
            f"Measurement(n={self.n}, hosts={hosts}, {bw}, backend={self.backend!r}, "
            f"duration={self.duration:.3g} s)"
        )

    def save(self, path: str | os.PathLike[str], *, network: Any = None) -> Path:
        """Write the measurement to an ``.npz`` file, atomically.

        The arrays are written to a temporary file in the same directory that
        then replaces ``path``, so a reader never sees a partial file.

        Parameters
        ----------
        path : str or path-like
            Destination; written as given (no suffix is added).
        network : rankopt.Network, optional
            The network inferred from this measurement: its hierarchy
            (``groups``, levels x n) and uplinks (``uplinks``, levels x
            groups, NaN-padded) are stored too, and
            :func:`rankopt.load_network` uses them instead of inferring again.

        Returns
        -------
        pathlib.Path
            The path written.

        Notes
        -----
        Arrays: ``latency``, ``bandwidth`` (absent when not measured),
        ``hosts`` (unicode), ``latency_spread``, ``bandwidth_spread``,
        ``pair_counts``, ``bandwidth_counts``, ``timestamps`` (start, end),
        ``backend``, ``parameters`` (a JSON string) and ``format``. No pickled
        objects, so :func:`numpy.load` reads it with ``allow_pickle=False``.

        Examples
        --------
        >>> import numpy as np, tempfile, os
        >>> from rankopt import Measurement, load_measurement
        >>> m = Measurement(np.array([[0.0, 1e-6], [1e-6, 0.0]]), None, ("a", "b"))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = m.save(os.path.join(d, "net.npz"))
        ...     load_measurement(p).hosts
        ('a', 'b')
        """
        path = Path(os.fspath(path))
        arrays: dict[str, Any] = {
            "format": np.array(FORMAT),
            "latency": self.latency,
            "hosts": np.array(self.hosts, dtype=np.str_).reshape(self.n),
            "latency_spread": self.latency_spread,
            "timestamps": np.array([self.started_at, self.finished_at]),
            "backend": np.array(self.backend),
            "parameters": np.array(json.dumps(self.parameters, sort_keys=True)),
        }
        for name in ("bandwidth", "bandwidth_spread", "pair_counts", "bandwidth_counts"):
            value = getattr(self, name)
            if value is not None:
                arrays[name] = value
        if network is not None and network.groups:
            arrays.update(hierarchy_arrays(network.groups, network.uplinks))
        return atomic_write(path, lambda fh: np.savez(fh, **arrays), what="measurement file")


def load_measurement(path: str | os.PathLike[str]) -> Measurement:
    """Read a measurement written by :meth:`Measurement.save`.

    Parameters
    ----------
    path : str or path-like
        An ``.npz`` file with at least the arrays ``latency`` and ``hosts``.

    Returns
    -------
    Measurement

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    RankoptInputError
        If the file is not a regular file (a FIFO, a directory), not an
        ``.npz`` archive (truncated or corrupt), holds pickled objects, would
        expand past the size limits of :mod:`rankopt._files`, or lacks a
        required array; the message names the file and the array.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from rankopt import load_measurement
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "m.npz")
    ...     np.savez(p, latency=np.zeros((2, 2)), hosts=np.array(["a", "b"]))
    ...     load_measurement(p).n
    2
    """
    name = os.fspath(path)
    return measurement_from_arrays(load_npz(name, what="measurement file"), name)


def measurement_from_arrays(arrays: Mapping[str, Any], name: str) -> Measurement:
    """The :class:`Measurement` held by the arrays of an ``.npz`` file already read.

    ``name`` is the file, for the errors (those of :func:`load_measurement`).
    """
    for key in _REQUIRED:
        if key not in arrays:
            raise RankoptInputError(
                f"{name}: missing array {key!r} (found: {', '.join(sorted(arrays)) or 'none'})."
            )
    hosts = arrays["hosts"]
    if hosts.dtype.kind not in "US":
        raise RankoptInputError(f"{name}: array 'hosts' must hold strings; got {hosts.dtype}.")
    stamps = arrays.get("timestamps", np.zeros(2))
    if stamps.shape != (2,) or stamps.dtype.kind not in "iuf":
        raise RankoptInputError(
            f"{name}: array 'timestamps' must hold 2 numbers (start, end); "
            f"got {stamps.dtype} of shape {stamps.shape}."
        )
    params = arrays.get("parameters")
    try:
        parameters = json.loads(str(params)) if params is not None else {}
    except json.JSONDecodeError as exc:
        raise RankoptInputError(f"{name}: array 'parameters' is not JSON ({exc}).") from None
    try:
        return Measurement(
            latency=arrays["latency"],
            bandwidth=arrays.get("bandwidth"),
            hosts=tuple(str(h) for h in np.atleast_1d(hosts)),
            latency_spread=arrays.get("latency_spread"),
            bandwidth_spread=arrays.get("bandwidth_spread"),
            pair_counts=arrays.get("pair_counts"),
            bandwidth_counts=arrays.get("bandwidth_counts"),
            started_at=float(stamps[0]),
            finished_at=float(stamps[1]),
            backend=str(arrays.get("backend", "")),
            parameters=parameters,
        )
    except RankoptInputError as exc:
        raise RankoptInputError(f"{name}: {exc}") from None
