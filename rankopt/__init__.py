"""rankopt: rank reordering for collective operations on hierarchical networks.

measure -> model -> solve -> apply:

- :func:`solve` finds the rank order that minimises a collective's modelled
  time on a latency (and bandwidth) matrix;
- :func:`load_matrix` reads matrices, :func:`synthetic_cloud` makes them;
- ``rankopt.probe`` measures them over MPI or torch.distributed;
- ``rankopt.adapters`` applies an order to MPI communicators, launchers and
  torch.distributed process groups.

Conventions: ``order[k]`` is the original rank of the process that gets new
rank ``k``; ``rank_of = invert(order)``. SI units throughout.
"""

from typing import TYPE_CHECKING, Any

# name -> module that defines it: imported on first use (PEP 562), so that a
# program that needs one corner of the package (``python -m rankopt.mpi`` on
# every rank of a job) does not pay for the solvers' and models' imports.
_LAZY = {
    "solve": "rankopt.solvers",
    "METHODS": "rankopt.solvers",
    "show_options": "rankopt.solvers",
    "SolveResult": "rankopt.solvers.result",
    "ModelSpec": "rankopt.solvers.spec",
    "load_matrix": "rankopt.network.io",
    "check_matrix": "rankopt._validation",
    "check_order": "rankopt._validation",
    "RankoptInputError": "rankopt._validation",
    "RankoptError": "rankopt.errors",
    "invert": "rankopt.order",
    "synthetic_cloud": "rankopt.network.cloud",
    "Cloud": "rankopt.network.cloud",
    "Network": "rankopt.network.core",
    "load_network": "rankopt.network.core",
    "HierarchicalNetwork": "rankopt.network.hierarchical",
    "Measurement": "rankopt.probe.measurement",
    "load_measurement": "rankopt.probe.measurement",
    "cost": "rankopt.models",
    "schedule": "rankopt.models",
    "infer_hierarchy": "rankopt.probe.hierarchy",
}
_SUBPACKAGES = ("adapters", "engines", "models", "network", "probe", "solvers", "testbed")

if TYPE_CHECKING:
    from rankopt import models
    from rankopt._validation import RankoptInputError, check_matrix, check_order
    from rankopt.errors import RankoptError
    from rankopt.models import cost, schedule
    from rankopt.network.cloud import Cloud, synthetic_cloud
    from rankopt.network.core import Network, load_network
    from rankopt.network.hierarchical import HierarchicalNetwork
    from rankopt.network.io import load_matrix
    from rankopt.order import invert
    from rankopt.probe.hierarchy import infer_hierarchy
    from rankopt.probe.measurement import Measurement, load_measurement
    from rankopt.solvers import METHODS, show_options, solve
    from rankopt.solvers.result import SolveResult
    from rankopt.solvers.spec import ModelSpec


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"rankopt.{name}")
    else:
        raise AttributeError(f"module 'rankopt' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))


__version__ = "0.1.0"

__all__ = [
    "solve",
    "SolveResult",
    "ModelSpec",
    "METHODS",
    "show_options",
    "load_matrix",
    "check_matrix",
    "check_order",
    "invert",
    "synthetic_cloud",
    "Cloud",
    "RankoptError",
    "RankoptInputError",
    "Network",
    "HierarchicalNetwork",
    "load_network",
    "Measurement",
    "load_measurement",
    "models",
    "cost",
    "schedule",
    "infer_hierarchy",
    "__version__",
]
