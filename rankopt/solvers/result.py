"""The result type shared by every solver method."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt.solvers._base import STOP_REASONS
from rankopt.solvers.spec import ModelSpec
from rankopt.units import format_size

__all__ = ["SolveResult"]


#: The scalar fields of :class:`SolveResult` as :meth:`SolveResult.to_dict` writes them.
_PLAIN_FIELDS: tuple[tuple[str, Any], ...] = (
    ("cost", float), ("baseline_cost", float), ("speedup", float), ("method", str),
    ("objective", str), ("collective", str), ("algorithm", str), ("iterations", int),
    ("evaluations", int), ("runtime_s", float), ("stop_reason", str), ("seed", int),
)  # fmt: skip


#: Entries of ``extra`` that :meth:`SolveResult.to_dict` writes at the top level.
_TOP_EXTRA = ("robust", "probe_cache")


class _NotJson(Exception):
    """A value :func:`_json_ready` cannot write as JSON; the message says which and why."""


def _json_ready(value: Any, where: str) -> Any:
    """``value`` in JSON types, or :class:`_NotJson` naming the first part that is not.

    NumPy numbers and arrays become Python numbers and lists, tuples become
    lists; a NaN or an infinity (no JSON number), a key that is not a str
    and any other object are not JSON.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise _NotJson(f"{where} is {float(value)!r}, which JSON has no number for")
        return float(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return _json_ready(value.tolist(), where)
    if isinstance(value, (list, tuple)):
        return [_json_ready(x, f"{where}[{i}]") for i, x in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _NotJson(f"{where} has the key {k!r}, and JSON keys are strings")
            out[k] = _json_ready(v, f"{where}[{k!r}]")
        return out
    raise _NotJson(f"{where} is a {type(value).__name__}")


def _fmt_seconds(x: float) -> str:
    ax = abs(x)
    if ax == 0 or ax >= 1:
        return f"{x:.4g} s"
    if ax >= 1e-3:
        return f"{x * 1e3:.4g} ms"
    if ax >= 1e-6:
        return f"{x * 1e6:.4g} us"
    return f"{x * 1e9:.4g} ns"


@dataclass(frozen=True, eq=False)
class SolveResult:
    """Outcome of :func:`rankopt.solve`.

    Attributes
    ----------
    order : ndarray of int64
        ``order[k]`` is the original rank of the process that gets new rank ``k``.
    rank_of : ndarray of int64
        Inverse of ``order``: the new rank of original process ``i``.
    cost : float
        Modelled cost of ``order`` (seconds for time models); after a robust
        solve, on the measured network (the robust objective's own values are
        ``extra["robust"]["objective_cost"]`` and ``["objective_baseline_cost"]``).
    baseline_cost : float
        Modelled cost of the launch order (identity), on the same network.
    speedup : float
        ``baseline_cost / cost``.
    method, objective, collective, algorithm : str
        What was solved and how (``method`` is the method actually run, also
        when ``"auto"`` was asked for).
    iterations : int
        Improving moves (local search), kicks (ILS) or sweeps, per method.
    evaluations : int
        Cost or move-delta evaluations.
    runtime_s : float
        Wall time of the solve.
    stop_reason : str
        Why the search stopped, one of the closed set
        :data:`rankopt.solvers.STOP_REASONS` (a result with any other is
        refused): ``"optimal"`` (an exact method proved it),
        ``"constructed"`` (a construction, no search), ``"local_optimum"``
        (no improving move left), ``"threshold_converged"`` (the
        bottleneck's threshold search closed), ``"max_iter"``,
        ``"max_evals"``, ``"time_limit"`` (the budgets), ``"launch_order_kept"``
        (nothing beat the launch order, which is returned) and
        ``"contiguous_order_kept"`` (a
        :class:`~rankopt.HierarchicalNetwork`'s hierarchy-contiguous order
        priced no higher than the solved one).
    seed : int
        Pass as ``rng=seed`` to replay the run.
    history : tuple of (float, float)
        ``(seconds since start, best cost)`` pairs: the convergence curve.
    extra : dict
        Method details (``found_cost`` when the launch order was kept,
        ``robust``, ``workload``, ``hierarchical``, ``probe_cache``).
        :meth:`to_dict` writes every entry JSON can hold and names the others.
    nbytes : float or None
        Message size the model priced (bytes).
    speedup_interval : (float, float) or None
        90% interval of the measured speedup as far as the model can tell:
        the networks the measurement's spreads allow, each speedup widened by
        the model's own error (:func:`rankopt.models.robust.model_error`:
        :data:`~rankopt.models.robust.MODEL_ERROR`, wider beside another
        tenant's load the probe saw and for point-to-point traffic);
        measured networks only.
    network : dict or None
        The network solved on: ``n``, ``source``, ``hosts``, ``level_sizes``
        (group sizes per level, finest first), ``uplinks`` (bytes/s per group
        per level), ``has_bandwidth``, ``hierarchy`` (how it was found),
        ``straggle`` and ``straggle_range`` (how transfers share an uplink,
        and what the probe cannot tell apart), ``straggle_read`` (whether the
        probe's sharing test read an exponent; where it did not, ``straggle``
        is an even split drawn over a range), ``elastic`` and
        ``elastic_range`` (how much of other tenants' load yields to more
        transfers, and what the probe cannot tell apart).
    notes : tuple of str
        What was ignored or decided and why (e.g. bandwidth measured but not
        used, the launch order kept).
    model_spec : ModelSpec or None
        The model asked for (:class:`rankopt.ModelSpec`, the keywords of
        ``solve()`` folded in): ``solve(network, model=res.model_spec,
        rng=res.seed)`` replays the run. What the network filled in is in
        ``objective``, ``nbytes`` and ``network``.

    Examples
    --------
    >>> import rankopt, numpy as np
    >>> lat = np.array([[0, 1, 9, 1], [1, 0, 1, 9], [9, 1, 0, 1], [1, 9, 1, 0.]])
    >>> order, cost = rankopt.solve(lat[[0, 2, 1, 3]][:, [0, 2, 1, 3]], rng=0)
    >>> cost
    4.0
    """

    order: NDArray[np.int64]
    rank_of: NDArray[np.int64]
    cost: float
    baseline_cost: float
    speedup: float
    method: str
    objective: str
    collective: str
    algorithm: str
    iterations: int
    evaluations: int
    runtime_s: float
    stop_reason: str
    seed: int
    history: tuple[tuple[float, float], ...] = field(default=(), repr=False)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    nbytes: float | None = None
    speedup_interval: tuple[float, float] | None = None
    network: dict[str, Any] | None = field(default=None, repr=False)
    notes: tuple[str, ...] = ()
    model_spec: ModelSpec | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.stop_reason not in STOP_REASONS:
            raise ValueError(
                f"`stop_reason` must be one of {', '.join(sorted(STOP_REASONS))}; got "
                f"{self.stop_reason!r}."
            )

    def __iter__(self) -> Iterator[Any]:
        yield self.order
        yield self.cost

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SolveResult:
        """The result :meth:`to_dict` wrote (its ``history`` aside).

        ``extra`` is every entry :meth:`to_dict` wrote (``extra`` and the
        top-level ``robust`` and ``probe_cache``), in JSON types: lists where
        the solve had tuples or arrays. Entries it dropped
        (``extra_dropped``) are not there. A dictionary written before
        ``extra`` was kept gives its ``robust`` and ``probe_cache``.
        ``model_spec`` is the ``model`` written, validated again, or None
        when the dictionary has none or a field of it was dropped
        (``model_dropped``).

        Examples
        --------
        >>> import rankopt, numpy as np
        >>> lat = np.array([[0, 1, 9, 1], [1, 0, 1, 9], [9, 1, 0, 1], [1, 9, 1, 0.]])
        >>> res = rankopt.solve(lat, rng=0)
        >>> back = SolveResult.from_dict(res.to_dict())
        >>> back.order.tolist() == res.order.tolist(), back.cost == res.cost
        (True, True)
        """
        interval = d.get("speedup_interval")
        extra = dict(d.get("extra") or {})
        extra.update({k: d[k] for k in _TOP_EXTRA if d.get(k) is not None})
        plain = {name: cast(d[name]) for name, cast in _PLAIN_FIELDS}
        return cls(
            order=np.asarray(d["order"], dtype=np.int64),
            rank_of=np.asarray(d["rank_of"], dtype=np.int64),
            **plain,
            extra=extra,
            nbytes=None if d.get("nbytes") is None else float(d["nbytes"]),
            speedup_interval=None if interval is None else (float(interval[0]), float(interval[1])),
            network=d.get("network"),
            notes=tuple(str(x) for x in d.get("notes") or ()),
            model_spec=None
            if d.get("model") is None or d.get("model_dropped")
            else ModelSpec(**d["model"]),
        )

    def summary(self) -> str:
        """A few readable lines: what was modelled, the modelled gain, how it stopped."""
        n = len(self.order)
        head = ", ".join(str(int(x)) for x in self.order[:16]) + (", ..." if n > 16 else "")
        size = "" if self.nbytes is None else f", message {format_size(self.nbytes)}"
        lines = [
            f"rankopt: {self.collective}/{self.algorithm}, objective={self.objective}{size}, "
            f"n={n}, method={self.method}",
        ]
        if self.network is not None:
            from rankopt.network.core import describe_levels

            sizes = self.network.get("level_sizes") or []
            levels = describe_levels(
                [np.repeat(np.arange(len(s)), s) for s in sizes], self.network.get("uplinks", [])
            )
            lines.append(
                f"  network           : {self.network.get('source')}, "
                + (f"levels {levels}" if levels else "no hierarchy found")
            )
            straggle = float(self.network.get("straggle") or 1.0)
            s_lo, s_hi = self.network.get("straggle_range") or (straggle, straggle)
            if levels and self.objective == "contention" and straggle != 1.0:
                span = f", the interval 1/K^{s_lo:.2f}-1/K^{s_hi:.2f}" if s_hi > s_lo else ""
                lines.append(
                    f"  uplink sharing    : K transfers from one group into one group get "
                    f"1/K^{straggle:.2f} of an uplink each{span} (measured)"
                )
            elif levels and self.objective == "contention" and s_hi > s_lo:
                how = (
                    "an even split (measured)"
                    if self.network.get("straggle_read", True)
                    else "not read (the probe's test of it showed no shared limit): priced as "
                    "an even split"
                )
                lines.append(
                    f"  uplink sharing    : {how}, 1/K of an uplink each, the interval "
                    f"1/K^{s_lo:.2f}-1/K^{s_hi:.2f}"
                )
            elastic = float(self.network.get("elastic") or 0.0)
            lo, hi = self.network.get("elastic_range") or (elastic, elastic)
            if levels and self.objective == "contention" and hi > lo:
                lines.append(
                    "  other tenants     : their load on an uplink is congestion-controlled; "
                    f"priced yielding {elastic:.0%} to more transfers, the interval "
                    f"{lo:.0%}-{hi:.0%} (measured)"
                )
            elif levels and self.objective == "contention" and elastic != 0.0:
                lines.append(
                    f"  other tenants     : their load on an uplink yields {elastic:.0%} to "
                    "more transfers (100%: as TCP does, 0%: keeps its rate; measured)"
                )
        speed = f"{self.speedup:.3f}x"
        if self.speedup_interval is not None:
            lo, hi = self.speedup_interval
            speed += f" (90% interval {lo:.3g}-{hi:.3g}x: measured spread, model error)"
        lines += [
            f"  launch order cost : {_fmt_seconds(self.baseline_cost)} (modelled)",
            f"  optimised cost    : {_fmt_seconds(self.cost)} (modelled)",
            f"  modelled speedup  : {speed}",
            f"  stop              : {self.stop_reason} after {self.iterations} iterations, "
            f"{self.evaluations} evaluations, {self.runtime_s * 1e3:.1f} ms (seed {self.seed})",
            f"  order             : [{head}]",
        ]
        lines += [f"  note              : {t}" for t in self.notes]
        return "\n".join(lines)

    def rank_table(self, hosts: Sequence[str] | None = None) -> str:
        """The new rank -> launch rank (-> host, groups) table, one process a line.

        With a hierarchy, one column per level gives the process's group
        (``L1`` the finest), as Open MPI's ``--display-map`` gives its node:
        consecutive new ranks then show the blocks the order keeps together.
        """
        if hosts is None and self.network is not None:
            hosts = self.network.get("hosts")
        groups = (self.network or {}).get("groups") or []
        groups = [g for g in groups if len(g) == len(self.order)]
        width = max((len(str(h)) for h in hosts), default=4) if hosts else 0
        head = "new rank  launch rank" + (f"  {'host':<{width}}" if hosts else "")
        head += "".join(f"  {'L' + str(k + 1):>4}" for k in range(len(groups)))
        rows = [head.rstrip()]
        for k, r in enumerate(self.order):
            line = f"{k:8d}  {int(r):11d}"
            if hosts:
                line += f"  {str(hosts[int(r)]):<{width}}"
            line += "".join(f"  {int(g[int(r)]):>4}" for g in groups)
            rows.append(line.rstrip())
        if groups:
            rows.append("(L1..: the process's group at each level of the hierarchy, finest first)")
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (lists and plain numbers); :meth:`from_dict` reads it back.

        ``extra`` is written in full where JSON can hold it: ``robust`` and
        ``probe_cache`` at the top level, every other entry under ``extra``,
        NumPy numbers and arrays as numbers and lists. An entry JSON cannot
        hold (an object such as a ``Network``, a NaN or an infinity, a key
        that is not a str) is left out, and ``extra_dropped`` maps its key
        to the reason; ``history`` is not written. ``model`` is
        ``model_spec`` (:meth:`rankopt.ModelSpec.to_dict`; arrays given as
        fields, such as a bandwidth matrix, as lists), a field JSON cannot
        hold (a callable objective) named in ``model_dropped`` alike.

        Examples
        --------
        >>> import dataclasses, rankopt, numpy as np
        >>> lat = np.array([[0, 1, 9, 1], [1, 0, 1, 9], [9, 1, 0, 1], [1, 9, 1, 0.]])
        >>> res = rankopt.solve(lat, rng=0)
        >>> res = dataclasses.replace(res, extra={"tries": np.int64(3), "seen": {1, 2}})
        >>> d = res.to_dict()
        >>> d["extra"], d["extra_dropped"]
        ({'tries': 3}, {'seen': "extra['seen'] is a set"})
        """
        kept, dropped = _json_entries(self.extra, "extra")
        model: dict[str, Any] | None = None
        model_dropped: dict[str, str] = {}
        if self.model_spec is not None:
            model, model_dropped = _json_entries(self.model_spec.to_dict(), "model")
        return {
            "order": [int(x) for x in self.order],
            "rank_of": [int(x) for x in self.rank_of],
            "cost": float(self.cost),
            "baseline_cost": float(self.baseline_cost),
            "speedup": float(self.speedup),
            "method": self.method,
            "objective": self.objective,
            "collective": self.collective,
            "algorithm": self.algorithm,
            "iterations": int(self.iterations),
            "evaluations": int(self.evaluations),
            "runtime_s": float(self.runtime_s),
            "stop_reason": self.stop_reason,
            "seed": int(self.seed),
            "nbytes": self.nbytes,
            "speedup_interval": None
            if self.speedup_interval is None
            else [float(x) for x in self.speedup_interval],
            "modelled": True,
            "network": self.network,
            **{k: kept.pop(k, None) for k in _TOP_EXTRA},
            "extra": kept,
            "extra_dropped": dropped,
            "notes": list(self.notes),
            "model": model,
            "model_dropped": model_dropped,
        }


def _json_entries(entries: Mapping[Any, Any], name: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The entries JSON can hold, and the reason for each of the others, by key."""
    kept: dict[str, Any] = {}
    dropped: dict[str, str] = {}
    for key, value in entries.items():
        try:
            if not isinstance(key, str):
                raise _NotJson(f"the key {key!r} of {name} is not a str")
            kept[key] = _json_ready(value, f"{name}[{key!r}]")
        except _NotJson as exc:
            dropped[str(key)] = str(exc)
    return kept, dropped
