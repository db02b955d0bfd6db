"""Build the compiled kernels of rankopt (everything else is in pyproject.toml).

Set ``RANKOPT_DEBUG_CYTHON=1`` to build with bounds checks, wraparound and
initialised-memory checks turned back on (for a debug test run).
"""

import os

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("RANKOPT_DEBUG_CYTHON", "0") not in ("", "0")

#: Kernels translated and compiled at once (one per core; ``build_ext -j N`` overrides).
JOBS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    "nonecheck": False,
    "embedsignature": True,
}

# (module name, source) -- each kernel sits beside the Python module that drives it.
KERNELS = [
    ("rankopt.models._swap_eval", "src_ext/_swap_eval.pyx"),  # base of the three evaluators
    ("rankopt.models._ring_eval", "src_ext/_ring_eval.pyx"),
    ("rankopt.solvers._ring_candidates", "src_ext/_ring_candidates.pyx"),
    ("rankopt.solvers._ring_construct", "src_ext/_ring_construct.pyx"),
    ("rankopt.solvers._ring_search", "src_ext/_ring_search.pyx"),
    ("rankopt.solvers._ring_directed", "src_ext/_ring_directed.pyx"),
    ("rankopt.solvers._exact", "src_ext/_exact.pyx"),
    ("rankopt.models._schedule_eval", "src_ext/_schedule_eval.pyx"),
    ("rankopt.models._step_contention", "src_ext/_step_contention.pyx"),
    ("rankopt.models._pairwise_eval", "src_ext/_pairwise_eval.pyx"),
    ("rankopt.models._flow_eval", "src_ext/_flow_eval.pyx"),
    ("rankopt.solvers._anneal_ring", "src_ext/_anneal_ring.pyx"),
    ("rankopt.solvers._traffic_map", "src_ext/_traffic_map.pyx"),
    ("rankopt.probe._blocks", "src_ext/_blocks.pyx"),
]

extensions = [
    Extension(
        name,
        [src],
        include_dirs=["src_ext"],
        extra_compile_args=["-O3"] if not DEBUG else ["-O0", "-g"],
    )
    for name, src in KERNELS
]


class ParallelBuildExt(build_ext):
    """``build_ext`` that compiles the kernels in parallel unless given ``-j``."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = JOBS


# src_ext holds the header-only .pxd files; "." finds rankopt/models/_swap_eval.pxd,
# the declaration of the evaluators' base class, beside its compiled module.
setup(
    ext_modules=cythonize(
        extensions, compiler_directives=DIRECTIVES, include_path=["src_ext", "."], nthreads=JOBS
    ),
    cmdclass={"build_ext": ParallelBuildExt},
)
