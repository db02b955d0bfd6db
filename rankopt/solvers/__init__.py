"""Solvers: find the order that minimises a cost model, behind one ``solve()``.

Methods (``solve(method=...)``, registered in ``METHODS``): ``auto``
(:mod:`~rankopt.solvers.solve`), ``exact``, ``brute_force``, ``held_karp``
(:mod:`~rankopt.solvers.exact`), ``nearest_neighbor``, ``two_opt``, ``ils``
(:mod:`~rankopt.solvers.ring`), ``greedy_cluster``
(:mod:`~rankopt.solvers.greedy`), ``anneal`` (:mod:`~rankopt.solvers.anneal`),
``swap`` (:mod:`~rankopt.solvers.swap`), ``layout``
(:mod:`~rankopt.solvers.layout`) and ``map`` (point-to-point traffic,
:mod:`~rankopt.solvers.mapping`).

A method sees a model only through :class:`~rankopt.models.base.CostModel`
(``cost``, ``batch_cost``, ``swap_delta``) and the
:class:`~rankopt.models.base.Capabilities` it declares.
"""

from rankopt.solvers import anneal as _anneal_methods  # noqa: F401
from rankopt.solvers import exact as _exact_methods  # noqa: F401  (registers methods)
from rankopt.solvers import greedy as _greedy_methods  # noqa: F401
from rankopt.solvers import layout as _layout_methods  # noqa: F401
from rankopt.solvers import mapping as _mapping_methods  # noqa: F401
from rankopt.solvers import ring as _ring_methods  # noqa: F401
from rankopt.solvers import swap as _swap_methods  # noqa: F401
from rankopt.solvers._base import METHODS, STOP_REASONS, method_options, show_options
from rankopt.solvers.solve import auto_method, solve
from rankopt.solvers.spec import ModelSpec, Robust

__all__ = [
    "solve",
    "ModelSpec",
    "Robust",
    "auto_method",
    "METHODS",
    "STOP_REASONS",
    "method_options",
    "show_options",
]
