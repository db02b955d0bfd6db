"""A made-up engine, "toyccl": everything adding an engine to rankopt takes.

toyccl is a torch.distributed backend (``init_process_group("toyccl")``)
whose allreduce and allgather run recursive doubling below 64 KiB and a
ring from 64 KiB on, and whose reduce-scatter is always a ring; its other
collectives are left to rankopt's defaults. The probe and the order's
application are those of every torch backend (:class:`TorchEngine`).

Registering it is one line: ``rankopt.engines.register(ToyCCL())``;
``tests/test_engine_contract.py`` then checks it with the suite every
engine passes.
"""

from __future__ import annotations

from rankopt.engines.base import Choice, Env, MPIEngine, Nodes, TorchEngine

__all__ = ["ToyCCL", "ToyMPI", "CROSSOVER"]

#: Bytes from which toyccl's allreduce and allgather switch to the ring.
CROSSOVER = 64 * 1024


class ToyCCL(TorchEngine):
    """toyccl: recursive doubling for small calls, a ring for large ones.

    Examples
    --------
    >>> ToyCCL().algorithm("allreduce", 1024, 8)[0], ToyCCL().algorithm("allreduce", 1e6, 8)[0]
    ('recursive_doubling', 'ring')
    """

    name = "toyccl"
    doc = "toyccl 0.1 (an example engine)"
    source = "toyccl/src/select.c (toyccl 0.1): ring from 64 KiB"
    collectives = ("allreduce", "allgather", "reduce_scatter")
    markers = ("toyccl",)

    def choose(self, collective: str, nbytes: float, n: int, *, env: Env, nodes: Nodes) -> Choice:
        """Recursive doubling below :data:`CROSSOVER` bytes, else the ring."""
        small = collective != "reduce_scatter" and nbytes < CROSSOVER
        model = "recursive_doubling" if small else "ring"
        return model, {"engine_algorithm": model, "rule": "size", "source": self.source}


class ToyMPI(MPIEngine):
    """toympi: an MPICH-derived MPI library with its own launcher, every allreduce a ring.

    Its version string also says "MPICH" (as MVAPICH2's does); its marker is
    the longer match, so :func:`rankopt.engines.from_library` picks it, and
    its launcher's variables are all :func:`rankopt.adapters._env.detect`
    needs to know a process it started.
    """

    name = "toympi"
    doc = "toympi 2.3 (an example MPI engine)"
    source = "toympi/src/coll/allreduce.c (toympi 2.3): ring"
    collectives = ("allreduce",)
    markers = ("toympi2",)
    launch_vars = ("TOY_COMM_WORLD_RANK", "TOY_COMM_WORLD_SIZE")
    local_vars = ("TOY_COMM_WORLD_LOCAL_RANK", "TOY_COMM_WORLD_LOCAL_SIZE")
    job_vars = ("TOY_JOBID",)

    def choose(self, collective: str, nbytes: float, n: int, *, env: Env, nodes: Nodes) -> Choice:
        """Always the ring."""
        return "ring", {"engine_algorithm": "ring", "rule": "fixed", "source": self.source}
