"""Apply a rank order: the last step of measure -> model -> solve -> apply.

Submodules (mpi4py and torch are imported lazily, inside functions):

- :mod:`rankopt.adapters.mpi` -- ``reorder(comm, order)``, ``optimize(comm, ...)``,
  ``run_program`` (``python -m rankopt.mpi``).
- :mod:`rankopt.adapters.torch` -- ``ordered_group(order)`` and the launcher behind
  ``rankopt run`` / ``python -m rankopt.run``.
- :mod:`rankopt.adapters.nccl` -- node-granular orders and a prediction of NCCL's
  inter-node ring and double binary trees.
- :mod:`rankopt.adapters.writers` -- Open MPI rankfile, sequential hostfile and
  Slurm arbitrary-distribution hostfile for the next launch.
- :mod:`rankopt.adapters.profile` -- ``rankopt profile``: run the program once
  under the PMPI shim's recording wrappers (or the ``torch.distributed`` hook,
  :mod:`rankopt.adapters._profile_hook`) and write its calls as a workload.

Adapters translate an order; they never optimise.
"""

from __future__ import annotations

from rankopt.adapters.writers import (
    format_hostfile,
    format_rankfile,
    launch_options,
    node_ranks,
    rank_hosts,
    write_deepspeed_hostfile,
    write_hostfile,
    write_rankfile,
    write_slurm_hostfile,
)

__all__ = [
    "format_hostfile",
    "format_rankfile",
    "launch_options",
    "node_ranks",
    "rank_hosts",
    "write_deepspeed_hostfile",
    "write_hostfile",
    "write_rankfile",
    "write_slurm_hostfile",
]
