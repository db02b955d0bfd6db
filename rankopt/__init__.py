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

__version__ = "0.1.0"

__all__ = [
    "solve",
    "SolveResult",
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
