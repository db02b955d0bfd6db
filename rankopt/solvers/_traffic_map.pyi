"""Stub of the compiled kernels of the ``map`` method (``src_ext/_traffic_map.pyx``)."""

import numpy as np
from numpy.typing import NDArray

_I = NDArray[np.int64]
_F = NDArray[np.float64]

def bisect(
    xadj: _I,
    adj: _I,
    w: _F,
    members: _I,
    size_a: int,
    seed: int,
    tries: int,
    passes: int,
    loc: _I,
    coarsen_to: int = 0,
    flat_tries: int = 0,
    cycles: int = 1,
) -> tuple[NDArray[np.int8], float]: ...
def time_cost(
    out_ptr: _I, dst: _I, msgs: _F, nbytes: _F, lat: _F, bw: _F, has_bw: bool, order: _I
) -> float: ...
def swap_delta(
    out_ptr: _I,
    dst: _I,
    in_ptr: _I,
    in_src: _I,
    in_eid: _I,
    msgs: _F,
    nbytes: _F,
    lat: _F,
    bw: _F,
    has_bw: bool,
    order: _I,
    i: int,
    j: int,
) -> float: ...
def refine_time(
    out_ptr: _I,
    dst: _I,
    in_ptr: _I,
    in_src: _I,
    in_eid: _I,
    msgs: _F,
    nbytes: _F,
    lat: _F,
    bw: _F,
    has_bw: bool,
    near_ptr: _I,
    near_idx: _I,
    order: _I,
    seed: int,
    max_evals: int,
    max_moves: int,
    time_limit: float,
    pinned: bool,
    tol: float,
    full: bool,
    kicks: int = 0,
) -> tuple[int, int, int]: ...
def greedy_place(
    out_ptr: _I,
    dst: _I,
    in_ptr: _I,
    in_src: _I,
    in_eid: _I,
    msgs: _F,
    nbytes: _F,
    lat: _F,
    bw: _F,
    has_bw: bool,
    weight: _F,
    first_proc: int,
    order: _I,
) -> None: ...
