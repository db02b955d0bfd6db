"""Point-to-point traffic: what a job's ranks send each other, and what it costs on a network.

Contents
--------
Traffic
    Bytes and messages from every rank to every other rank, sparse
    (``scipy.sparse``), indexed by launch rank.
as_traffic
    A :class:`Traffic` from a mapping (the file format), a dense or sparse
    matrix, a path, or a :class:`Traffic`.
load_traffic, write_traffic
    The traffic file: JSON (a ``rankopt profile`` file with a ``"traffic"``
    entry, or that entry alone), or a Matrix Market ``.mtx`` matrix of bytes.
TrafficModel
    The modelled time of the traffic under a rank order, a
    :class:`~rankopt.models.base.CostModel`: ``"time"`` (the α-β time of
    every pair's messages and bytes on its path; with the distances as
    ``latency`` and no bandwidth, the classic sum of traffic × distance) or
    ``"contention"`` (the busiest resource of the phase: a process sending
    its messages one after another, or an uplink carrying every byte that
    crosses it).

The file format (version 1)::

    {"rankopt_traffic": 1, "n": 8,
     "pairs": [[src, dst, bytes, messages], ...]}

``src`` and ``dst`` are launch ranks (``MPI_COMM_WORLD``, torch's global
rank), ``bytes`` the bytes ``src`` sent ``dst`` over the whole run and
``messages`` how many messages carried them. A pair may appear more than once
(the entries add up); traffic of a rank to itself never crosses the network
and is dropped. In a ``rankopt profile`` file the same object is the value of
its ``"traffic"`` key.

Conventions: ``order[k]`` is the launch rank of the process that gets rank
``k``. The program's rank ``k`` keeps sending what it sent, so under
``order`` the traffic ``T[k, l]`` runs from process ``order[k]`` to process
``order[l]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError
from rankopt.models.base import Capabilities, CostModel

__all__ = [
    "TRAFFIC_VERSION",
    "Traffic",
    "as_traffic",
    "load_traffic",
    "write_traffic",
    "TrafficModel",
    "TRAFFIC_OBJECTIVES",
]

#: Version of the traffic file format this module writes and reads.
TRAFFIC_VERSION = 1
#: The objectives of :class:`TrafficModel`.
TRAFFIC_OBJECTIVES = ("time", "contention")
#: Most ranks a traffic file may name (the same bound as every matrix rankopt reads).
_MAX_N = 1 << 20


def _csr(matrix: Any) -> Any:
    import scipy.sparse as sp

    m = sp.csr_array(matrix, dtype=np.float64)
    m.sum_duplicates()
    m.eliminate_zeros()
    m.sort_indices()
    return m


@dataclass(frozen=True, eq=False)
class Traffic:
    """Point-to-point traffic of a job, by launch rank.

    Parameters
    ----------
    bytes : scipy.sparse array (n, n)
        ``bytes[s, d]``: bytes rank ``s`` sent rank ``d`` over the run.
    messages : scipy.sparse array (n, n)
        ``messages[s, d]``: the number of messages that carried them (an
        entry wherever ``bytes`` has one).

    Build one with :meth:`from_pairs`, :meth:`from_matrix` or
    :func:`as_traffic`; the constructor takes the arrays as they are.

    Examples
    --------
    A ring of four ranks, each sending 1 MB to the next in 10 messages:

    >>> import rankopt.models.traffic as tr
    >>> t = tr.Traffic.from_pairs(4, [0, 1, 2, 3], [1, 2, 3, 0], [1e6] * 4, [10] * 4)
    >>> t.n, t.nnz, t.total_bytes
    (4, 4, 4000000.0)
    >>> tr.as_traffic(t.to_dict()).total_bytes
    4000000.0
    """

    bytes: Any
    messages: Any

    @property
    def n(self) -> int:
        return int(self.bytes.shape[0])

    @property
    def nnz(self) -> int:
        """Number of (source, destination) pairs with traffic (bytes or messages)."""
        return int(self.messages.nnz)

    @property
    def total_bytes(self) -> float:
        return float(self.bytes.sum())

    @property
    def total_messages(self) -> float:
        return float(self.messages.sum())

    @classmethod
    def from_pairs(
        cls,
        n: int,
        src: Any,
        dst: Any,
        nbytes: Any,
        messages: Any = None,
        *,
        where: str = "traffic",
    ) -> Traffic:
        """Traffic from parallel lists of sources, destinations, bytes and message counts.

        Repeated pairs add up; a rank's traffic to itself is dropped.
        ``messages`` defaults to one message per entry.
        """
        import scipy.sparse as sp

        n = _check_n(n, where)
        s = _ranks(src, n, f"{where}: source")
        d = _ranks(dst, n, f"{where}: destination")
        b = np.asarray(nbytes, dtype=np.float64).reshape(-1)
        m = np.ones_like(b) if messages is None else np.asarray(messages, dtype=np.float64)
        m = m.reshape(-1)
        if not (s.size == d.size == b.size == m.size):
            raise RankoptInputError(
                f"{where}: sources, destinations, bytes and messages must have one entry per "
                f"pair; got {s.size}, {d.size}, {b.size} and {m.size}."
            )
        for name, v in (("bytes", b), ("messages", m)):
            bad = np.flatnonzero(~np.isfinite(v) | (v < 0))
            if bad.size:
                k = int(bad[0])
                raise RankoptInputError(
                    f"{where}: pair {k} ({int(s[k])} -> {int(d[k])}) has {name} {float(v[k])!r}; "
                    f"{name} must be finite and at least 0."
                )
        frac = np.flatnonzero(m != np.floor(m))
        if frac.size:
            k = int(frac[0])
            raise RankoptInputError(
                f"{where}: pair {k} ({int(s[k])} -> {int(d[k])}) has messages {float(m[k])!r}; "
                "a message count is a whole number."
            )
        silent = np.flatnonzero((b > 0) & (m == 0))
        if silent.size:
            k = int(silent[0])
            raise RankoptInputError(
                f"{where}: pair {k} ({int(s[k])} -> {int(d[k])}) has {float(b[k])!r} bytes in 0 "
                "messages; bytes travel in at least one message."
            )
        keep = (s != d) & (m > 0)
        s, d, b, m = s[keep], d[keep], b[keep], m[keep]
        shape = (n, n)
        nbytes_m = _csr(sp.coo_array((b, (s, d)), shape=shape))
        msg = _csr(sp.coo_array((m, (s, d)), shape=shape))
        return cls(nbytes_m, msg)  # every pair has a message: msg's entries cover bytes'

    @classmethod
    def from_matrix(cls, matrix: Any, messages: Any = None, *, where: str = "traffic") -> Traffic:
        """Traffic from an (n, n) matrix of bytes (dense or sparse); ``messages``
        likewise, default one message per non-zero entry."""
        import scipy.sparse as sp

        m = sp.coo_array(matrix) if not sp.issparse(matrix) else matrix.tocoo()
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise RankoptInputError(f"{where} must be a square (n, n) matrix; got shape {m.shape}.")
        msg = None
        if messages is not None:
            mm = sp.coo_array(messages) if not sp.issparse(messages) else messages.tocoo()
            if mm.shape != m.shape:
                raise RankoptInputError(
                    f"{where}: messages must have the shape of bytes {m.shape}; got {mm.shape}."
                )
            msg = _values(mm, m.row, m.col)
        return cls.from_pairs(m.shape[0], m.row, m.col, m.data, msg, where=where)

    @classmethod
    def from_weights(cls, weights: Any, *, where: str = "traffic") -> Traffic:
        """Traffic whose messages *are* the weights: with :class:`TrafficModel`'s
        ``"time"`` objective over a distance matrix and no bandwidth, the cost is
        the classic ``sum of weight × distance`` of process mapping."""
        import scipy.sparse as sp

        m = sp.coo_array(weights) if not sp.issparse(weights) else weights.tocoo()
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise RankoptInputError(f"{where} must be a square (n, n) matrix; got shape {m.shape}.")
        w = np.asarray(m.data, dtype=np.float64)
        t = cls.from_pairs(m.shape[0], m.row, m.col, w, np.ones_like(w), where=where)
        return cls(t.bytes, t.bytes.copy())

    def to_dict(self) -> dict[str, Any]:
        """The file format's object: ``{"rankopt_traffic": 1, "n", "pairs"}``."""
        rows, cols = _rows_cols(self.messages)  # every pair: messages hold the union
        nbytes = _values(self.bytes, rows, cols)
        pairs = [
            [int(r), int(c), _plain(v), _plain(k)]
            for r, c, v, k in zip(rows, cols, nbytes, self.messages.data, strict=True)
        ]
        pairs.sort()
        return {"rankopt_traffic": TRAFFIC_VERSION, "n": self.n, "pairs": pairs}

    def digest(self) -> str:
        """A short digest of the whole content: equal for equal traffic, else (almost
        surely) not. Shown in ``repr``, so that what keys on it sees every byte."""
        import hashlib

        h = hashlib.sha256(str(self.n).encode())
        for m in (self.bytes, self.messages):
            c = _csr(m)
            for a in (c.indptr, c.indices, c.data):
                h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()[:16]

    def __repr__(self) -> str:
        return (
            f"Traffic(n={self.n}, pairs={self.nnz}, bytes={self.total_bytes:.6g}, "
            f"digest={self.digest()})"
        )


def _plain(v: float) -> float | int:
    return int(v) if float(v).is_integer() and abs(v) < 2**53 else float(v)


def _values(m: Any, rows: NDArray[Any], cols: NDArray[Any]) -> NDArray[np.float64]:
    """``m[rows, cols]`` as a flat float array (empty for no entries)."""
    if len(rows) == 0:
        return np.zeros(0)
    return np.asarray(_csr(m)[rows, cols], dtype=np.float64).reshape(-1)


def _rows_cols(m: Any) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    return rows, m.indices.astype(np.int64)


def _check_n(n: Any, where: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= _MAX_N:
        raise RankoptInputError(
            f"{where}: `n` must be a whole number of ranks from 1 to {_MAX_N}; got {n!r}."
        )
    return int(n)


def _ranks(values: Any, n: int, what: str) -> NDArray[np.int64]:
    a = np.asarray(values)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        f = np.asarray(a, dtype=np.float64)
        if not np.all(np.isfinite(f) & (f == np.floor(f))):
            k = int(np.flatnonzero(~(np.isfinite(f) & (f == np.floor(f))))[0])
            raise RankoptInputError(f"{what} of pair {k} must be a rank number; got {a.flat[k]!r}.")
    r = a.astype(np.int64).reshape(-1)
    bad = np.flatnonzero((r < 0) | (r >= n))
    if bad.size:
        k = int(bad[0])
        raise RankoptInputError(f"{what} of pair {k} is {int(r[k])}; ranks run from 0 to {n - 1}.")
    return r


def _from_mapping(data: Mapping[str, Any], where: str) -> Traffic:
    if "traffic" in data and "rankopt_traffic" not in data:
        inner = data["traffic"]
        if not isinstance(inner, Mapping):
            raise RankoptInputError(f"{where}: 'traffic' must be an object; got {inner!r:.80}.")
        return _from_mapping(inner, f"{where}: 'traffic'")
    version = data.get("rankopt_traffic")
    if version != TRAFFIC_VERSION:
        raise RankoptInputError(
            f"{where}: 'rankopt_traffic' must be {TRAFFIC_VERSION} (the format version this "
            f"rankopt reads); got {version!r}."
        )
    unknown = sorted(set(data) - {"rankopt_traffic", "n", "pairs"})
    if unknown:
        raise RankoptInputError(
            f"{where}: unknown key {unknown[0]!r}; a traffic object has 'rankopt_traffic', "
            "'n' and 'pairs'."
        )
    n = _check_n(data.get("n"), where)
    pairs = data.get("pairs")
    if not isinstance(pairs, list):
        raise RankoptInputError(
            f"{where}: 'pairs' must be a list of [src, dst, bytes, messages]; got {pairs!r:.80}."
        )
    for k, p in enumerate(pairs):
        if not isinstance(p, list) or len(p) != 4:
            raise RankoptInputError(
                f"{where}: pair {k} must be [src, dst, bytes, messages]; got {p!r:.80}."
            )
        for v in p:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise RankoptInputError(
                    f"{where}: pair {k} must hold numbers; got {v!r:.40} in {p!r:.80}."
                )
    arr = np.asarray(pairs, dtype=np.float64).reshape(-1, 4)
    return Traffic.from_pairs(n, arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], where=where)


def as_traffic(obj: Any, n: int | None = None, *, where: str = "traffic") -> Traffic:
    """A :class:`Traffic` from what a user holds.

    ``obj`` may be a :class:`Traffic`, a mapping in the file format (or a
    profile holding one under ``"traffic"``), an (n, n) dense or sparse
    matrix of bytes, or a path (:func:`load_traffic`). With ``n``, its size
    must be ``n``.
    """
    import scipy.sparse as sp

    if isinstance(obj, Traffic):
        t = obj
    elif isinstance(obj, (str, Path)) or hasattr(obj, "__fspath__"):
        t = load_traffic(obj)
    elif isinstance(obj, Mapping):
        t = _from_mapping(obj, where)
    elif sp.issparse(obj) or isinstance(obj, (np.ndarray, list)):
        t = Traffic.from_matrix(obj, where=where)
    else:
        raise RankoptInputError(
            f"{where} must be a Traffic, a traffic mapping, an (n, n) matrix of bytes or a "
            f"file; got {type(obj).__name__}."
        )
    if n is not None and t.n != n:
        raise RankoptInputError(f"{where} is for {t.n} ranks; the network has {n} processes.")
    return t


def load_traffic(path: Any) -> Traffic:
    """Read a traffic file: JSON in the format above (or a profile holding it), or ``.mtx``."""
    from rankopt._files import MAX_TEXT_BYTES, open_regular, parse_json, read_text_file

    p = Path(path)
    where = f"traffic file {str(p)!r}"
    if p.suffix.lower() == ".mtx":
        import scipy.io

        try:
            with open_regular(p, what="traffic file", max_bytes=MAX_TEXT_BYTES) as fh:
                m = scipy.io.mmread(fh)
        except OSError as exc:
            raise RankoptInputError(f"cannot read the {where} ({exc}).") from None
        except ValueError as exc:
            raise RankoptInputError(f"{where}: not a Matrix Market matrix ({exc}).") from None
        return Traffic.from_matrix(m, where=where)
    data = parse_json(read_text_file(p, "traffic file"), where)
    if not isinstance(data, Mapping):
        raise RankoptInputError(
            f"{where} must hold a JSON object with 'rankopt_traffic' (or a profile with "
            f"'traffic'); got {type(data).__name__}."
        )
    if "rankopt_traffic" not in data and "traffic" not in data:
        raise RankoptInputError(
            f"{where} holds no traffic: no 'rankopt_traffic' or 'traffic' key (a profile "
            "records it when the program sends point-to-point messages)."
        )
    return _from_mapping(data, where)


def write_traffic(traffic: Traffic, path: Any) -> Path:
    """Write ``traffic`` as a JSON traffic file, atomically (nothing half-written)."""
    from rankopt._files import atomic_write_text

    p = Path(path)
    atomic_write_text(p, json.dumps(traffic.to_dict()) + "\n")
    return p


class TrafficModel(CostModel):
    """Modelled time of a job's point-to-point traffic under a rank order.

    Parameters
    ----------
    latency : ndarray (n, n)
        One-way latency (or a distance) between processes.
    traffic : Traffic
        What each rank sends each other rank (:func:`as_traffic`).
    bandwidth : ndarray (n, n) or None
        Pair bandwidth in bytes/s; without it only the messages' latency
        counts.
    groups : list of ndarray, optional
        Group of each process per level, finest first: what ``"contention"``
        prices the uplinks of, and what a mapper partitions along.
    uplink, uplink_in : ndarray (levels, max G), optional
        Capacity of each group's uplink out of and into the group (bytes/s).
    objective : {"time", "contention"}
        ``"time"`` (what ``solve`` prices by default): ``sum over pairs of
        messages * latency + bytes / bandwidth`` on the processes the two
        ranks run on -- the traffic's cost as if its transfers ran one after
        another. It keeps heavy pairs on fast links whatever the program's
        phases. ``"contention"``: the busiest resource of one phase in which
        every rank sends all of its traffic at once: the largest of each
        process's own sending time (its pairs' α-β times, one after another)
        and each uplink's bytes over its capacity, per direction. A program
        that exchanges in steps (a halo exchange's directions one after
        another) is not one phase, and an order that only spreads its bytes
        over the uplinks can then run slower: measured on the testbed, a 3x3
        halo exchange on three racks of three ran 0.90x the launch order's
        speed under the ``"contention"`` order it was modelled 1.20x faster.

    Notes
    -----
    ``swap_delta`` costs the two ranks' traffic (``O(degree)``) for
    ``"time"``, and a pass over the uplinks for ``"contention"``.
    """

    def __init__(
        self,
        latency: NDArray[np.float64],
        traffic: Traffic,
        *,
        bandwidth: NDArray[np.float64] | None = None,
        groups: Any = None,
        uplink: NDArray[np.float64] | None = None,
        uplink_in: NDArray[np.float64] | None = None,
        objective: str = "time",
    ) -> None:
        if objective not in TRAFFIC_OBJECTIVES:
            raise RankoptInputError(
                f"`objective` for traffic must be one of {', '.join(TRAFFIC_OBJECTIVES)}; "
                f"got {objective!r}."
            )
        lat = np.ascontiguousarray(latency, dtype=np.float64)
        n = lat.shape[0]
        if traffic.n != n:
            raise RankoptInputError(
                f"the traffic is for {traffic.n} ranks; the network has {n} processes."
            )
        self.n = n
        self.objective = objective
        self.traffic = traffic
        self.latency = lat
        self.bandwidth = None if bandwidth is None else np.ascontiguousarray(bandwidth, np.float64)
        m = _csr(traffic.messages)  # its pattern is every pair's (zero-byte ones too)
        self._src, self._dst = _rows_cols(m)
        self._bytes = _values(traffic.bytes, self._src, self._dst)
        self._msgs = np.asarray(m.data, dtype=np.float64)
        # every entry touching a rank: as source (out) or destination (in)
        order_in = np.argsort(self._dst, kind="stable")
        self._out_ptr = np.asarray(m.indptr, dtype=np.int64)
        self._in_idx = order_in
        self._in_ptr = np.concatenate([[0], np.cumsum(np.bincount(self._dst, minlength=n))])
        from rankopt._validation import check_groups

        #: the hierarchy (a mapper partitions along it; "contention" prices its uplinks)
        self.groups: list[NDArray[np.int64]] = [] if groups is None else check_groups(groups, n)
        if objective == "contention":
            if groups is None or uplink is None:
                raise RankoptInputError(
                    "the traffic's contention objective needs `groups` and `uplink_bandwidth`."
                )
            self._up = np.asarray(uplink, dtype=np.float64)
            self._up_in = self._up if uplink_in is None else np.asarray(uplink_in, np.float64)
        self.capabilities = Capabilities(
            latency=lat,
            bandwidth=self.bandwidth,
            groups=tuple(self.groups),
            traffic=traffic,
        )

    # -- the spec ---------------------------------------------------------------------
    def _pair_times(self, order: NDArray[np.int64]) -> NDArray[np.float64]:
        a, b = order[self._src], order[self._dst]
        t = self._msgs * self.latency[a, b]
        if self.bandwidth is not None:
            t = t + self._bytes / self.bandwidth[a, b]
        return t

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        o = np.asarray(order, dtype=np.int64)
        total = 0.0
        busy = np.zeros(self.n)
        for e in range(self._src.size):
            a, b = int(o[self._src[e]]), int(o[self._dst[e]])
            t = self._msgs[e] * self.latency[a, b]
            if self.bandwidth is not None:
                t += self._bytes[e] / self.bandwidth[a, b]
            total += t
            busy[a] += t
        if self.objective == "time":
            return float(total)
        worst = float(busy.max()) if self.n else 0.0
        for level, lab in enumerate(self.groups):
            out: dict[int, float] = {}
            inn: dict[int, float] = {}
            for e in range(self._src.size):
                ga, gb = int(lab[o[self._src[e]]]), int(lab[o[self._dst[e]]])
                if ga != gb:
                    out[ga] = out.get(ga, 0.0) + self._bytes[e]
                    inn[gb] = inn.get(gb, 0.0) + self._bytes[e]
            for g, v in out.items():
                worst = max(worst, v / self._up[level, g])
            for g, v in inn.items():
                worst = max(worst, v / self._up_in[level, g])
        return worst

    # -- fast paths ---------------------------------------------------------------------
    def cost(self, order: NDArray[np.int64]) -> float:
        o = np.asarray(order, dtype=np.int64)
        t = self._pair_times(o)
        if self.objective == "time":
            return float(t.sum())
        busy = np.bincount(o[self._src], weights=t, minlength=self.n)
        worst = float(busy.max()) if self.n else 0.0
        for level, lab in enumerate(self.groups):
            ga, gb = lab[o[self._src]], lab[o[self._dst]]
            cross = ga != gb
            if not cross.any():
                continue
            g = self._up.shape[1]
            out = np.bincount(ga[cross], weights=self._bytes[cross], minlength=g)
            inn = np.bincount(gb[cross], weights=self._bytes[cross], minlength=g)
            worst = max(worst, float(np.max(out / self._up[level, :g])))
            worst = max(worst, float(np.max(inn / self._up_in[level, :g])))
        return worst

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.array([self.cost(o) for o in np.asarray(orders, dtype=np.int64)])

    def _touching(self, i: int, j: int) -> NDArray[np.int64]:
        """The entries whose source or destination is rank ``i`` or ``j``."""
        parts = [
            np.arange(self._out_ptr[i], self._out_ptr[i + 1]),
            np.arange(self._out_ptr[j], self._out_ptr[j + 1]),
            self._in_idx[self._in_ptr[i] : self._in_ptr[i + 1]],
            self._in_idx[self._in_ptr[j] : self._in_ptr[j + 1]],
        ]
        return np.unique(np.concatenate(parts))

    def swap_delta(self, order: NDArray[np.int64], i: int, j: int) -> float:
        if i == j:
            return 0.0
        o = np.asarray(order, dtype=np.int64)
        if self.objective != "time":
            swapped = o.copy()
            swapped[i], swapped[j] = o[j], o[i]
            return self.cost(swapped) - self.cost(o)
        e = self._touching(i, j)
        s, d = self._src[e], self._dst[e]
        before = self._msgs[e] * self.latency[o[s], o[d]]
        p = o.copy()
        p[i], p[j] = o[j], o[i]
        after = self._msgs[e] * self.latency[p[s], p[d]]
        if self.bandwidth is not None:
            before = before + self._bytes[e] / self.bandwidth[o[s], o[d]]
            after = after + self._bytes[e] / self.bandwidth[p[s], p[d]]
        return float(after.sum() - before.sum())

    def describe(self) -> str:
        t = self.traffic
        return (
            f"point-to-point traffic of {t.nnz} pairs, {t.total_bytes:.4g} bytes in "
            f"{t.total_messages:.4g} messages ({self.objective})"
        )
