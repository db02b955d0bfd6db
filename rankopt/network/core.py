"""The network every stage shares: matrices, spreads, hosts, hierarchy and uplinks.

Contents
--------
Network
    Latency and bandwidth with their spreads and sample counts, the host of
    every process, the hierarchy (groups per level, finest first) and the
    capacity of every group's uplink per level, units and provenance. The
    probe, the loaders, :func:`rankopt.synthetic_cloud` and the testbed
    produce it; the models and :func:`rankopt.solve` consume it.
as_network
    Any input ``solve()`` accepts (a matrix, a :class:`~rankopt.Measurement`,
    a :class:`~rankopt.Cloud`, a file path, a Network) as a Network.
load_network
    Read a network file (or a probe / cloud / matrix file) as a Network.
DEFAULT_NBYTES, DDP_BUCKET_BYTES
    The message sizes the entry points assume when the user gives none.

Units are SI: seconds, bytes/s. ``latency[i, j]`` is the one-way latency
from process ``i`` to ``j`` (original ranks), ``bandwidth[i, j]`` the rate of
one transfer from ``i`` to ``j`` alone on the network.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._files import hierarchy_arrays, uplinks_from_array
from rankopt._validation import (
    RANGES,
    STRAGGLE_RANGE,
    RankoptInputError,
    _as_real,
    _check_range,
    _short_repr,
    check_elastic,
    check_groups,
    check_host_names,
    check_straggle,
)
from rankopt.units import format_rate

__all__ = [
    "Network",
    "uplink_directions",
    "loaded_directions",
    "measured_variability",
    "recheck_ways",
    "loaded_ways",
    "uneven_blocks",
    "load_came_and_went",
    "loaded_phase",
    "recheck_rows",
    "VARYING_SLOWDOWN",
    "recheck_disagreement",
    "recheck_readings",
    "RECHECK_DISAGREE",
    "LUCKY_ABOVE",
    "UNEVEN_BELOW",
    "UNEVEN_SIGMAS",
    "as_network",
    "load_network",
    "DEFAULT_NBYTES",
    "DDP_BUCKET_BYTES",
    "FORMAT",
    "INFER_MAX_N",
    "Redraw",
    "redraw",
    "network_digest",
    "network_record",
    "network_from_record",
]


def _check_source(obj: Any, name: str, attrs: tuple[str, ...], kind: str) -> None:
    """Refuse ``obj`` unless it has every one of ``attrs`` (a path, an array or None
    given where a measurement or a cloud is due)."""
    missing = [a for a in attrs if not hasattr(obj, a)]
    if missing:
        raise RankoptInputError(
            f"`{name}` must be {kind}; got {type(obj).__name__} {_short_repr(obj)} "
            f"(it has no `{missing[0]}`)."
        )


#: Message size (bytes) the MPI entry points and ``solve()`` price a network's
#: bandwidth at when none is given: 16 MiB, a large allreduce (gradient or
#: halo exchange), where the order matters most.
DEFAULT_NBYTES = float(16 << 20)
#: torch DDP's default gradient bucket (``bucket_cap_mb=25``): what ``rankopt
#: run`` prices the network at by default.
DDP_BUCKET_BYTES = float(25 << 20)

FORMAT = "rankopt.network/1"

#: Largest n whose hierarchy :meth:`Network.infer_hierarchy` infers (scipy's
#: linkage holds condensed O(n^2) copies; beyond, the hosts are the one level).
INFER_MAX_N = 4096


def _frozen(a: ArrayLike, dtype: Any) -> NDArray[Any]:
    """``a`` as a read-only C-ordered array of ``dtype``: itself when it already is one.

    A read-only array of the right dtype and layout (another Network's, as
    :func:`dataclasses.replace` passes it) is shared, not copied; anything
    else is copied once.
    """
    if (
        isinstance(a, np.ndarray)
        and a.dtype == np.dtype(dtype)
        and a.flags.c_contiguous
        and not a.flags.writeable
    ):
        return a
    out: NDArray[Any] = np.array(a, dtype=dtype, copy=True, order="C")
    out.setflags(write=False)
    return out


def _real(a: ArrayLike, name: str, quantity: str = "latency") -> NDArray[Any]:
    """``a`` as an array of real numbers; complex, bool, dates, strings and objects refused.

    Durations (``timedelta64``) become seconds for latencies (as in
    :func:`rankopt.check_matrix`).
    """
    if isinstance(a, np.ndarray) and a.dtype.kind in "iuf":
        return a
    try:
        arr = np.asarray(a)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise RankoptInputError(f"`{name}` must be a numeric array; {exc}") from None
    return _as_real(arr, name, quantity)


#: The matrices a Network already checked (by ``(id, role)``, while they live): the
#: read-only arrays a derived network (:func:`dataclasses.replace`) passes on are
#: not checked again, entry by entry, at every step of building one.
_CHECKED: weakref.WeakValueDictionary[tuple[int, str], NDArray[Any]] = weakref.WeakValueDictionary()


def _checked(a: Any, name: str, n: int) -> bool:
    """Whether ``a`` is a read-only matrix this module already checked as ``name``."""
    return (
        isinstance(a, np.ndarray)
        and not a.flags.writeable
        and a.shape == (n, n)
        and _CHECKED.get((id(a), name)) is a
    )


def _mark_checked(a: NDArray[Any], name: str) -> NDArray[Any]:
    _CHECKED[(id(a), name)] = a
    return a


def _array(a: ArrayLike | None, dtype: Any, n: int, name: str) -> NDArray[Any] | None:
    """An optional ``(n, n)`` matrix beside ``latency``, checked for what it holds.

    Bandwidths: positive where finite off the diagonal; spreads: finite and
    non-negative off the diagonal; sample counts: whole numbers >= 0.
    """
    if a is None:
        return None
    if _checked(a, name, n):
        return a  # type: ignore[return-value]
    quantity = "bandwidth" if name == "bandwidth" else "latency"
    src = _real(a, name, quantity)
    if src.shape != (n, n):
        raise RankoptInputError(
            f"`{name}` must have shape ({n}, {n}) like `latency`; got {src.shape} instead."
        )
    off = ~np.eye(n, dtype=bool)
    vals = np.asarray(src, dtype=np.float64)
    if name.endswith("_spread"):
        bad = off & ~(np.isfinite(vals) & (vals >= 0))
        if bad.any():
            i, j = (int(x) for x in np.argwhere(bad)[0])
            raise RankoptInputError(
                f"`{name}` must be finite and non-negative off the diagonal (a median "
                f"absolute deviation); {name}[{i}, {j}] is {vals[i, j]!r}."
            )
    elif name.endswith("_samples"):
        bad = off & ~(np.isfinite(vals) & (vals >= 0) & (vals == np.floor(vals)) & (vals < 2**62))
        if bad.any():
            i, j = (int(x) for x in np.argwhere(bad)[0])
            raise RankoptInputError(
                f"`{name}` must hold whole numbers of samples >= 0 off the diagonal; "
                f"{name}[{i}, {j}] is {vals[i, j]!r}."
            )
        if src.dtype.kind == "f":
            src = np.where(off, vals, 0.0)
    out = _frozen(src, dtype)
    if name == "bandwidth":
        out = _in_range(out, name)
    out.setflags(write=False)
    return _mark_checked(out, name)


def _in_range(arr: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    """``arr`` with a zero diagonal (it is ignored), every other entry in its valid range.

    Missing entries (NaN) are kept: :func:`rankopt.solve` fills them under its
    ``nan`` policy. Out of range (inf, negative, a unit mistake) is an error
    naming the entry (:data:`rankopt._validation.RANGES`).
    """
    if np.any(np.diagonal(arr) != 0):
        arr = arr.copy()
        np.fill_diagonal(arr, 0.0)
        arr.setflags(write=False)
    _check_range(arr, name, RANGES[name])
    return arr


def _frozen_levels(groups: Any, n: int) -> tuple[NDArray[np.int64], ...]:
    if groups is None or (isinstance(groups, Sequence) and len(groups) == 0):
        return ()
    out = []
    for lab in check_groups(groups, n):
        lab = np.ascontiguousarray(lab, dtype=np.int64)
        lab.setflags(write=False)
        out.append(lab)
    return tuple(out)


def _check_uplink_level(u: Any, lab: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    """One level's uplinks as a read-only ``(G,)`` or ``(2, G)`` (out, in) array."""
    g = int(lab.max()) + 1
    arr = np.array(u, dtype=np.float64, copy=True)
    if arr.size == 1:
        arr = np.full(g, float(arr.reshape(-1)[0]))
    if arr.shape == (2, g) and np.array_equal(arr[0], arr[1]):
        arr = arr[0].copy()
    if arr.shape not in ((g,), (2, g)):
        raise RankoptInputError(
            f"`uplinks` level {k} must give one rate per group ({g}), or (out, in) rates "
            f"of shape (2, {g}); got shape {arr.shape}."
        )
    if not np.all(arr > 0) or np.any(np.isnan(arr)):
        bad = np.argwhere(~(arr > 0))[0]
        where = f"group {int(bad[-1])}" + ("" if arr.ndim == 1 else (" out", " in")[int(bad[0])])
        raise RankoptInputError(
            f"`uplinks` must be positive; level {k} {where} is {float(arr[tuple(bad)])!r}."
        )
    arr.setflags(write=False)
    return arr


def uplink_directions(u: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(out, in)`` capacities of one level's uplinks, given as ``(G,)`` or ``(2, G)``.

    Examples
    --------
    >>> [x.tolist() for x in uplink_directions([3.0, 4.0])]
    [[3.0, 4.0], [3.0, 4.0]]
    >>> [x.tolist() for x in uplink_directions([[3.0, 4.0], [5.0, 6.0]])]
    [[3.0, 4.0], [5.0, 6.0]]
    """
    arr = np.asarray(u, dtype=np.float64)
    if arr.ndim == 2:
        return arr[0], arr[1]
    return arr, arr


def loaded_directions(u: ArrayLike) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Which of one level's uplinks carry another tenant's load, out and in.

    An uplink is loaded where one transfer got below
    :data:`rankopt.probe.sharing.LOADED_BELOW` of the fastest finite uplink of
    its level, either direction (a narrower uplink reads the same).

    Examples
    --------
    >>> [x.tolist() for x in loaded_directions([[10.0, 30.0], [30.0, 20.0]])]
    [[True, False], [False, True]]
    """
    from rankopt.probe.sharing import LOADED_BELOW

    out, inn = uplink_directions(u)
    both = np.concatenate([out, inn])
    both = both[np.isfinite(both) & (both > 0)]
    if both.size < 2:
        return np.zeros(out.shape, dtype=bool), np.zeros(inn.shape, dtype=bool)
    limit = LOADED_BELOW * float(both.max())
    return out < limit, inn < limit


@dataclass(frozen=True, eq=False)
class Network:
    """A measured, loaded or synthetic network, indexed by original rank.

    Parameters
    ----------
    latency : array_like (n, n)
        One-way latency in seconds.
    bandwidth : array_like (n, n), optional
        Pair bandwidth in bytes/s (the rate of one transfer alone).
    latency_spread, bandwidth_spread : array_like (n, n), optional
        Median absolute deviation of the samples behind each entry.
    latency_samples, bandwidth_samples : array_like of int (n, n), optional
        How many samples each entry is the median of.
    hosts : sequence of str, optional
        Host name of every process.
    groups : sequence of array_like (n,), optional
        Group labels per level, finest first (hosts first when ``hosts`` is
        known), each level nested in the next.
    uplinks : sequence of array_like, optional
        One entry per level of ``groups``: the capacity (bytes/s) of every
        group's uplink (groups in order of their sorted labels), either one
        rate per group for both directions, shape ``(G,)``, or per direction,
        shape ``(2, G)``: row 0 out of the group, row 1 into it. Another
        tenant's traffic loads one direction of an uplink; a probe reports
        both (:func:`rankopt.probe.hierarchy.infer_uplinks`).
    source : str
        Where the numbers came from (``"probe:mpi"``, ``"cloud"``,
        ``"file:net.csv"``, ``"matrix"``...).
    provenance : mapping
        Free-form facts of the source (probe settings, how the hierarchy was
        found), JSON-serialisable.

    See Also
    --------
    rankopt.Network.from_measurement, rankopt.Network.from_cloud,
    rankopt.Network.from_matrices : the constructors that infer the hierarchy.
    as_network : what ``solve()`` calls on its first argument.

    Notes
    -----
    The object is immutable; :meth:`with_hierarchy` returns a copy with other
    groups or uplinks. Matrices are copied once into read-only float64
    arrays; a matrix that already is one (another Network's, a read-only
    memory map) is shared, not copied. Above :data:`INFER_MAX_N` processes
    the hierarchy is not inferred (it costs :math:`O(n^2)` memory several
    times over), and above
    :data:`rankopt.models.robust.INTERVAL_MAX_N` no speedup interval is drawn; for very large jobs see :class:`rankopt.HierarchicalNetwork`. ``solve(network)`` with no objective prices the
    contention model when the network has bandwidth and uplinks
    (:meth:`default_model`).

    Examples
    --------
    Two racks of two hosts that differ only in bandwidth, launched interleaved:

    >>> import numpy as np, rankopt
    >>> rack = np.array([0, 1, 0, 1])
    >>> bw = np.where(rack[:, None] == rack[None, :], 100e6, 20e6)
    >>> net = rankopt.Network.from_matrices(np.full((4, 4), 30e-6), bw,
    ...                                     hosts=["a", "b", "c", "d"])
    >>> net.level_sizes()
    [[1, 1, 1, 1], [2, 2]]
    >>> [u.tolist() for u in net.uplinks]
    [[100000000.0, 100000000.0, 100000000.0, 100000000.0], [20000000.0, 20000000.0]]
    """

    latency: NDArray[np.float64]
    bandwidth: NDArray[np.float64] | None = None
    latency_spread: NDArray[np.float64] | None = None
    bandwidth_spread: NDArray[np.float64] | None = None
    latency_samples: NDArray[np.int64] | None = None
    bandwidth_samples: NDArray[np.int64] | None = None
    hosts: tuple[str, ...] | None = None
    groups: tuple[NDArray[np.int64], ...] = ()
    uplinks: tuple[NDArray[np.float64], ...] = ()
    source: str = "matrix"
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        shape = np.shape(self.latency) if isinstance(self.latency, np.ndarray) else ()
        if len(shape) == 2 and _checked(self.latency, "latency", shape[0]):
            lat = self.latency  # another network's, checked when it was built
        else:
            lat = _frozen(_real(self.latency, "latency"), np.float64)
            if lat.ndim != 2 or lat.shape[0] != lat.shape[1] or lat.shape[0] < 2:
                raise RankoptInputError(
                    f"`latency` must be a square matrix of at least 2 processes; got shape "
                    f"{lat.shape} instead."
                )
            lat = _mark_checked(_in_range(lat, "latency"), "latency")
        n = lat.shape[0]
        set_(self, "latency", lat)
        set_(self, "bandwidth", _array(self.bandwidth, np.float64, n, "bandwidth"))
        set_(self, "latency_spread", _array(self.latency_spread, np.float64, n, "latency_spread"))
        set_(
            self,
            "bandwidth_spread",
            _array(self.bandwidth_spread, np.float64, n, "bandwidth_spread"),
        )
        set_(self, "latency_samples", _array(self.latency_samples, np.int64, n, "latency_samples"))
        set_(
            self,
            "bandwidth_samples",
            _array(self.bandwidth_samples, np.int64, n, "bandwidth_samples"),
        )
        if self.hosts is not None:
            hosts = check_host_names(self.hosts, None, "hosts")
            if len(hosts) != n:
                raise RankoptInputError(
                    f"`hosts` must name the host of each of the {n} processes; "
                    f"got {len(hosts)} names instead."
                )
            set_(self, "hosts", hosts)
        levels = _frozen_levels(self.groups, n)
        set_(self, "groups", levels)
        ups = tuple(
            _check_uplink_level(u, lab, k)
            for k, (u, lab) in enumerate(zip(self.uplinks, levels, strict=False))
        )
        if self.uplinks and len(self.uplinks) != len(levels):
            raise RankoptInputError(
                f"`uplinks` must give one entry per level of `groups` ({len(levels)}); "
                f"got {len(self.uplinks)}."
            )
        set_(self, "uplinks", ups)
        set_(self, "source", str(self.source))
        set_(self, "provenance", dict(self.provenance))

    # ------------------------------------------------------------------ shape
    @property
    def n(self) -> int:
        """Number of processes."""
        return int(self.latency.shape[0])

    @property
    def has_uplinks(self) -> bool:
        """Whether every level of the hierarchy has its uplink capacities."""
        return bool(self.groups) and len(self.uplinks) == len(self.groups)

    @property
    def straggle(self) -> float:
        """How transfers share an uplink: ``K`` from one group into one get ``uplink / K**straggle``.

        ``provenance["straggle"]``: the probe measures it from transfers that
        share an uplink (the slowest of them against one alone,
        :func:`rankopt.probe.sharing.straggle_exponent`); 1 (an even split)
        when nothing was measured. The contention model prices with it: a
        transfer crowded at its two ends by ``K_out`` and ``K_in`` transfers
        is crowded at both by ``c = min(K_out, K_in)`` and gets ``uplink /
        (K_out * c**(straggle - 1))`` of the uplink out (and the like in), so
        one whose other end is not crowded gets its fair share
        (:attr:`rankopt.models.network.NetworkArrays.straggle`).
        """
        value = self.provenance.get("straggle")
        return 1.0 if value is None else check_straggle(value)

    @property
    def straggle_range(self) -> tuple[float, float]:
        """The values of :attr:`straggle` the probe cannot tell apart: ``(lo, hi)``.

        ``provenance["straggle_range"]``: the exponents the sharing test's
        quartile steps read (:func:`rankopt.probe.sharing.straggle_span`),
        widened to hold :attr:`straggle`; where the test ran but read no shared
        limit (:attr:`straggle` 1), :data:`~rankopt._validation.UNREAD_STRAGGLE_RANGE`;
        ``(straggle, straggle)`` when the probe gave none. Another tenant's load that came and went during the
        test makes it wide. The draws behind a modelled speedup's interval
        (and the robust objective) take every value in it.
        """
        s = self.straggle
        value = self.provenance.get("straggle_range")
        if value is None:
            return (s, s)
        try:
            lo, hi = value
        except (TypeError, ValueError):
            raise RankoptInputError(
                f"`straggle_range` must be two numbers (lo, hi); got {value!r}."
            ) from None
        return (min(check_straggle(lo), s), max(check_straggle(hi), s))

    @property
    def elastic_reading(self) -> float | None:
        """What the probe's sharing test across a loaded uplink read, -1..1, or None.

        ``provenance["elastic"]`` (:func:`rankopt.probe.sharing.elastic_share`):
        how ``K`` transfers split the most loaded uplink, against how they
        split an unloaded one. 1: the load yielded to them as TCP flows do;
        0: it kept its rate (paced traffic); below 0: the transfers lost more
        than an even split of what one alone got, which only
        congestion-controlled load can do to short transfers.
        """
        value = self.provenance.get("elastic")
        return None if value is None else check_elastic(value, reading=True)

    @property
    def elastic_range(self) -> tuple[float, float]:
        """The values of :attr:`elastic` the probe cannot tell apart: ``(lo, hi)``.

        A reading below 0 tells that the load is congestion-controlled, not
        how much of it yields to a collective's long, back-to-back transfers
        (on the testbed, with readings of -0.09 to -0.30, rings beside such
        load ran anywhere from what ``elastic`` 0 to ``elastic`` 1 priced):
        ``(0, 1)``. Else the reading itself, or ``(0, 0)`` when nothing was
        read.
        """
        r = self.elastic_reading
        if r is None:
            return (0.0, 0.0)
        return (0.0, 1.0) if r < 0.0 else (r, r)

    @property
    def elastic(self) -> float:
        """How much of another tenant's load on an uplink yields to more transfers, 0..1.

        The model's value, from the probe's :attr:`elastic_reading`: the
        reading itself when it is 0..1, the middle of :attr:`elastic_range`
        when it is below 0 (the draws behind a modelled speedup's interval
        span the whole range), 0 (the load keeps its rate, as paced traffic
        does) when nothing was read. With ``m`` such flows on an uplink
        (:func:`rankopt.models.network.tenant_flows`) the contention model
        gives ``K`` transfers ``uplink * (1 + m) / (K * c**(straggle - 1) + m)``
        each, not ``uplink / (K * c**(straggle - 1))`` (``c`` as in
        :attr:`straggle`).
        """
        lo, hi = self.elastic_range
        return 0.5 * (lo + hi)

    @property
    def measured(self) -> bool:
        """Whether the entries carry spreads (a probe's medians) to judge gains by."""
        return self.latency_spread is not None or self.bandwidth_spread is not None

    def level_sizes(self) -> list[list[int]]:
        """Sizes of the groups of every level, finest first (groups in label order)."""
        return [np.bincount(lab).tolist() for lab in self.groups]

    # ----------------------------------------------------------- constructors
    @classmethod
    def from_matrices(
        cls,
        latency: ArrayLike,
        bandwidth: ArrayLike | None = None,
        *,
        hosts: Sequence[str] | None = None,
        groups: Any = None,
        uplinks: Any = None,
        infer: bool = True,
        source: str = "matrix",
        **kwargs: Any,
    ) -> Network:
        """A network from matrices; the hierarchy is inferred unless given.

        With ``infer`` and no ``groups``, :meth:`infer_hierarchy` finds the
        levels (and, with bandwidth, their uplinks). Extra keyword arguments
        (spreads, samples, provenance) are passed to the constructor.
        """
        net = cls(  # the constructor converts and checks the matrices (complex, bool refused)
            latency=latency,  # type: ignore[arg-type]
            bandwidth=bandwidth,  # type: ignore[arg-type]
            hosts=None if hosts is None else tuple(hosts),
            groups=() if groups is None else groups,
            uplinks=() if uplinks is None else uplinks,
            source=source,
            **kwargs,
        )
        if groups is None and infer:
            return net.infer_hierarchy()
        if groups is not None and uplinks is None and net.bandwidth is not None:
            return net.with_hierarchy(net.groups)
        return net

    @classmethod
    def from_measurement(cls, measurement: Any, *, infer: bool = True) -> Network:
        """The network a probe measured, hierarchy and uplinks inferred.

        Spreads and sample counts come from the measurement (samples = times
        measured x repeats per time); the probe's settings go to ``provenance``.
        """
        _check_source(
            measurement,
            "measurement",
            ("latency", "hosts"),
            "a rankopt.Measurement (rankopt.load_measurement(path) reads a probe's .npz)",
        )
        params = dict(getattr(measurement, "parameters", {}) or {})
        lat_rep = int(params.get("repeats", 1) or 1)
        bw_rep = int(params.get("bandwidth_repeats", 1) or 1)
        counts = getattr(measurement, "pair_counts", None)
        bw_counts = getattr(measurement, "bandwidth_counts", None)
        bw = getattr(measurement, "bandwidth", None)
        backend = str(getattr(measurement, "backend", "") or "probe")
        probed_groups = params.get("groups") if infer else None
        kept = _kept_hierarchy(params, measurement) if infer and not probed_groups else None
        net = cls.from_matrices(
            measurement.latency,
            bw,
            hosts=tuple(measurement.hosts),
            infer=infer and not probed_groups and kept is None,
            source=f"probe:{backend}",
            latency_spread=getattr(measurement, "latency_spread", None),
            bandwidth_spread=None if bw is None else getattr(measurement, "bandwidth_spread", None),
            latency_samples=None if counts is None else np.asarray(counts) * lat_rep,
            bandwidth_samples=None if bw_counts is None else np.asarray(bw_counts) * bw_rep,
            provenance={
                "probe": params,
                "duration_s": float(getattr(measurement, "duration", 0)),
                **_sharing_readings(params),
            },
        )
        if probed_groups:
            net = net._with_probed_hierarchy(probed_groups, params.get("uplink_capacity"))
        elif kept is not None:
            net = net.with_hierarchy(kept[0])
            net = replace(net, provenance={**net.provenance, "hierarchy": kept[1]})
        return net._with_recheck()._with_path_rates()._with_typical_ways()

    def kept_hierarchy(self) -> dict[str, Any]:
        """What :meth:`from_measurement` needs to skip inferring this hierarchy again.

        ``{"groups": [...], "how": ...}`` for ``measurement.parameters
        ["inferred_hierarchy"]``: the probe cache stores it with a probe, so a
        later launch on the same machines does not cluster again (average
        linkage on a latency-only probe also imports ``scipy.cluster``, about
        0.3 s at job start), and finds the same groups.
        """
        return {
            "groups": [np.asarray(lab, dtype=np.int64).tolist() for lab in self.groups],
            "how": str(self.provenance.get("hierarchy", "")),
        }

    def _with_path_rates(self) -> Network:
        """Pair rates the probe's own side-by-side transfers slowed, raised to their path's.

        A transfer alone runs at most at the narrowest link on its path: the
        uplinks it leaves and enters at every level where its two processes
        are in different groups (a host's link first). The all-pairs probe
        runs several pairs at once, and when latency does not show the racks
        they share rack uplinks and come out slow: two pairs of one rack pair
        then differ by 3x, and an order that happens to use the slowed one is
        priced (and its draws drawn) as if that pair were slow. A pair
        measured more than :data:`~rankopt.probe.hierarchy.DEFAULT_GAP` times
        below its path's capacity takes that capacity (its spread scaled
        alike); a pair that another tenant's load slowed is slow on its
        uplink too, and keeps its rate. ``provenance["pairs_raised"]`` counts
        them.
        """
        from rankopt.probe.hierarchy import DEFAULT_GAP

        if self.bandwidth is None or not self.has_uplinks:
            return self
        bw = self.bandwidth
        cap = np.full(bw.shape, np.inf)
        for lab, u in zip(self.groups, self.uplinks, strict=True):
            out, into = uplink_directions(u)
            path = np.minimum(out[lab][:, None], into[lab][None, :])
            cap = np.where(lab[:, None] != lab[None, :], np.minimum(cap, path), cap)
        slowed = np.isfinite(cap) & (bw * DEFAULT_GAP < cap) & (bw > 0)
        np.fill_diagonal(slowed, False)
        if not slowed.any():
            return self
        raised = np.where(slowed, cap, bw)
        factor = np.ones(bw.shape)
        factor[slowed] = cap[slowed] / bw[slowed]
        return self._with_pairs_moved(raised, factor, "pairs_raised")

    def _with_pairs_moved(
        self, bandwidth: NDArray[np.float64], factor: NDArray[np.float64], key: str
    ) -> Network:
        """This network with ``bandwidth``, whose pairs ``factor`` moves from the old one;
        their spreads scaled by it, and ``provenance[key]`` counting them."""
        spread = None if self.bandwidth_spread is None else self.bandwidth_spread * factor
        prov = {**self.provenance, key: int(np.count_nonzero(factor != 1.0))}
        return replace(self, bandwidth=bandwidth, bandwidth_spread=spread, provenance=prov)

    def _with_typical_ways(self) -> Network:
        """Pairs of a loaded way that read well above the way's median, brought down to its
        upper quartile.

        Every pair from one group to a sibling group crosses the same two
        uplinks, so where another tenant loads one of them the pairs of the way
        differ by the moment each was measured, not by the pair: beside three
        paced TCP flows out of a rack (emulated racks of 3, 2, 2 and 2 hosts,
        250 Mbit/s uplinks) most pairs from the loaded rack into the rack the
        flows enter read 10.1-10.8 MB/s, and on most probes one or two of them
        12.9-15.8 MB/s, measured while the neighbour's flows had backed off. A
        ring's hop across both loaded uplinks on such a pair is priced by it,
        so the search chose rings whose hop from the one rack into the other
        ran on it: modelled 2.10 and 2.32 s, they ran 2.70 and 2.67 s
        (modelled speedups 2.50x and 2.81x, measured 1.94x and 2.08x), while
        on the same network the rings that met the load on two other pairs
        were priced 2.8 s.

        A pair of a way :func:`loaded_ways` finds (at least three pairs) that
        read more than :data:`LUCKY_ABOVE` times the median of its way's pairs
        takes the way's upper quartile where that is lower, its spread scaled
        alike; the others keep their reading, and ways that are not loaded are
        left alone. The upper quartile, not the median: a ring's transfers,
        long and back to back, ran across such ways at the upper part of the
        probe's readings (9.9 MB/s on a way whose pairs read 6.8-10.1, median
        8.1; 12-14 MB/s from a loaded rack on ways whose pairs read about
        10.5), and over the 29 kept launches whose networks have such pairs
        the modelled speedup came within ±25% of the measured one on 25 (22
        with every reading kept, 24 with the median).
        ``provenance["pairs_lowered"]`` counts them.
        """
        if self.bandwidth is None or not self.groups:
            return self
        ways = loaded_ways(self)
        if not ways:
            return self
        from rankopt.probe.linear import _members

        bw = np.array(self.bandwidth, dtype=np.float64)
        factor = np.ones(bw.shape)
        members: dict[int, dict[int, list[int]]] = {}
        for level, g, h in sorted(ways):
            if level not in members:  # each level's groups split once, not once per way
                members[level] = dict(zip(*_members(np.asarray(self.groups[level])), strict=True))
            block = bw[np.ix_(members[level][g], members[level][h])]
            read = np.isfinite(block) & (block > 0)
            if np.count_nonzero(read) < 3:
                continue
            rates = block[read]
            top = float(np.percentile(rates, 75))
            lucky = read & (block > LUCKY_ABOVE * float(np.median(rates))) & (block > top)
            if lucky.any():
                f = np.ones(block.shape)
                f[lucky] = top / block[lucky]
                way = np.ix_(members[level][g], members[level][h])
                factor[way] = f
                bw[way] = block * f
        if not (factor < 1.0).any():
            return self
        return self._with_pairs_moved(bw, factor, "pairs_lowered")

    def _with_recheck(self) -> Network:
        """Uplinks raised to what the probe's recheck measured alone across them.

        A recheck is one transfer alone in its slot (:func:`recheck_rows`):
        its rate is a lower bound of every uplink it left and entered, which
        the bandwidth phase may have read low when most of a block's pairs ran
        side by side and shared a link.
        """
        rows = recheck_rows(self)
        if not rows or not self.has_uplinks:
            return self
        ups = [np.stack([np.array(d) for d in uplink_directions(u)]) for u in self.uplinks]
        bw = self.bandwidth
        meet = meet_levels(self.groups, self.n)
        for k, (lab, both) in enumerate(zip(self.groups, ups, strict=True)):
            # never above the fastest transfer the bandwidth phase saw across this level:
            # a recheck's own error (an acknowledgement's latency misjudged) stays out
            across = meet > k
            cap = float(np.max(bw[across])) if bw is not None and across.any() else np.inf
            for a, b, r_ab, r_ba in rows:
                if lab[a] != lab[b]:
                    for x, y, rate in ((a, b, min(r_ab, cap)), (b, a, min(r_ba, cap))):
                        both[0, lab[x]] = max(both[0, lab[x]], rate)
                        both[1, lab[y]] = max(both[1, lab[y]], rate)
        return replace(self, uplinks=tuple(ups))

    def _with_probed_hierarchy(self, groups: Sequence[Any], capacity: Any) -> Network:
        """The groups a linear probe found, and its k-flow uplink capacities where measured.

        A level of one group is dropped (as in :meth:`with_hierarchy`); an uplink
        the probe loaded with concurrent flows keeps that measured capacity, the
        others get :func:`rankopt.probe.hierarchy.infer_uplinks`'s single-pair estimate.
        """
        keep = [k for k, lab in enumerate(groups) if int(np.max(lab)) > 0]
        levels = [np.asarray(groups[k], dtype=np.int64) for k in keep]
        net = self.with_hierarchy(levels)
        if capacity and net.uplinks:
            ups = []
            for pos, k in enumerate(keep):
                both = np.stack([np.array(d) for d in uplink_directions(net.uplinks[pos])])
                row = capacity[k] if k < len(capacity) else None
                for g, value in enumerate(row or []):
                    # [out, in] per group (a number, in older probe files: both directions)
                    pair = value if isinstance(value, (list, tuple)) else [value, value]
                    for d, v in enumerate(pair[:2]):
                        if v is not None and np.isfinite(v) and v > 0 and g < both.shape[1]:
                            both[d, g] = float(v)
                ups.append(both)
            net = replace(net, uplinks=tuple(ups))
        prov = dict(net.provenance)
        topology = prov.get("probe", {}).get("topology")
        if prov.get("probe", {}).get("groups_given") and isinstance(topology, dict):
            prov["hierarchy"] = f"topology: {topology.get('source')} (given to the probe)"
        else:
            prov["hierarchy"] = "linear probe"
        prov["hierarchy"] += ", k-flow uplinks" if capacity else ""
        return replace(net, provenance=prov)

    @classmethod
    def from_cloud(cls, cloud: Any) -> Network:
        """A synthetic cloud: its true hierarchy, uplinks from its bandwidth."""
        _check_source(
            cloud,
            "cloud",
            ("latency", "bandwidth", "hosts", "groups"),
            "a rankopt.Cloud (rankopt.synthetic_cloud(...) makes one)",
        )
        net = cls(
            latency=cloud.latency,
            bandwidth=cloud.bandwidth,
            hosts=tuple(cloud.hosts),
            groups=tuple(np.asarray(g, dtype=np.int64) for g in cloud.groups),
            source="cloud",
            provenance={"seed": int(getattr(cloud, "seed", -1))},
        )
        return net.with_hierarchy(net.groups)

    # -------------------------------------------------------------- hierarchy
    def infer_hierarchy(self) -> Network:
        """A copy with the hierarchy inferred from the measured matrices.

        The one rule for every entry point: with bandwidth, single linkage on
        bandwidth (group maxima: transfers that shared a link while being
        probed only ever come out slower), hosts first; latency is then not
        used, since on shared hosts it is noise. Without bandwidth: average
        linkage on latency, hosts first when known. Uplinks come from
        :func:`rankopt.probe.hierarchy.infer_uplinks` when bandwidth is known.

        Above :data:`INFER_MAX_N` processes nothing is inferred (the linkage
        needs several condensed :math:`O(n^2)` copies): the hosts are the one
        level when known, and ``provenance["hierarchy"]`` says so.
        """
        from rankopt.probe.hierarchy import host_labels, infer_hierarchy

        if self.n > INFER_MAX_N:
            levels = [] if self.hosts is None else [host_labels(self.hosts)]
            how = f"not inferred above n = {INFER_MAX_N}" + (": hosts only" if self.hosts else "")
            out = self.with_hierarchy(levels)
            return replace(out, provenance={**out.provenance, "hierarchy": how})
        if self.bandwidth is not None:
            levels = infer_hierarchy(bandwidth=self.bandwidth, hosts=self.hosts, linkage="single")
            how = "bandwidth, single linkage" + (", hosts first" if self.hosts else "")
        else:
            levels = infer_hierarchy(latency=self.latency, hosts=self.hosts)
            how = "latency, average linkage" + (", hosts first" if self.hosts else "")
        out = self.with_hierarchy(levels)
        prov = dict(out.provenance)
        prov["hierarchy"] = how
        return replace(out, provenance=prov)

    def with_hierarchy(self, groups: Any, uplinks: Any = None) -> Network:
        """A copy with these groups; uplinks inferred from bandwidth unless given."""
        levels = _frozen_levels(groups, self.n)
        if uplinks is None:
            # a level of one group is the whole network: no uplink to share
            levels = tuple(lab for lab in levels if int(lab.max()) > 0)
        if uplinks is None and levels and self.bandwidth is not None:
            from rankopt.probe.hierarchy import infer_uplinks

            uplinks = infer_uplinks(self.bandwidth, levels)
        return replace(self, groups=levels, uplinks=() if uplinks is None else tuple(uplinks))

    # ---------------------------------------------------------------- models
    def default_model(self, algorithm: str = "ring", nbytes: float | None = None) -> dict[str, Any]:
        """The model ``solve()`` prices this network with when told nothing.

        * bandwidth and uplinks known: ``"contention"`` at ``nbytes``
          (default :data:`DEFAULT_NBYTES`), with every level's uplinks;
        * bandwidth only: ``"time"`` at ``nbytes`` (default
          :data:`DEFAULT_NBYTES`);
        * latency only: what :func:`rankopt.models.default_objective` picks
          (the ring's latency sum; the latency-only α-β time otherwise).

        Returns the keyword arguments for :func:`rankopt.solve` /
        :func:`rankopt.cost`: ``objective``, ``bandwidth``, ``nbytes``,
        ``groups``, ``uplink_bandwidth`` and (with uplinks) ``straggle`` and
        ``elastic``.
        """
        size = DEFAULT_NBYTES if nbytes is None else float(nbytes)
        if self.bandwidth is not None and self.has_uplinks:
            return {
                "objective": "contention",
                "bandwidth": self.bandwidth,
                "nbytes": size,
                "groups": list(self.groups),
                "uplink_bandwidth": [np.asarray(u) for u in self.uplinks],
                "straggle": self.straggle,
                "elastic": self.elastic,
            }
        if self.bandwidth is not None:
            return {"objective": "time", "bandwidth": self.bandwidth, "nbytes": size}
        return {"objective": None, "nbytes": nbytes}

    # ------------------------------------------------------------------ text
    def describe(self) -> str:
        """One line: size, source, levels with their group sizes and uplinks."""
        parts = [f"{self.n} processes", self.source]
        if self.hosts is not None:
            parts.append(f"{len(set(self.hosts))} hosts")
        parts.append("with bandwidth" if self.bandwidth is not None else "latency only")
        head = ", ".join(parts)
        levels = describe_levels(self.groups, self.uplinks)
        if levels and self.has_uplinks and self.straggle != 1.0:
            levels += (
                f"; K transfers from one group into one group get 1/K^{self.straggle:.2f} "
                "of an uplink each"
            )
        lo, hi = self.elastic_range
        if levels and self.has_uplinks and hi > lo:
            levels += (
                "; other tenants' load is congestion-controlled (yields "
                f"{lo:.0%}-{hi:.0%} to more transfers)"
            )
        elif levels and self.has_uplinks and self.elastic != 0.0:
            levels += f"; other tenants' load yields {self.elastic:.0%} to more transfers"
        return head + ("; levels: " + levels if levels else "; no hierarchy")

    def __repr__(self) -> str:
        return f"Network({self.describe()})"

    # ------------------------------------------------------------------- I/O
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write an ``.npz`` (no pickle): matrices, spreads, hosts, hierarchy, uplinks.

        :func:`load_network` reads it back; :func:`rankopt.load_measurement`
        and ``rankopt solve`` read it too (it carries ``latency`` and
        ``hosts`` under the same names as a probe file). Written to a
        temporary file in the same directory that then replaces ``path``.
        """
        arrays: dict[str, Any] = {
            "format": np.array(FORMAT),
            "latency": self.latency,
            "source": np.array(self.source),
            "provenance": np.array(json.dumps(self.provenance, sort_keys=True, default=str)),
        }
        for name in (
            "bandwidth",
            "latency_spread",
            "bandwidth_spread",
            "latency_samples",
            "bandwidth_samples",
        ):
            value = getattr(self, name)
            if value is not None:
                arrays[name] = value
        if self.hosts is not None:
            arrays["hosts"] = np.array(self.hosts, dtype=np.str_).reshape(self.n)
        arrays.update(hierarchy_arrays(self.groups, self.uplinks))
        return _write_npz(Path(os.fspath(path)), arrays)


def _kept_hierarchy(params: Mapping[str, Any], measurement: Any) -> tuple[list[Any], str] | None:
    """The hierarchy a stored probe carries (:meth:`Network.kept_hierarchy`), if it fits."""
    kept = params.get("inferred_hierarchy")
    if not isinstance(kept, Mapping) or not isinstance(kept.get("groups"), list):
        return None
    n = int(np.asarray(measurement.latency).shape[0])
    groups = kept["groups"]
    if not all(isinstance(g, list) and len(g) == n for g in groups):
        return None
    return groups, str(kept.get("how", ""))


def describe_levels(groups: Sequence[NDArray[np.int64]], uplinks: Sequence[Any] = ()) -> str:
    """``"hosts 8 x 1 (uplink 117 MB/s); 2 groups of 4, 4 (uplink 25 MB/s)"``-style text."""
    out = []
    for k, lab in enumerate(groups):
        sizes = np.bincount(lab)
        if sizes.size > 6:
            uniq = sorted(set(sizes.tolist()))
            size_txt = (
                f"{sizes.size} groups of {uniq[0]}"
                if len(uniq) == 1
                else f"{sizes.size} groups of {uniq[0]}-{uniq[-1]}"
            )
        else:
            size_txt = f"{sizes.size} groups of " + ", ".join(str(int(s)) for s in sizes)
        if k < len(uplinks):
            u_out, u_in = uplink_directions(uplinks[k])
            if u_out is u_in:
                size_txt += f" (uplink {_fmt_span(u_out)})"
            else:
                size_txt += f" (uplink out {_fmt_span(u_out)}, in {_fmt_span(u_in)})"
        out.append(size_txt)
    return "; ".join(out)


def _fmt_span(u: NDArray[np.float64]) -> str:
    lo, hi = float(np.min(u)), float(np.max(u))
    return format_rate(lo) if hi <= 1.05 * lo else f"{format_rate(lo)}-{format_rate(hi)}"


def _write_npz(path: Path, arrays: Mapping[str, Any]) -> Path:
    from rankopt._files import atomic_write

    return atomic_write(path, lambda fh: np.savez(fh, **arrays), what="network file")


def load_network(path: str | os.PathLike[str], *, unit: str | None = None) -> Network:
    """Read a network from a file, the hierarchy inferred when the file has none.

    Reads what :meth:`Network.save` writes, a probe's ``.npz``
    (:func:`rankopt.load_measurement`), a cloud's ``.npz``
    (:meth:`rankopt.Cloud.save`) and latency matrices
    (:func:`rankopt.load_matrix`: ``.npy``, ``.csv``, ``.json``; ``unit`` is
    theirs, seconds by default).
    """
    name = os.fspath(path)
    if str(name).endswith(".npz"):
        from rankopt._files import load_npz

        z = load_npz(name, what="network file")  # regular file, sizes checked, one-line errors
        try:
            return _network_from_arrays(z, name)
        except RankoptInputError as exc:  # the matrices' checks: said with the file
            if name in str(exc):
                raise
            raise type(exc)(f"network file {name!r}: {exc}") from None
    from rankopt.network.io import load_matrix_and_labels

    lat, labels = load_matrix_and_labels(name, unit=unit)
    prov = {} if labels is None else {"labels": list(labels)}
    return Network.from_matrices(lat, source=f"file:{Path(name).name}", provenance=prov)


def _network_from_arrays(z: Mapping[str, Any], name: str) -> Network:
    """The network of a ``.npz`` file's arrays: rankopt's own, a cloud's or a probe's."""
    files = set(z)
    if "format" in files and str(z["format"]) == FORMAT:
        return _network_from_npz(z, name)
    if {"latency", "bandwidth", "groups", "hosts"} <= files and "seed" in files:
        from rankopt.network.cloud import cloud_from_arrays

        return Network.from_cloud(cloud_from_arrays(z, name))
    from rankopt.probe.measurement import measurement_from_arrays

    m = measurement_from_arrays(z, name)  # the arrays read once above
    if {"groups", "uplinks"} <= files:  # the probe stored the hierarchy it inferred
        groups = list(np.atleast_2d(z["groups"]))
        try:
            ups = uplinks_from_array(z["uplinks"], z.get("uplinks_in"))
        except RankoptInputError as exc:
            raise RankoptInputError(f"{name}: {exc}") from None
        net = Network.from_measurement(m, infer=False).with_hierarchy(groups, ups)
        net = replace(net, provenance={**net.provenance, "hierarchy": "stored by the probe"})
        return net._with_path_rates()._with_typical_ways()
    return Network.from_measurement(m)


def _network_from_npz(z: Mapping[str, Any], name: str) -> Network:
    if "latency" not in z:
        raise RankoptInputError(
            f"{name}: missing array 'latency' (found: {', '.join(sorted(z)) or 'none'})."
        )
    try:
        ups = uplinks_from_array(z["uplinks"], z.get("uplinks_in")) if "uplinks" in z else ()
    except RankoptInputError as exc:
        raise RankoptInputError(f"{name}: {exc}") from None
    try:
        prov = json.loads(str(z["provenance"])) if "provenance" in z else {}
    except json.JSONDecodeError:
        prov = {}
    try:
        return Network(
            latency=z["latency"],
            bandwidth=z.get("bandwidth"),
            latency_spread=z.get("latency_spread"),
            bandwidth_spread=z.get("bandwidth_spread"),
            latency_samples=z.get("latency_samples"),
            bandwidth_samples=z.get("bandwidth_samples"),
            hosts=None if "hosts" not in z else tuple(str(h) for h in np.atleast_1d(z["hosts"])),
            groups=() if "groups" not in z else tuple(np.atleast_2d(z["groups"])),
            uplinks=ups,
            source=str(z.get("source", f"file:{Path(name).name}")),
            provenance=prov,
        )
    except RankoptInputError as exc:
        raise RankoptInputError(f"{name}: {exc}") from None


def as_network(obj: Any) -> Network | None:
    """``obj`` as a :class:`Network` when it carries more than a bare matrix, else None.

    A Network is returned as is; a Measurement, a Cloud or a path to an
    ``.npz`` file becomes one (hierarchy inferred); a bare matrix (or a path
    to a matrix file) gives ``None``: ``solve()`` then works on the matrix
    and the keyword arguments it was given.
    """
    if isinstance(obj, Network):
        return obj
    if isinstance(obj, (str, bytes)) or hasattr(obj, "__fspath__"):
        if str(os.fspath(obj)).endswith(".npz"):
            return load_network(obj)
        return None
    if hasattr(obj, "latency") and hasattr(obj, "hosts"):
        if hasattr(obj, "groups") and hasattr(obj, "seed"):
            return Network.from_cloud(obj)
        return Network.from_measurement(obj)
    return None


# --------------------------------------------------------------- uncertainty


def meet_levels(groups: Sequence[NDArray[np.int64]], n: int) -> NDArray[np.int64]:
    """``out[i, j]``: the finest level at which ``i`` and ``j`` share a group.

    ``len(groups)`` when they share none (only the whole network).
    """
    out = np.full((n, n), len(groups), dtype=np.int64)
    for k in range(len(groups) - 1, -1, -1):
        lab = np.asarray(groups[k])
        out[lab[:, None] == lab[None, :]] = k
    return out


#: Entries a block of alike pairs needs for its own spread; smaller blocks pool
#: with every pair of their meet level.
MIN_BLOCK = 6


def alike_blocks(
    groups: Sequence[NDArray[np.int64]], n: int, hosts: Sequence[str] | None = None
) -> NDArray[np.int64]:
    """Label of the block of entries the hierarchy says are alike, per pair.

    Pairs that meet at the same level (:func:`meet_levels`) are alike when
    they cross the same uplinks: across groups of a level above the hosts
    (racks, pods), when ``i``, ``k`` lie in one such group and ``j``, ``l`` in
    another (directions kept: ``bandwidth[i, j]`` is a direction); within one
    group, or across hosts, when they share the group they meet in. Without
    a hierarchy every pair is alike. A rack whose uplink another tenant loads
    is then a block of its own: its slowness is signal, not spread, while
    two pairs inside one rack that differ by noise still count as a tie.

    Examples
    --------
    >>> racks = [np.array([0, 0, 0, 1, 1, 1])]
    >>> b = alike_blocks(racks, 6)
    >>> bool(b[0, 3] == b[1, 4]), bool(b[0, 3] == b[3, 0]), bool(b[0, 1] == b[3, 4])
    (True, False, False)
    >>> bool(b[0, 1] == b[1, 2])
    True
    """
    meet = meet_levels(groups, n)
    if not groups:
        return meet
    levels = [np.asarray(g, dtype=np.int64) for g in groups]
    host_level = hosts is not None and _same_partition(levels[0], hosts)
    # per meet level m, the labels that make two pairs alike: the row's and the
    # column's group one level below (the uplinks crossed), or, within a group,
    # the row's group alone (the column's label stays 0)
    row = np.zeros((len(levels) + 1, n), dtype=np.int64)
    col = np.zeros((len(levels) + 1, n), dtype=np.int64)
    for m in range(len(levels) + 1):
        below = m - 1
        if below >= (1 if host_level else 0):
            row[m] = col[m] = levels[below]
        elif m < len(levels):
            row[m] = levels[m]
    # one int64 per pair, ordered as the (meet, a, b) triples: the same labels as a
    # row-wise unique of the triples, an order of magnitude sooner at n = 1,024
    span = int(max(row.max(), col.max())) + 1
    idx = np.arange(n)
    code = (meet * span + row[meet, idx[:, None]]) * span + col[meet, idx[None, :]]
    top = int(code.max()) + 1
    if top <= max(n * n, 1 << 20):  # the codes index a table: no sort of n^2 entries
        seen = np.zeros(top, dtype=bool)
        seen[code.ravel()] = True
        label = np.cumsum(seen, dtype=np.int64) - 1
        return np.asarray(label[code], dtype=np.int64)
    _, inv = np.unique(code.ravel(), return_inverse=True)
    return np.asarray(inv.reshape(n, n), dtype=np.int64)


def _same_partition(labels: NDArray[np.int64], hosts: Sequence[str]) -> bool:
    pairs = set(zip(labels.tolist(), (str(h) for h in hosts), strict=True))
    return len(pairs) == len(set(labels.tolist())) == len(set(hosts))


def _log_sigma(
    values: NDArray[np.float64],
    spread: NDArray[np.float64] | None,
    samples: NDArray[np.int64] | None,
    meet: NDArray[np.int64],
    blocks: NDArray[np.int64] | None = None,
    *,
    own_only: bool = False,
) -> NDArray[np.float64]:
    """Relative (log-scale) uncertainty of every entry.

    With ``own_only``, only the first part (the entry's own median's standard
    error; 0 without spreads).

    Two parts, added in quadrature: the standard error of the entry's own
    median (``1.4826 * MAD / value / sqrt(samples)``) and the robust spread of
    the entries the hierarchy says are alike: ``1.4826 * MAD(log value)`` over
    that block. The second is what makes two in-rack pairs that differ by
    noise count as a tie.

    ``meet`` is the meet level of every pair (:func:`meet_levels`); with
    ``blocks`` (:func:`alike_blocks`: the same meet level *and* the same
    uplinks crossed), every block of at least :data:`MIN_BLOCK` entries has
    its own spread, smaller ones that of their meet level. A rack whose
    links another tenant loads (all its pairs slower by one factor) is then a
    block of its own: its slowness is signal, not spread.
    """
    n = values.shape[0]
    off = ~np.eye(n, dtype=bool)
    good = off & np.isfinite(values) & (values > 0)
    logv = np.zeros_like(values)
    logv[good] = np.log(values[good])
    sigma = np.zeros_like(values)
    for b in np.unique(meet[good]) if not own_only else ():
        sel = good & (meet == b)
        lv = logv[sel]
        sigma[sel] = 1.4826 * float(np.median(np.abs(lv - np.median(lv))))
    if blocks is not None:  # finer blocks with enough entries for a spread of their own
        for b in np.unique(blocks[good]):
            sel = good & (blocks == b)
            if int(sel.sum()) >= MIN_BLOCK:
                lv = logv[sel]
                sigma[sel] = 1.4826 * float(np.median(np.abs(lv - np.median(lv))))
    if spread is not None:
        cnt = np.ones_like(values) if samples is None else np.maximum(samples, 1)
        rel = np.zeros_like(values)
        rel[good] = 1.4826 * spread[good] / values[good] / np.sqrt(cnt[good])
        sigma = np.sqrt(sigma**2 + rel**2)
    sigma[~good] = 0.0
    return sigma


def recheck_rows(network: Network) -> list[tuple[int, int, float, float]]:
    """The probe's recheck: ``(a, b, rate a -> b, rate b -> a)`` of every pair measured again alone.

    Read from ``provenance["probe"]["recheck"]`` (the all-pairs probe's last
    stage, :func:`rankopt.probe._engine.recheck_pairs`); rows that are not
    two processes of this network and two positive finite rates are left
    out (a stored network's provenance is a file's content).
    """
    probe = network.provenance.get("probe") if network.provenance else None
    rows = probe.get("recheck") if isinstance(probe, Mapping) else None
    out: list[tuple[int, int, float, float]] = []
    n = network.n
    for row in rows if isinstance(rows, list) else ():
        try:
            a, b, r_ab, r_ba = int(row[0]), int(row[1]), float(row[2]), float(row[3])
        except (TypeError, ValueError, IndexError, OverflowError):
            continue
        rates_ok = all(np.isfinite(r) and r > 0 for r in (r_ab, r_ba))
        if 0 <= a < n and 0 <= b < n and a != b and rates_ok:
            out.append((a, b, r_ab, r_ba))
    return out


#: A pair of a loaded way that read more than this factor above the median of the way's
#: pairs is brought down to the way's upper quartile (see :meth:`Network._with_typical_ways`).
LUCKY_ABOVE = 1.1

#: A recheck this many times slower than its groups' rate marks a network whose
#: load varied while it was probed (see :func:`measured_variability`).
VARYING_SLOWDOWN = 1.5


def measured_variability(network: Network) -> float:
    """How much slower than before a transfer across an uplink ran when probed again alone.

    The all-pairs probe ends with a *recheck*: one pair of every two sibling
    groups, alone in its slot, :data:`~rankopt.probe._engine.RECHECK_PASSES`
    times (``provenance["probe"]["recheck"]``,
    :func:`rankopt.probe._engine.recheck_pairs`). A transfer alone is not
    slowed by the probe's own side-by-side transfers, which only ever lower
    a measured rate; so a recheck well below the rate its two groups reached
    in the bandwidth phase (their second-best pair) means traffic that was
    not there before: another tenant whose load comes and goes (on/off,
    bursty TCP). Returns the largest such factor, ``rate before / recheck``
    over every direction rechecked (1.0 when none is slower, or without a
    recheck: a linear probe, matrices from a file), leaving out the ways
    whose load the bandwidth phase already read (:func:`loaded_ways`). A quiet
    network or a steady neighbour stays near 1; :data:`VARYING_SLOWDOWN` marks
    the line.

    Examples
    --------
    >>> import numpy as np, rankopt
    >>> rack = np.repeat([0, 1, 2], 3)
    >>> bw = np.where(rack[:, None] == rack[None, :], 100e6, 20e6)
    >>> prov = {"probe": {"recheck": [[0, 3, 20e6, 19e6], [0, 6, 8e6, 20e6]]}}
    >>> net = rankopt.Network.from_matrices(np.full((9, 9), 30e-6), bw, provenance=prov)
    >>> round(measured_variability(net), 2)
    2.5
    """
    return recheck_readings(network)[0]


def recheck_readings(network: Network) -> tuple[float, float]:
    """``(measured_variability(network), recheck_disagreement(network))`` from one
    reading of the recheck per way (:func:`recheck_ways`) and of the loaded ways
    (:func:`loaded_ways`), both O(n^2) on the bandwidth."""
    ways = recheck_ways(network)
    loaded = loaded_ways(network) if ways else set()
    slowest, apart = 1.0, 1.0
    for way, (_, slower) in ways.items():
        if way not in loaded:
            slowest = max(slowest, *slower)
            apart = max(apart, max(slower) / min(slower))
    return slowest, apart


#: Two rechecks of one way this many times apart in rate mark load that changed between
#: them (see :func:`recheck_disagreement`).
RECHECK_DISAGREE = 1.15


def recheck_disagreement(network: Network) -> float:
    """How far apart the rechecks of one way ran: the largest ratio of the faster to the
    slower recheck of a way, over the ways rechecked more than once.

    Each recheck is one transfer alone in its slot, so two of them across the same
    way meet the same path and nothing of the probe's own: on a quiet network they
    agree within a few percent (0.96-1.02 of the bandwidth phase's rate on the
    emulated racks, six passes on three networks). A way rechecked at two rates
    met load that changed between the passes, even where neither is
    :data:`VARYING_SLOWDOWN` times below the rate before: beside three paced TCP
    flows out of one rack, on for 1 s and off for 3 s, that rack's two ways out were
    rechecked at 23.8 and 24.6 MB/s, then 30.0 and 30.1 (1.26x and 1.22x apart), no
    way read loaded in the bandwidth phase, and a ring run the wrong way round beside
    the load took 14% longer. The ways whose load the bandwidth phase already read
    are left out (:func:`loaded_ways`: a steady TCP neighbour's way is rechecked at
    whatever share it yields that moment). 1.0 without two rechecks of a way.

    Examples
    --------
    >>> import numpy as np, rankopt
    >>> rack = np.repeat([0, 1, 2], 3)
    >>> bw = np.where(rack[:, None] == rack[None, :], 100e6, 30e6)
    >>> rows = [[0, 3, 24e6, 30e6], [0, 3, 30e6, 30e6]]  # rack 0 -> 1, then as fast as before
    >>> net = rankopt.Network.from_matrices(np.full((9, 9), 30e-6), bw,
    ...                                     provenance={"probe": {"recheck": rows}})
    >>> round(recheck_disagreement(net), 2), round(measured_variability(net), 2)
    (1.25, 1.25)
    """
    return recheck_readings(network)[1]


def recheck_ways(network: Network) -> dict[tuple[int, int, int], tuple[float, list[float]]]:
    """The probe's recheck per way: ``(level, group out, group in)`` to ``(rate before,
    slowdowns)``.

    ``rate before`` is the second-best rate of the way's block of pairs in the
    bandwidth phase (:func:`rankopt.probe.hierarchy.block_runner_up`), each slowdown
    ``rate before / recheck`` of one recheck of the way (:func:`recheck_rows`), in the
    order they ran. Empty without a recheck, a bandwidth or groups.
    """
    rows = recheck_rows(network)
    bw = network.bandwidth
    out: dict[tuple[int, int, int], tuple[float, list[float]]] = {}
    if not rows or bw is None or not network.groups:
        return out
    from rankopt.probe.hierarchy import block_runner_up

    meet = meet_levels(network.groups, network.n)
    est: dict[int, NDArray[np.float64]] = {}
    for a, b, r_ab, r_ba in rows:
        level = int(meet[a, b]) - 1
        if level < 0:
            continue
        lab = network.groups[level]
        if level not in est:
            est[level] = block_runner_up(bw, lab)
        for x, y, rate in ((a, b, r_ab), (b, a, r_ba)):
            way = (level, int(lab[x]), int(lab[y]))
            before = float(est[level][way[1], way[2]])
            if np.isfinite(before) and before > 0:
                out.setdefault(way, (before, []))[1].append(before / rate)
    return out


def loaded_ways(network: Network) -> set[tuple[int, int, int]]:
    """The ways between two sibling groups whose load the bandwidth phase already read.

    ``(level, group out, group in)``, above the host level, of every way whose
    second-best rate
    (:func:`rankopt.probe.hierarchy.block_runner_up`) is below
    :data:`rankopt.probe.sharing.LOADED_BELOW` of the fastest way between sibling
    groups of its level (a narrower uplink reads the same). Such a load is priced as
    the bandwidth phase read it, and what its way reads otherwise is no sign of load
    that comes and goes: a TCP neighbour that never stops yields less to one transfer
    alone than to a block of the probe's transfers back to back (beside three paced
    TCP flows out of a rack on the emulated racks, six probes on three networks, six
    rechecks per way: 0.8-2.4 times slower than the bandwidth phase's 8-18 MB/s on
    the loaded ways, against 24-36 MB/s on the others), and a block of pairs beside a
    steady load is less even than a quiet one (paced UDP: a slowest pair at 0.78 of
    its block's median). A neighbour on for 2 s and off for 2 s left every way's
    second best whole (24-36 MB/s on 200-300 Mbit/s uplinks, six probes): the
    recheck (1.0-4.1 times slower) and the block's slowest pairs are what show it.
    Empty without a bandwidth or groups.

    Examples
    --------
    >>> import numpy as np, rankopt
    >>> rack = np.repeat([0, 1, 2], 3)
    >>> bw = np.where(rack[:, None] == rack[None, :], 100e6, 30e6)
    >>> bw[:3, 3:] = 12e6  # rack 0's way out loaded in the bandwidth phase
    >>> rows = [[0, 3, 7e6, 30e6], [0, 3, 8e6, 30e6]]  # rechecked twice, slower both times
    >>> net = rankopt.Network.from_matrices(np.full((9, 9), 30e-6), bw,
    ...                                     provenance={"probe": {"recheck": rows}})
    >>> sorted(loaded_ways(net)), measured_variability(net)
    ([(0, 0, 1), (0, 0, 2)], 1.0)
    """
    from rankopt.probe.hierarchy import block_runner_up
    from rankopt.probe.sharing import LOADED_BELOW

    bw = network.bandwidth
    out: set[tuple[int, int, int]] = set()
    if bw is None or not network.groups:
        return out
    levels = [np.asarray(g) for g in network.groups]
    skip = 1 if network.hosts is not None and len(levels) > 1 else 0  # hosts share no uplink
    for level, lab in enumerate(levels):
        if level < skip:
            continue
        first = np.unique(lab, return_index=True)[1]  # a process of every group
        if first.size < 2:
            continue
        parent = levels[level + 1][first] if level + 1 < len(levels) else np.zeros(first.size)
        est = block_runner_up(bw, lab)
        sib = (parent[:, None] == parent[None, :]) & ~np.eye(first.size, dtype=bool)
        sib &= np.isfinite(est)
        if not sib.any():
            continue
        limit = LOADED_BELOW * float(est[sib].max())
        g_out, g_in = np.nonzero(sib & (est < limit))
        out.update((level, int(g), int(h)) for g, h in zip(g_out, g_in, strict=True))
    return out


#: A transfer between two sibling groups that read this far below the median of its
#: block saw load the others of the block did not: load that comes and goes (see
#: :func:`uneven_blocks`).
UNEVEN_BELOW = 0.9
#: ... and this many robust standard deviations of its block (1.4826 MAD) below it,
#: so that a block whose rates are merely noisy does not count.
UNEVEN_SIGMAS = 4.0


def uneven_blocks(network: Network) -> float:
    """How far the slowest transfer between two sibling groups fell below the others.

    Between two groups that share their parent (racks of one pod), every transfer
    leaves through the one group's uplink and enters through the other's, so on a
    quiet network the rates of a block of such pairs agree within the probe's noise
    (35.8-36.1 MB/s on the emulated racks' 300 Mbit/s uplinks). Beside another
    tenant whose load comes and goes, the pairs timed while it ran read lower: beside
    three paced TCP flows on for 2 s and off for 2 s, 1 to 3 pairs of the two blocks
    through the loaded ways read 30 MB/s where the others read 36; the second best,
    from which the uplinks are inferred, and the recheck (1.2x, not
    :data:`VARYING_SLOWDOWN`) did not show it, and rings one way round ran 1.35x
    slower than the other. A block's slowest rate counts when it is below
    :data:`UNEVEN_BELOW` of the block's median and :data:`UNEVEN_SIGMAS` robust
    standard deviations of the block below it. Returns the smallest ratio of such a
    slowest rate to its block's median, over the ordered blocks of sibling groups
    with at least three measured pairs at every level above the host level, leaving
    out the ways whose load the bandwidth phase already read (:func:`loaded_ways`: a
    steady load's block is less even than a quiet one's), 1.0 when none counts (no
    bandwidth, no groups, blocks of two, or even ones).

    Examples
    --------
    >>> import numpy as np, rankopt
    >>> rack = np.repeat([0, 1, 2], 3)
    >>> bw = np.where(rack[:, None] == rack[None, :], 100e6, 36e6)
    >>> net = rankopt.Network.from_matrices(np.full((9, 9), 30e-6), bw, groups=[rack])
    >>> uneven_blocks(net)
    1.0
    >>> bw[0, 4] = 30e6  # one pair of the block rack 0 -> rack 1 ran beside load
    >>> round(uneven_blocks(rankopt.Network.from_matrices(np.full((9, 9), 30e-6), bw, groups=[rack])), 3)
    0.833
    """
    bw = network.bandwidth
    if bw is None or not network.groups:
        return 1.0
    n = network.n
    measured = ~np.eye(n, dtype=bool) & np.isfinite(bw) & (bw > 0)
    if network.bandwidth_samples is not None:
        measured &= np.asarray(network.bandwidth_samples) > 0
    levels = [np.asarray(g) for g in network.groups]
    skip = 1 if network.hosts is not None and len(levels) > 1 else 0
    loaded = loaded_ways(network)
    worst = 1.0
    for k in range(skip, len(levels)):
        lab = levels[k]
        parent = levels[k + 1] if k + 1 < len(levels) else np.zeros(n, dtype=np.int64)
        for a in np.unique(lab).tolist():
            rows = lab == a
            for b in np.unique(lab[parent == parent[rows][0]]).tolist():
                if b == a or (k, a, b) in loaded:
                    continue
                block = bw[np.ix_(rows, lab == b)][measured[np.ix_(rows, lab == b)]]
                if block.size < 3:
                    continue
                mid = float(np.median(block))
                sigma = 1.4826 * float(np.median(np.abs(block - mid)))
                low = float(block.min())
                if low < UNEVEN_BELOW * mid and low < mid - UNEVEN_SIGMAS * sigma:
                    worst = min(worst, low / mid)
    return worst


def load_came_and_went(network: Network) -> bool:
    """Whether the probe saw another tenant's load come and go: its recheck ran
    :data:`VARYING_SLOWDOWN` times slower than its groups had
    (:func:`measured_variability`), two rechecks of one way ran
    :data:`RECHECK_DISAGREE` times apart (:func:`recheck_disagreement`), or, on a
    network with uplinks, a pair between two sibling groups read well below the
    others of its block (:func:`uneven_blocks` below :data:`UNEVEN_BELOW`). The solve
    then times the ring both ways round, and the interval takes the loaded model
    error."""
    slowest, apart = recheck_readings(network)
    if slowest >= VARYING_SLOWDOWN or apart >= RECHECK_DISAGREE:
        return True
    return network.has_uplinks and uneven_blocks(network) < UNEVEN_BELOW


class Redraw:
    """Draw networks the measurement cannot tell from the one measured.

    The entries the hierarchy says are alike (a block of at least
    :data:`MIN_BLOCK` pairs crossing the same uplinks, or every pair when
    there is no hierarchy) are exchangeable: each is drawn around its block's
    median with the block's robust spread and its own median's standard error, so an
    order that only exploits which alike pair happened to measure slow gains
    nothing on the draws. Entries of smaller blocks keep their value with
    log-normal noise of their uncertainty (:func:`_log_sigma`: the median's
    standard error and the spread of their level); uplinks get the spread of
    the pairs that cross them, and how much of other tenants' load yields
    is drawn evenly from :attr:`Network.elastic_range` when the probe could
    not pin it down, and how transfers split an uplink evenly from an even
    split (exponent 1) up to the top of :attr:`Network.straggle_range`: the
    sharing test reads its steps against the bandwidth phase's rate, so load
    that another tenant added after that phase reads as uneven sharing, and a
    reading above 1 cannot rule out an even split (only the point estimate
    keeps the reading). The uncertainties are computed once; each call draws
    one network.

    Parameters
    ----------
    network : Network
    model : mapping
        The keyword arguments of :func:`rankopt.cost` that define the model
        (``objective``, ``bandwidth``, ``nbytes``, ``groups``,
        ``uplink_bandwidth``); the bandwidth and uplinks in it are redrawn.

    Examples
    --------
    >>> import numpy as np, rankopt
    >>> rack = np.array([0, 1, 0, 1])
    >>> bw = np.where(rack[:, None] == rack[None, :], 100e6, 20e6)
    >>> net = rankopt.Network.from_matrices(np.full((4, 4), 30e-6), bw,
    ...                                     bandwidth_spread=0.1 * bw)
    >>> lat, kw = Redraw(net, net.default_model())(np.random.default_rng(0))
    >>> lat.shape
    (4, 4)
    >>> sorted(kw)  # doctest: +NORMALIZE_WHITESPACE
    ['bandwidth', 'elastic', 'groups', 'nbytes', 'objective', 'straggle',
     'uplink_bandwidth']
    """

    def __init__(self, network: Network, model: Mapping[str, Any]) -> None:
        n = network.n
        self.n = n
        self.groups = network.groups if network.groups else ()
        self.meet = meet_levels(self.groups, n)
        blocks = alike_blocks(self.groups, n, network.hosts)
        self.lat = np.asarray(network.latency, dtype=np.float64)
        self.s_lat = _log_sigma(
            self.lat, network.latency_spread, network.latency_samples, self.meet, blocks
        )
        self.bw_in = model.get("bandwidth")
        self.bw: NDArray[np.float64] | None = None
        self.s_bw: NDArray[np.float64] | None = None
        if self.bw_in is not None and np.ndim(self.bw_in) == 2:
            self.bw = np.asarray(self.bw_in, dtype=np.float64)
            spread = network.bandwidth_spread if self.bw is network.bandwidth else None
            self.s_bw = _log_sigma(self.bw, spread, network.bandwidth_samples, self.meet, blocks)
        self.o_lat = _log_sigma(
            self.lat, network.latency_spread, network.latency_samples, self.meet, own_only=True
        )
        self.o_bw: NDArray[np.float64] | None = None
        if self.bw is not None:
            spread = network.bandwidth_spread if self.bw is network.bandwidth else None
            self.o_bw = _log_sigma(
                self.bw, spread, network.bandwidth_samples, self.meet, own_only=True
            )
        off = ~np.eye(n, dtype=bool)
        flat = np.where(off, blocks, -1).ravel()
        pools = [
            np.flatnonzero(flat == b)
            for b in np.unique(flat[flat >= 0])
            if int(np.sum(flat == b)) >= MIN_BLOCK
        ]
        self.lat_pools = _pool_stats(self.lat, self.o_lat, pools)
        self.bw_pools = (
            None if self.bw is None or self.o_bw is None else _pool_stats(self.bw, self.o_bw, pools)
        )
        self.ups = model.get("uplink_bandwidth")
        self.s_ups = _uplink_sigmas(self.ups, self.groups, self.s_bw, self.meet)
        self.drift = _recheck_drift(network, self.ups, self.groups, self.meet)
        self.base_kw = {
            k: v for k, v in model.items() if k not in ("bandwidth", "uplink_bandwidth")
        }
        # a load the probe read as congestion-controlled: how much of it yields is a range
        lo, hi = network.elastic_range
        own = self.ups is not None and model.get("elastic") == network.elastic
        self.elastic_span = (lo, hi) if own and hi > lo else None
        # how transfers split an uplink: from an even split up to the test's high quartile
        _, hi = network.straggle_range
        lo = STRAGGLE_RANGE[0]
        own = self.ups is not None and model.get("straggle") == network.straggle
        self.straggle_span = (lo, hi) if own and hi > lo else None

    def _draw(
        self,
        values: NDArray[np.float64],
        sigma: NDArray[np.float64],
        pools: list[tuple[NDArray[np.intp], float, NDArray[np.float64]]],
        gen: np.random.Generator,
    ) -> NDArray[np.float64]:
        """Entries of large alike blocks resampled within their block, the rest jittered.

        In a block the hierarchy says is alike (at least :data:`MIN_BLOCK`
        entries), which entry is slow is not something the measurement can vouch
        for: every entry is drawn log-normally around the block's median with the
        block's robust spread and its own median's standard error in quadrature
        (``pools``, :func:`_pool_stats`). Smaller blocks keep their value and the
        combined uncertainty ``sigma``.
        """
        n = self.n
        out = values * np.exp(sigma * gen.standard_normal((n, n)))
        for sel, mid, scale in pools:
            out.flat[sel] = np.exp(mid + scale * gen.standard_normal(sel.size))
        return out

    def __call__(self, gen: np.random.Generator) -> tuple[NDArray[np.float64], dict[str, Any]]:
        """One drawn network: its latency and the model's keyword arguments."""
        lat_s = self._draw(self.lat, self.s_lat, self.lat_pools, gen)
        kw = dict(self.base_kw)
        if self.bw_in is not None:
            kw["bandwidth"] = (
                self._draw(self.bw, self.s_bw, self.bw_pools, gen)
                if self.bw is not None and self.s_bw is not None and self.bw_pools is not None
                else self.bw_in
            )
        if self.ups is not None:
            kw["uplink_bandwidth"] = _perturb_uplinks(self.ups, self.s_ups, gen, self.drift)
        if self.elastic_span is not None:
            kw["elastic"] = float(gen.uniform(*self.elastic_span))
        if self.straggle_span is not None:
            kw["straggle"] = float(gen.uniform(*self.straggle_span))
        return lat_s, kw


def _pool_stats(
    values: NDArray[np.float64], own: NDArray[np.float64], pools: Sequence[NDArray[np.intp]]
) -> list[tuple[NDArray[np.intp], float, NDArray[np.float64]]]:
    """Every alike pool's entries, the median of their logs and each entry's scale.

    The centre and spread are robust (the median and 1.4826 MAD of the logs of
    the pool's finite positive entries), so the few entries a probe measured
    while sharing a link do not stand for the block; each entry's scale adds its
    own median's standard error ``own`` in quadrature. Pools without such an
    entry are left out.
    """
    out = []
    for sel in pools:
        pool = values.flat[sel]
        pool = pool[np.isfinite(pool) & (pool > 0)]
        if pool.size:
            logs = np.log(pool)
            mid = float(np.median(logs))
            spread = 1.4826 * float(np.median(np.abs(logs - mid)))
            out.append((sel, mid, np.hypot(spread, own.flat[sel])))
    return out


def redraw(
    network: Network, gen: np.random.Generator, model: Mapping[str, Any] | None = None
) -> tuple[NDArray[np.float64], dict[str, Any]]:
    """One network drawn from ``network``'s uncertainty (see :class:`Redraw`).

    ``model`` defaults to :meth:`Network.default_model`. Returns the drawn
    latency and the model's keyword arguments with the drawn bandwidth and
    uplinks.
    """
    return Redraw(network, network.default_model() if model is None else model)(gen)


def _uplink_sigmas(
    ups: Any,
    groups: Sequence[NDArray[np.int64]],
    s_bw: NDArray[np.float64] | None,
    meet: NDArray[np.int64],
) -> list[NDArray[np.float64]] | None:
    """Log-scale uncertainty of every uplink, per direction: ``(2, G)`` per level.

    An uplink's capacity is estimated from the pairs that cross it (leaving,
    or entering, its group towards a sibling); its uncertainty is the median
    uncertainty of those entries (:func:`_log_sigma`: the spread of their
    alike block and their own medians' standard errors). An uplink another
    tenant loaded for part of the probe has pairs measured fast and slow, a
    wide block spread, and so draws of its capacity as wide.
    """
    if not isinstance(ups, (list, tuple)) or len(ups) != len(groups) or s_bw is None:
        return None
    out = []
    for k, lab in enumerate(groups):
        lab = np.asarray(lab, dtype=np.int64)
        g_count = int(lab.max()) + 1
        rows, cols = np.nonzero(meet == k + 1)  # pairs that cross level k's uplinks
        sig = np.zeros((2, g_count))
        values = s_bw[rows, cols]
        for d, side in enumerate((rows, cols)):
            grp = lab[side]
            order = np.argsort(grp, kind="stable")
            cuts = np.flatnonzero(np.diff(grp[order])) + 1
            for part in np.split(order, cuts) if order.size else ():
                sig[d, grp[part[0]]] = float(np.median(values[part]))
        out.append(sig)
    return out


def _recheck_drift(
    network: Network, ups: Any, groups: Sequence[NDArray[np.int64]], meet: NDArray[np.int64]
) -> list[NDArray[np.float64]] | None:
    """How far below its capacity each uplink direction was found when rechecked: ``(2, G)``.

    ``log(capacity / recheck)`` of every recheck (:func:`recheck_rows`) that
    ran slower than the narrower of the two uplinks it left and entered at
    the level its pair meets, charged to that one: another tenant's load
    that came after (or went before) the bandwidth phase. 0 where nothing
    was rechecked slower, and on the ways whose load the bandwidth phase already read
    (:func:`loaded_ways`).
    """
    rows = recheck_rows(network)
    if not rows or not isinstance(ups, (list, tuple)) or len(ups) != len(groups):
        return None
    out = [np.zeros((2, int(np.max(lab)) + 1)) for lab in groups]
    loaded = loaded_ways(network)
    for a, b, r_ab, r_ba in rows:
        k = int(meet[a, b]) - 1
        if k < 0:
            continue
        lab = groups[k]
        u_out, u_in = uplink_directions(ups[k])
        if u_out.ndim != 1:
            continue  # a scalar per level: no group to attribute the drift to
        for x, y, rate in ((a, b, r_ab), (b, a, r_ba)):
            gx, gy = int(lab[x]), int(lab[y])
            if (k, gx, gy) in loaded:
                continue  # a steady load, priced as the bandwidth phase read it
            side, g = (0, gx) if u_out[gx] <= u_in[gy] else (1, gy)  # the binding direction
            cap = float(u_out[gx] if side == 0 else u_in[gy])
            out[k][side, g] = max(out[k][side, g], float(np.log(max(cap / rate, 1.0))))
    return out if any(d.any() for d in out) else None


def _drift_shaped(u: NDArray[np.float64], drift: NDArray[np.float64]) -> NDArray[np.float64]:
    """A level's ``(2, G)`` recheck drift (:func:`_recheck_drift`) in the shape of its
    uplinks ``u``: per direction, or the larger of the two for one rate per group."""
    return drift if u.ndim == 2 else drift.max(axis=0)


def loaded_phase(network: Network, model: Mapping[str, Any]) -> dict[str, Any] | None:
    """``model`` (the keywords of :func:`rankopt.cost`) with the load the probe's recheck met on.

    Where the probe saw another tenant's load come and go
    (:func:`load_came_and_went`) and a recheck ran slower than the uplinks it
    crossed, each uplink direction it was charged to (:func:`_recheck_drift`)
    is lowered by that factor, and the load that took the difference yields to
    more transfers as TCP does (``elastic`` 1, unless the probe's loaded-uplink
    test read one: :attr:`Network.elastic_reading`).
    The model's own uplinks are the load off (the bandwidth phase's best
    rates); these are the load on. None where there is no such phase: a quiet
    or steadily loaded network, no recheck slower, or a model without uplinks.

    Examples
    --------
    >>> import numpy as np, rankopt
    >>> rack = np.repeat([0, 1, 2], 3)
    >>> bw = np.where(rack[:, None] == rack[None, :], 100e6, 20e6)
    >>> prov = {"probe": {"recheck": [[0, 3, 20e6, 20e6], [0, 6, 8e6, 20e6]]}}
    >>> net = rankopt.Network.from_matrices(np.full((9, 9), 30e-6), bw, provenance=prov)
    >>> kw = net.default_model()
    >>> on = loaded_phase(net, kw)
    >>> [np.round(np.asarray(u) / 1e6, 1).tolist() for u in on["uplink_bandwidth"]], on["elastic"]
    ([[8.0, 20.0, 20.0]], 1.0)
    >>> loaded_phase(rankopt.Network.from_matrices(np.full((9, 9), 30e-6), bw), kw) is None
    True
    """
    ups = model.get("uplink_bandwidth")
    if not network.has_uplinks or ups is None or not load_came_and_went(network):
        return None
    groups = list(network.groups)
    if not isinstance(ups, (list, tuple)) or len(ups) != len(groups):
        return None
    drift = _recheck_drift(network, ups, groups, meet_levels(groups, network.n))
    if drift is None:
        return None
    lowered = []
    for u, d in zip(ups, drift, strict=True):
        u = np.asarray(u, dtype=np.float64)
        lowered.append(u if u.ndim == 0 else u * np.exp(-_drift_shaped(u, d)))
    # the loaded-uplink test reads how a load seen in the bandwidth phase yields; one that
    # came after it was not read there, and is taken for congestion-controlled traffic
    read = network.elastic_reading is not None and model.get("elastic") is not None
    return {**model, "uplink_bandwidth": lowered, "elastic": model["elastic"] if read else 1.0}


def _perturb_uplinks(
    ups: Any,
    sigmas: list[NDArray[np.float64]] | None,
    gen: np.random.Generator,
    drift: list[NDArray[np.float64]] | None = None,
) -> Any:
    """Uplinks redrawn with the uncertainty of the pairs that cross them, per direction.

    A level given per direction (``(2, G)``) draws each direction on its own;
    one given for both directions draws one factor per group with the larger
    of its two uncertainties. ``drift`` (:func:`_recheck_drift`) adds a
    one-sided factor ``exp(-|z| drift)``: a load that came and went only
    ever lowers an uplink's capacity.
    """
    if sigmas is None and drift is None:
        return ups
    out = []
    for k, u in enumerate(ups):
        u = np.asarray(u, dtype=np.float64)
        log_f = np.zeros(u.shape)
        if sigmas is not None:
            sig = sigmas[k] if u.ndim == 2 else sigmas[k].max(axis=0)
            log_f = log_f + sig * gen.standard_normal(u.shape)
        if drift is not None and u.ndim >= 1:
            d = _drift_shaped(u, drift[k])
            log_f = log_f - d * np.abs(gen.standard_normal(u.shape))
        out.append(u * np.exp(log_f))
    return out


def network_digest(network: Network) -> str:
    """A short digest of a network's numbers and hosts (what an order was solved on).

    Over ``n``, the host names and the latency and bandwidth matrices (in
    float32, so a file round trip keeps it). Two probes of the same hosts
    differ in their digests; the hosts and ``n`` are what an order is bound to.

    Examples
    --------
    >>> import numpy as np
    >>> net = Network(np.full((2, 2), 1e-5), hosts=("a", "b"))
    >>> len(network_digest(net)), network_digest(net) == network_digest(net)
    (16, True)
    """
    import hashlib

    h = hashlib.sha256()
    h.update(str(network.n).encode())
    h.update(json.dumps(list(network.hosts or ())).encode())
    h.update(np.ascontiguousarray(network.latency, dtype="<f4").tobytes())
    if network.bandwidth is not None:
        h.update(np.ascontiguousarray(network.bandwidth, dtype="<f4").tobytes())
    return h.hexdigest()[:16]


def network_record(network: Network, *, matrices: bool = True) -> dict[str, Any]:
    """What an order file keeps of the network it was solved on (JSON-able).

    ``digest`` (:func:`network_digest`), ``n``, ``hosts``, ``date`` (UTC, ISO
    8601, when the record was made), ``source``, the hierarchy (``groups``,
    ``uplinks``, ``straggle`` when not 1), the probe's ``recheck`` rows
    (:func:`recheck_rows`) when it made any, and, with ``matrices``,
    ``latency`` and ``bandwidth`` with their spreads: enough for
    :func:`network_from_record` and ``rankopt check`` to re-probe and compare,
    and for a solve on the record to see what the probe saw (a recheck that
    ran slower than its groups is load that came and went).
    """
    import datetime

    rec: dict[str, Any] = {
        "digest": network_digest(network),
        "n": network.n,
        "hosts": None if network.hosts is None else list(network.hosts),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "source": network.source,
        "groups": [lab.tolist() for lab in network.groups],
        "uplinks": [u.tolist() for u in network.uplinks],
    }
    if network.straggle != 1.0:
        rec["straggle"] = network.straggle
    lo, hi = network.straggle_range
    if hi > lo:  # also where the test read no limit (an even split, drawn over a range)
        rec["straggle_range"] = [lo, hi]
    if network.elastic_reading is not None:
        rec["elastic"] = network.elastic_reading
    rows = recheck_rows(network)
    if rows:
        rec["recheck"] = [list(row) for row in rows]
    if matrices:
        for name in ("latency", "bandwidth", "latency_spread", "bandwidth_spread"):
            value = getattr(network, name)
            rec[name] = None if value is None else np.asarray(value).tolist()
        for name in ("latency_samples", "bandwidth_samples"):
            value = getattr(network, name)
            rec[name] = None if value is None else np.asarray(value).tolist()
    return rec


def network_from_record(record: Mapping[str, Any]) -> Network:
    """The :class:`Network` an order file recorded (:func:`network_record`)."""
    if record.get("latency") is None:
        raise RankoptInputError("the order file records the network's identity, not its numbers.")
    groups = record.get("groups") or []
    ups = record.get("uplinks") or []
    return Network(
        latency=np.asarray(record["latency"], dtype=np.float64),
        bandwidth=_opt(record.get("bandwidth"), np.float64),
        latency_spread=_opt(record.get("latency_spread"), np.float64),
        bandwidth_spread=_opt(record.get("bandwidth_spread"), np.float64),
        latency_samples=_opt(record.get("latency_samples"), np.int64),
        bandwidth_samples=_opt(record.get("bandwidth_samples"), np.int64),
        hosts=None if record.get("hosts") is None else tuple(record["hosts"]),
        groups=tuple(np.asarray(g, dtype=np.int64) for g in groups),
        uplinks=tuple(np.asarray(u, dtype=np.float64) for u in ups)
        if len(ups) == len(groups)
        else (),
        source=str(record.get("source", "order file")),
        provenance={
            "recorded": record.get("date"),
            **_sharing_readings(record),
            **({"probe": {"recheck": record["recheck"]}} if record.get("recheck") else {}),
        },
    )


def _sharing_readings(source: Mapping[str, Any]) -> dict[str, Any]:
    """What the sharing test read, from a probe's parameters or an order file's record.

    ``straggle`` when an exponent was read, ``straggle_range`` when the test gave
    one (the exponents of its quartile steps, or where it read no shared limit
    :data:`~rankopt._validation.UNREAD_STRAGGLE_RANGE`), and ``elastic`` when
    the loaded-uplink test read one: the provenance keys
    :attr:`Network.straggle`, :attr:`Network.straggle_range` and
    :attr:`Network.elastic_reading` read back.
    """
    out: dict[str, Any] = {}
    if source.get("straggle"):
        out["straggle"] = source["straggle"]
    if source.get("straggle_range"):
        out["straggle_range"] = source["straggle_range"]
    if source.get("elastic") is not None:
        out["elastic"] = source["elastic"]
    return out


def _opt(value: Any, dtype: Any) -> NDArray[Any] | None:
    return None if value is None else np.asarray(value, dtype=dtype)
