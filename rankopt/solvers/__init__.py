"""Solvers: find the order that minimises a cost model, behind one ``solve()``.

Methods (``solve(method=...)``): ``auto``, ``exact``, ``brute_force``,
``held_karp``, ``nearest_neighbor``, ``two_opt``, ``ils``, ``greedy_cluster``,
``anneal``; see each module.
"""

from rankopt.solvers import anneal as _anneal_methods  # noqa: F401
from rankopt.solvers import exact as _exact_methods  # noqa: F401  (registers methods)
from rankopt.solvers import greedy as _greedy_methods  # noqa: F401
from rankopt.solvers import ring as _ring_methods  # noqa: F401
from rankopt.solvers import swap as _swap_methods  # noqa: F401
from rankopt.solvers._base import METHODS
from rankopt.solvers.solve import auto_method, solve

__all__ = ["solve", "auto_method", "METHODS"]
