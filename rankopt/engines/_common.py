"""Helpers shared by the engine modules: size tables, environment flags, node layouts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rankopt._limits import check_ranks
from rankopt._validation import RankoptInputError, check_options, check_quantity

__all__ = ["Table", "lookup", "env_flag", "env_int", "node_sizes", "check_call", "FALLBACK"]

#: ``((p_below, ((bytes_below, choice), ...)), ...)``: the first row with
#: ``n < p_below``, then the first entry with ``nbytes < bytes_below``
#: (``math.inf`` closes every row and the table), the shape of the
#: ``if (communicator_size < P) { if (total_dsize < S) ...`` chains of the
#: engines' decision functions.
Table = tuple[tuple[float, tuple[tuple[float, Any], ...]], ...]

#: What an engine module answers for a collective it has no table for: the
#: rankopt model closest to what MPI libraries usually run there.
FALLBACK: dict[str, str] = {
    "allreduce": "ring",
    "allgather": "ring",
    "reduce_scatter": "ring",
    "broadcast": "binomial",
    "reduce": "binomial",
    "alltoall": "pairwise",
}


def lookup(table: Table, n: int, nbytes: float) -> Any:
    """The choice of ``table`` for ``n`` processes and ``nbytes`` bytes.

    Examples
    --------
    >>> import math
    >>> lookup(((4, ((8, "a"), (math.inf, "b"))), (math.inf, ((math.inf, "c"),))), 3, 8)
    'b'
    """
    for p_below, row in table:
        if n < p_below:
            for s_below, choice in row:
                if nbytes < s_below:
                    return choice
    raise AssertionError("decision tables end with math.inf")


def env_int(env: Mapping[str, str], key: str, default: int) -> int:
    """``env[key]`` as an integer, ``default`` when unset or empty.

    >>> env_int({"K": " 4 "}, "K", 0), env_int({}, "K", 7)
    (4, 7)
    """
    raw = env.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        return int(str(raw).strip())
    except ValueError:
        raise RankoptInputError(f"{key} must be an integer; got {raw!r}.") from None


def env_flag(env: Mapping[str, str], key: str) -> bool:
    """An MCA/CVAR boolean as the engines read it (1, true, yes, on, t, y)."""
    return str(env.get(key, "")).strip().lower() in ("1", "true", "yes", "on", "t", "y")


def node_sizes(nodes: Sequence[Any] | None, n: int) -> list[int] | None:
    """Processes per node from one node label per rank (``None``: unknown)."""
    if nodes is None:
        return None
    labels = list(nodes)
    if len(labels) != n:
        raise RankoptInputError(
            f"`nodes` must give one node label per rank ({n}); got {len(labels)}."
        )
    counts: dict[Any, int] = {}
    for x in labels:
        counts[x] = counts.get(x, 0) + 1
    return list(counts.values())


def check_call(collective: str, nbytes: float, n: int) -> tuple[float, int]:
    """Validate one call's collective, size and communicator size (the models' own checks)."""
    from rankopt.models.schedule import ALGORITHMS

    check_options("collective", collective, tuple(ALGORITHMS))
    return check_quantity(nbytes, "nbytes", "nbytes"), check_ranks(n, "an engine's call")
