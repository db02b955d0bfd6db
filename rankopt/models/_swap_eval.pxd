# The base of the cost-model evaluators (src_ext/_swap_eval.pyx): a cached
# order and the Python API built on five C-level methods that each evaluator
# defines. Beside the compiled module so that the evaluators can cimport it.

cdef class SwapEval:
    cdef long long[::1] cur  # the cached order (valid: it is set)
    cdef Py_ssize_t n
    cdef bint valid
    cdef double tie  # secondary change of the last ``_delta`` (tie-break; 0 by default)

    cdef void _init_cache(self, Py_ssize_t n)
    cdef double _full(self, const long long[::1] o) noexcept nogil
    cdef double _state_cost(self) noexcept nogil
    cdef void _rebuild(self, const long long[::1] o) noexcept nogil
    cdef void _apply(self, long long i, long long j) noexcept nogil
    cdef double _delta(self, long long i, long long j) noexcept nogil
    cdef void _sync(self, const long long[::1] o) noexcept nogil
