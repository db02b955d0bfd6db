"""``ModelSpec``: what :func:`rankopt.solve` prices, in one object.

Contents
--------
ModelSpec
    The model inputs of a solve: collective, algorithm, objective, message
    size, network overrides, workload, engine and the robust policy,
    validated once when the spec is made.
Robust
    The robust objective's settings, the one form every ``robust=`` value
    (bool, int, mapping, ``"auto"``) is normalised to.
ModelFields
    The spec's fields as keyword arguments (a ``TypedDict``): what
    ``solve(..., **model_fields)`` accepts as shorthands.
MODEL_FIELDS
    Their names.

``solve(latency, "allgather", nbytes=1 << 20)`` and
``solve(latency, model=ModelSpec("allgather", nbytes=1 << 20))`` are the
same solve: the keywords are folded into a spec.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict

import numpy as np
from numpy.typing import ArrayLike

from rankopt._limits import MAX_DRAWS, check_bound
from rankopt._validation import RankoptInputError, check_options, check_quantity, check_straggle
from rankopt.models.robust import ROBUST_DRAWS

if TYPE_CHECKING:
    from rankopt.engines.base import Engine

__all__ = ["ModelSpec", "Robust", "ModelFields", "MODEL_FIELDS", "RobustLike"]


@dataclass(frozen=True)
class Robust:
    """How :func:`rankopt.solve` makes its objective robust to the measured spread.

    Every ``robust=`` value is normalised to a ``Robust`` or ``None`` (off)
    by :meth:`of`: ``True`` is ``Robust()``, an int ``k`` is
    ``Robust(draws=k)``, a mapping gives the keywords and ``"auto"`` is
    ``Robust(auto=True)``.

    Attributes
    ----------
    draws : int
        Networks the cost is taken over: the measured one and ``draws - 1``
        redrawn from every entry's uncertainty (2 to
        :data:`rankopt._limits.MAX_DRAWS`; fewer for a large job, whose
        draws must fit in memory).
    statistic : "mean" or float
        The mean cost over the draws, or a quantile in (0, 1) (``0.9``
        guards against the bad case only).
    auto : bool
        Only when the probe's recheck found the load across an uplink varied
        (:func:`rankopt.network.core.measured_variability`), up to
        :data:`rankopt.solvers.solve.ROBUST_AUTO_MAX_N` processes.

    Examples
    --------
    >>> Robust.of(8), Robust.of(False)
    (Robust(draws=8, statistic='mean', auto=False), None)
    >>> Robust.of({"statistic": 0.9}) == Robust(statistic=0.9)
    True
    """

    draws: int = ROBUST_DRAWS
    statistic: str | float = "mean"
    auto: bool = False

    def __post_init__(self) -> None:
        draws = check_bound(self.draws, "robust", MAX_DRAWS, minimum=2, integer=True)
        object.__setattr__(self, "draws", draws)
        s = self.statistic
        quantile = isinstance(s, (int, float, np.integer, np.floating)) and not isinstance(
            s, (bool, np.bool_)
        )
        if not (s == "mean" if isinstance(s, str) else quantile and 0.0 < float(s) < 1.0):
            raise RankoptInputError(
                f"`robust` statistic must be 'mean' or a quantile in (0, 1); got {s!r}."
            )
        if quantile:
            object.__setattr__(self, "statistic", float(s))
        if not isinstance(self.auto, (bool, np.bool_)):
            raise RankoptInputError(f"`robust` auto must be a bool; got {self.auto!r}.")
        object.__setattr__(self, "auto", bool(self.auto))

    @classmethod
    def of(cls, robust: RobustLike) -> Robust | None:
        """``robust`` as a :class:`Robust`, or ``None`` for no robust objective.

        Raises
        ------
        RankoptInputError
            For a value that is none of the accepted forms, or out of range.
        TypeError
            For a mapping with keys other than ``draws``, ``statistic`` and
            ``auto``.
        """
        if robust is None or isinstance(robust, Robust):
            return robust
        if isinstance(robust, (bool, np.bool_)):
            return cls() if robust else None
        if isinstance(robust, str) and robust == "auto":
            return cls(auto=True)
        if isinstance(robust, (int, np.integer)) and not isinstance(robust, (bool, np.bool_)):
            return cls(draws=int(robust))
        if isinstance(robust, Mapping):
            unknown = set(robust) - {"draws", "statistic", "auto"}
            if unknown:
                raise TypeError(
                    f"`robust` takes 'draws', 'statistic' and 'auto'; got {sorted(unknown)}."
                )
            return cls(**robust)
        raise RankoptInputError(
            f"`robust` must be a bool, a number of networks, a mapping or 'auto'; got {robust!r}."
        )


#: What ``robust=`` accepts; :meth:`Robust.of` normalises it.
RobustLike: TypeAlias = "bool | int | str | Mapping[str, Any] | Robust | None"


@dataclass(frozen=True, eq=False)
class ModelSpec:
    """The model :func:`rankopt.solve` prices: what is run, at what size, on what.

    ``solve(latency, model=ModelSpec(...))`` and ``solve(latency, ...)`` with
    the same fields as keywords are the same solve. The simple fields are
    checked when the spec is made (the errors name the field and the
    value); those that need the matrix (``bandwidth``, ``groups``,
    ``uplink_bandwidth``) when it is solved. A field left at ``None`` is
    the network's (:meth:`rankopt.Network.default_model`).

    Parameters
    ----------
    collective, algorithm : str
        The collective operation and the algorithm the engine runs
        (``rankopt.models.ALGORITHMS``).
    objective : str or callable, optional
        What to minimise. For a network with bandwidth and a hierarchy the
        default is ``"contention"`` at ``nbytes`` (default
        :data:`rankopt.network.DEFAULT_NBYTES`, 16 MiB) with the inferred
        uplinks (:meth:`rankopt.Network.default_model`); for a bare matrix,
        :func:`rankopt.models.default_objective` (``"sum"`` for a ring when
        only latency is known).
        A callable ``f(latency, order) -> float`` (ideally ``@numba.njit``) is
        minimised as is (:class:`rankopt.models.custom.CustomModel`,
        :mod:`rankopt.solvers.custom`).
    nbytes : float, optional
        Message size in bytes (for time models).
    bandwidth : array_like (n, n) or float, optional
        Point-to-point bandwidth in bytes/s (for time models).
    groups, uplink_bandwidth : optional
        Hierarchy labels and uplink capacities (for the contention model).
    straggle : float, optional
        How the transfers of a step share an uplink: ``K`` from one group
        into one group get ``uplink / K**straggle`` each
        (:attr:`rankopt.Network.straggle`). Default: the network's (a probe
        measures it), else 1 (an even split).
    workload : sequence or path, optional
        The job's mix of calls, ``[(collective, nbytes, count), ...]`` (or a
        file, :func:`rankopt.models.workload.load_workload`), kept as a
        tuple of :class:`~rankopt.models.workload.Call`: the objective
        is then the total time of the mix (``sum of count * time``), each
        call priced with the algorithm ``engine`` runs at its size
        (:class:`rankopt.models.workload.WorkloadModel`), with the contention
        model when the network has uplinks, else the α-β time.
    engine : str or Engine, optional
        ``"openmpi"``, ``"mpich"``, ``"gloo"``, ``"nccl"`` or ``"mpi"``
        (:mod:`rankopt.engines`): each call's algorithm is the one this
        engine runs (``algorithm`` must then be left at ``"ring"``). With
        no ``workload``, the workload is the one call ``(collective,
        nbytes)``. The engine and each call's algorithm are recorded in
        ``result.extra["workload"]`` and ``result.notes``.
    traffic : Traffic, mapping, (n, n) matrix or path, optional
        The job's own point-to-point traffic (bytes and messages from each
        rank to each other rank, :class:`rankopt.models.traffic.Traffic`;
        read with :func:`rankopt.models.traffic.as_traffic`). It is priced
        beside the workload's calls (:class:`~rankopt.models.traffic.TrafficModel`):
        alone when there is no ``workload`` (no collective is then assumed,
        even with an ``engine``). A ``workload`` file from ``rankopt
        profile`` that recorded traffic gives it when this is left out.
    robust : bool, int, mapping, Robust or "auto", default "auto"
        Minimise the model's mean cost over networks the measurement cannot
        tell apart instead of its cost on the median network
        (:mod:`rankopt.models.robust`), kept as a :class:`Robust` (or
        ``None``: off). ``"auto"``: robust when the probe's recheck found
        the load across an uplink varied
        (:func:`rankopt.network.core.measured_variability` at least
        :data:`~rankopt.network.core.VARYING_SLOWDOWN`: another tenant's
        traffic coming and going), up to
        :data:`rankopt.solvers.solve.ROBUST_AUTO_MAX_N` processes, with a
        note saying so; ``True`` uses
        :data:`~rankopt.models.robust.ROBUST_DRAWS` networks (the measured
        one and redraws from every entry's uncertainty), an int that many,
        a mapping ``{"draws": 16, "statistic": "mean" | 0.9}`` a quantile.
        Needs a :class:`rankopt.Network`. ``cost`` and ``baseline_cost``
        are then robust costs; ``extra["robust"]`` records the draws and the
        order's cost on the median network.

    Raises
    ------
    RankoptInputError
        For an unknown collective, algorithm, objective or engine, an
        ``nbytes`` or ``straggle`` out of range, a workload that cannot be
        read, a robust setting that is none of the forms above, and for
        fields that contradict each other (a custom objective with a
        workload or an engine; an engine with an algorithm).
    TypeError
        For a ``robust`` mapping with unknown keys.

    See Also
    --------
    rankopt.solve : what solves it; ``SolveResult.model_spec`` records it.

    Notes
    -----
    :meth:`replace` (or :func:`dataclasses.replace`) gives a changed copy,
    validated again. Specs compare equal when their fields do (arrays by
    value).

    Examples
    --------
    >>> import numpy as np, rankopt
    >>> spec = rankopt.ModelSpec("allgather", nbytes=1 << 20)
    >>> spec.nbytes, spec.robust
    (1048576.0, Robust(draws=16, statistic='mean', auto=True))
    >>> rack = np.array([0, 1, 0, 1])
    >>> lat = np.where(rack[:, None] == rack[None, :], 1e-6, 1e-4)
    >>> res = rankopt.solve(lat, model=spec)
    >>> res.order, res.model_spec == spec
    (array([0, 2, 3, 1]), True)
    >>> rankopt.solve(lat, "allgather", nbytes=1 << 20).order.tolist()  # the same solve
    [0, 2, 3, 1]
    >>> spec.replace(nbytes=-1)
    Traceback (most recent call last):
    ...
    rankopt.errors.RankoptInputError: `nbytes` must be positive and finite; got -1 instead.
    """

    collective: str = "allreduce"
    algorithm: str = "ring"
    _: KW_ONLY
    objective: str | Callable[..., float] | None = None
    nbytes: float | None = None
    bandwidth: ArrayLike | float | None = None
    groups: Any = None
    uplink_bandwidth: Any = None
    straggle: float | None = None
    workload: Any = None
    engine: str | Engine | None = None
    traffic: Any = None
    robust: RobustLike = "auto"

    def __post_init__(self) -> None:
        from rankopt.models import ALGORITHMS, OBJECTIVES
        from rankopt.models.schedule import check_collective, ring_pattern

        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        check_options("collective", self.collective, tuple(ALGORITHMS))
        if not isinstance(self.algorithm, str):
            raise RankoptInputError(f"`algorithm` must be a str; got {self.algorithm!r} instead.")
        if self.objective is not None and not callable(self.objective):
            check_options("objective", self.objective, OBJECTIVES)
        if self.nbytes is not None:
            put("nbytes", check_quantity(self.nbytes, "nbytes", "nbytes"))
        if self.straggle is not None:
            put("straggle", check_straggle(self.straggle))
        if self.engine is not None:
            _check_engine(self.engine)
            if self.algorithm != "ring":
                raise RankoptInputError(
                    f"`engine` decides each call's algorithm; got algorithm={self.algorithm!r} "
                    "as well: leave `algorithm` out, or drop `engine` to price the mix with it."
                )
        if self.traffic is not None:
            from rankopt.models.traffic import as_traffic

            put("traffic", as_traffic(self.traffic))
        if _is_path(self.workload):
            from rankopt.models.workload import read_workload_file

            calls, traffic = read_workload_file(self.workload)
            put("workload", calls or None)
            if self.traffic is None:
                put("traffic", traffic)
        elif self.workload is not None:
            from rankopt.models.workload import as_workload

            put("workload", as_workload(self.workload))
        mixed = self.workload is not None or self.engine is not None or self.traffic is not None
        if callable(self.objective) and mixed:
            raise RankoptInputError(
                "a custom objective cannot be combined with `workload`/`engine`/`traffic`."
            )
        if self.workload is None and self.engine is None:
            put("algorithm", ring_pattern(self.collective, self.algorithm))
            check_collective(self.collective, self.algorithm)
        put("robust", Robust.of(self.robust))

    @property
    def robust_policy(self) -> Robust | None:
        """``robust`` as normalised: a :class:`Robust`, or ``None`` (off)."""
        robust = self.robust
        assert robust is None or isinstance(robust, Robust)
        return robust

    def replace(self, **changes: Any) -> ModelSpec:
        """A copy with ``changes`` (field names), validated again."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields in plain Python types: what :class:`ModelSpec` reads back.

        Arrays become lists, the workload a list of ``{"collective",
        "nbytes", "count"}``, an engine object its name, ``robust`` a
        mapping (``False`` when off). A callable objective is kept as is
        (:meth:`rankopt.SolveResult.to_dict` names it as not written).

        Examples
        --------
        >>> d = ModelSpec(nbytes=1e6, workload=[("allreduce", 1e6, 4)]).to_dict()
        >>> d["workload"], d["robust"]
        ([{'collective': 'allreduce', 'nbytes': 1000000.0, 'count': 4.0}], {'draws': 16, 'statistic': 'mean', 'auto': True})
        >>> ModelSpec(**d).to_dict() == d
        True
        """  # noqa: E501
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "workload" and value is not None:
                value = [dataclasses.asdict(c) for c in value]
            elif f.name == "traffic" and value is not None:
                value = value.to_dict()
            elif f.name == "robust":
                value = False if value is None else dataclasses.asdict(value)
            elif f.name == "engine" and value is not None and not isinstance(value, str):
                value = str(value.name)
            out[f.name] = _plain(value)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelSpec):
            return NotImplemented
        return all(
            _same(getattr(self, f.name), getattr(other, f.name)) for f in dataclasses.fields(self)
        )

    __hash__ = None  # type: ignore[assignment]  # arrays and lists in the fields


def _is_path(value: Any) -> bool:
    from pathlib import Path

    return isinstance(value, (str, Path)) or hasattr(value, "__fspath__")


def _check_engine(engine: Any) -> None:
    """An engine object, ``"mpi"`` (detected when priced) or a registered name."""
    from rankopt.engines import get
    from rankopt.engines.base import Engine

    if isinstance(engine, Engine):
        return
    if not isinstance(engine, str):
        raise RankoptInputError(
            f"`engine` must be an engine name or a rankopt Engine; got {engine!r} instead."
        )
    if engine.strip().lower() != "mpi":  # "mpi" loads the MPI library to detect it
        get(engine)


def _plain(value: Any) -> Any:
    """NumPy arrays and numbers as lists and Python numbers, recursively."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(x) for x in value]
    return value


def _same(a: Any, b: Any) -> bool:
    """Equality of field values, arrays by value."""
    from rankopt.models.traffic import Traffic

    if isinstance(a, Traffic) or isinstance(b, Traffic):
        return isinstance(a, Traffic) and isinstance(b, Traffic) and a.to_dict() == b.to_dict()
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
        except (TypeError, ValueError):
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return a is b


class ModelFields(TypedDict, total=False):
    """The fields of :class:`ModelSpec` that ``solve()`` takes as keywords."""

    objective: str | Callable[..., float] | None
    nbytes: float | None
    bandwidth: ArrayLike | float | None
    groups: Any
    uplink_bandwidth: Any
    straggle: float | None
    workload: Any
    engine: str | Engine | None
    traffic: Any
    robust: RobustLike


#: The names of :class:`ModelSpec`'s fields, in order.
MODEL_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ModelSpec))
