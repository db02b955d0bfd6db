"""``python -m rankopt.mpi [options] program.py args`` -- run an unmodified mpi4py program
on a reordered ``MPI.COMM_WORLD``.

Example::

    mpiexec -n 64 python -m rankopt.mpi --collective allreduce train.py --epochs 3

The probe measures the job's network, rank 0 solves, and the program runs with
``MPI.COMM_WORLD`` replaced by the reordered communicator (see
:func:`rankopt.adapters.mpi.run_program` for what does and does not see it).
"""

from __future__ import annotations

import sys

from rankopt.cli._mpi_main import main

if __name__ == "__main__":
    sys.exit(main())
