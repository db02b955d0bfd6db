"""Mutation check of the test suite: deliberate bugs that the tests must catch.

Each :class:`Mutant` names one file, one exact snippet of it, the snippet's
buggy replacement and the test files (or test ids) that should fail with
the bug in place. For every mutant the script copies the working tree
(tracked and untracked-but-not-ignored files, plus the built extension
modules) into a fresh temporary folder, applies the replacement there,
rebuilds the one extension when the mutant is in ``src_ext/*.pyx``, and runs
the named tests against that copy with ``-x -q -p no:cacheprovider``. A
plugin written into the copy refuses to run unless ``rankopt`` is imported
from the copy (not the editable install of the checkout).

A mutant is *killed* when pytest reports failing tests (or a collection
error), *survived* when every test passes, *stale* when its snippet is not
found exactly once in the current source (the code changed: the record must
be updated), *error* for anything else (timeout, usage error). The script
prints a table and exits non-zero unless every mutant is killed.

Before the mutants, each distinct test selection runs once on an unmutated
copy (``--no-baseline`` skips it): a kill means something only when the
same tests pass without the bug.

Usage::

    python bench/mutation_check.py              # every mutant, one at a time
    python bench/mutation_check.py --list       # the records and whether they apply
    python bench/mutation_check.py --only NAME  # one mutant (repeatable)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Seconds one mutant's test run may take.
TIMEOUT_S = 900


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: ``original`` (found exactly once in ``path``) becomes ``replacement``."""

    name: str
    path: str
    original: str
    replacement: str
    description: str
    tests: tuple[str, ...]


ALG = "rankopt/models/_algorithms.py"
SCHED_TESTS = ("tests/test_schedule.py",)

MUTANTS: tuple[Mutant, ...] = (
    # ------------------------------------------------------------ schedules
    Mutant(
        "ring_rs_chunk_off_by_one",
        ALG,
        "shift = t + 1 if reduce else t",
        "shift = t if reduce else t",
        "ring reduce-scatter sends chunk l - t instead of l - t - 1 (off by one)",
        SCHED_TESTS,
    ),
    Mutant(
        "ring_drops_a_step",
        ALG,
        "    for t in range(m - 1):\n        blocks = None",
        "    for t in range(m - 2):\n        blocks = None",
        "ring phases run m - 2 steps instead of m - 1 (dropped step)",
        SCHED_TESTS,
    ),
    Mutant(
        "binomial_bcast_off_by_one",
        ALG,
        "big = 1 << max(m - 1, 0).bit_length()",
        "big = 1 << max(m - 2, 0).bit_length()",
        "binomial broadcast's first distance one power of two too small",
        SCHED_TESTS,
    ),
    Mutant(
        "binomial_gloo_largest_first",
        ALG,
        "        d *= 2\n    return steps\n",
        "        d *= 2\n    return steps[::-1]\n",
        "Gloo's binomial broadcast run largest distance first (MPICH's step order)",
        (
            *SCHED_TESTS,
            "tests/test_engines.py::test_gloo_broadcast_schedule_is_the_tree_gloo_builds",
        ),
    ),
    Mutant(
        "gloo_reduce_ring_forward",
        ALG,
        "members = np.array([0, *range(n - 1, 0, -1)], dtype=np.int64)",
        "members = np.arange(n, dtype=np.int64)",
        "Gloo's reduce ring sends to r + 1 instead of r - 1 (gloo/reduce.cc's sendRank)",
        (*SCHED_TESTS, "tests/test_engines.py::test_gloo_reduce_ring_sends_to_the_rank_below"),
    ),
    Mutant(
        "tree_bcast_drops_last_level",
        ALG,
        "for d in range(1, int(depth.max()) + 1)",
        "for d in range(1, int(depth.max()))",
        "tree broadcast never reaches the deepest level (dropped step)",
        SCHED_TESTS,
    ),
    Mutant(
        "rabenseifner_mpich_halving_reversed",
        ALG,
        "    steps += _halving(p2, active, vchunks, 1 / p2, wb)\n",
        "    steps += _halving(p2, active, vchunks, 1 / p2, wb)[::-1]\n",
        "MPICH Rabenseifner: recursive halving run distance 1 first (step order swapped)",
        SCHED_TESTS,
    ),
    Mutant(
        "rabenseifner_ompi_allgather_order",
        ALG,
        "    steps += rs + ag\n",
        "    steps += rs + ag[::-1]\n",
        "Open MPI Rabenseifner: allgather not replayed in reverse (step order swapped)",
        SCHED_TESTS,
    ),
    Mutant(
        "fold_wrong_direction",
        ALG,
        "return [_step(ev, ev + 1, frac, reduce, [blocks_of(int(e)) for e in ev] if wb else [], wb)]",
        "return [_step(ev + 1, ev, frac, reduce, [blocks_of(int(e)) for e in ev] if wb else [], wb)]",
        "MPICH fold: the active odd rank sends to the even one instead of receiving",
        SCHED_TESTS,
    ),
    Mutant(
        "bruck_wrong_direction",
        ALG,
        "steps.append(_step(r, (r - d) % n, cnt / n, False, blocks, wb))",
        "steps.append(_step(r, (r + d) % n, cnt / n, False, blocks, wb))",
        "Bruck allgather sends to r + d instead of r - d",
        SCHED_TESTS,
    ),
    Mutant(
        "chain_repeat_off_by_one",
        ALG,
        "t1 = nseg - 1 - int(fr[-1] != fr[0])",
        "t1 = nseg - int(fr[-1] != fr[0])",
        "pipelined chain: steady-state step repeated once too often",
        SCHED_TESTS,
    ),
    Mutant(
        "hierarchical_inter_ring_payload",
        ALG,
        "mid = parallel(*[ring_phase(rings[c], sub[c], 1 / n, True, wb) for c in range(s)])",
        "mid = parallel(*[ring_phase(rings[c], sub[c], 1 / s, True, wb) for c in range(s)])",
        "hierarchical allreduce: inter-group reduce-scatter moves 1/s instead of 1/n",
        SCHED_TESTS,
    ),
    # --------------------------------------------------- reference evaluators
    Mutant(
        "reference_latency_direction",
        "rankopt/models/network.py",
        "t = float(net.latency[a, b])",
        "t = float(net.latency[b, a])",
        "reference evaluator reads latency[b, a] for a transfer a -> b (asymmetric direction)",
        ("tests/test_mutants_caught.py", "tests/test_models.py::test_compiled_matches_reference"),
    ),
    Mutant(
        "reference_contention_share",
        "rankopt/models/network.py",
        "k_out, k_in = out_cnt[lev, ga], in_cnt[lev, gb]",
        "k_out, k_in = max(out_cnt[lev, ga] - 1, 1), in_cnt[lev, gb]",
        "reference contention: K flows leaving a group get 1/(K-1) of its uplink, not 1/K",
        ("tests/test_mutants_caught.py", "tests/test_models.py::test_compiled_matches_reference"),
    ),
    Mutant(
        "reference_crowding_one_end",
        "rankopt/models/network.py",
        "min(k_out, k_in) ** (net.straggle - 1)",
        "max(k_out, k_in) ** (net.straggle - 1)",
        "reference contention: the sharing exponent on the more crowded end, not on both",
        ("tests/test_sharing.py::test_straggle_prices_the_flows_crowded_at_both_ends",),
    ),
    Mutant(
        "ring_reference_direction",
        "rankopt/models/ring.py",
        "[latency[order[k], order[(k + 1) % len(order)]] for k in range(len(order))]",
        "[latency[order[(k + 1) % len(order)], order[k]] for k in range(len(order))]",
        "ring reference sums the edges k+1 -> k (asymmetric direction)",
        ("tests/test_ring_kernels.py::test_full_costs_equal_reference",),
    ),
    Mutant(
        "bottleneck_weights_by_mean",
        "rankopt/models/ring.py",
        "    _maximum = True\n",
        "    _maximum = False\n",
        "ring bottleneck searched on the mean of both directions instead of their maximum",
        ("tests/test_mutants_caught.py",),
    ),
    # ------------------------------------------------------------ step models
    Mutant(
        "step_model_claims_rotation_invariance",
        "rankopt/models/step.py",
        "            rotation_invariant=ring,\n            ring_schedule=ring,",
        "            rotation_invariant=True,\n            ring_schedule=ring,",
        "every schedule model claims rotation invariance (rank 0 may then move)",
        ("tests/test_method_contract.py",),
    ),
    Mutant(
        "hierarchical_group_order",
        "rankopt/models/step.py",
        "first[lab[::-1]] = self._desc",
        "first[lab] = self._asc",
        "hierarchical model orders groups by their highest new rank, not their lowest",
        ("tests/test_fast_models.py",),
    ),
    Mutant(
        "pairwise_kernel_ignores_direction",
        "rankopt/models/pairwise.py",
        "PairwiseEval(t, t if xor else np.ascontiguousarray(t.T), xor)",
        "PairwiseEval(t, t, xor)",
        "pairwise all-to-all kernel prices transfers into a rank with the outgoing times",
        ("tests/test_fast_models.py",),
    ),
    # --------------------------------------------------------------- workload
    Mutant(
        "workload_ignores_counts",
        "rankopt/models/workload.py",
        "return float(sum(k * m.cost(order) for k, m in self.parts))",
        "return float(sum(m.cost(order) for k, m in self.parts))",
        "workload cost drops each call's count",
        ("tests/test_engines.py::test_workload_model_is_a_cost_model",),
    ),
    Mutant(
        "workload_delta_sign",
        "rankopt/models/workload.py",
        "return float(sum(k * m.swap_delta(order, i, j) for k, m in self.parts))",
        "return -float(sum(k * m.swap_delta(order, i, j) for k, m in self.parts))",
        "workload swap delta has the wrong sign",
        ("tests/test_engines.py::test_workload_model_is_a_cost_model",),
    ),
    # ---------------------------------------------------------------- engines
    Mutant(
        "openmpi_table_threshold",
        "rankopt/engines/openmpi.py",
        "    (8, ((16, 4), (8192, 3), (INF, 6))),",
        "    (8, ((16, 4), (4096, 3), (INF, 6))),",
        "Open MPI fixed allreduce table: recursive doubling below 4 KiB instead of 8 KiB (n < 8)",
        ("tests/test_engines.py::test_open_mpi_fixed_allreduce_table_at_its_boundaries",),
    ),
    Mutant(
        "decision_table_row_off_by_one",
        "rankopt/engines/_common.py",
        "        if n < p_below:",
        "        if n <= p_below:",
        "decision tables: communicator size compared with <= instead of <",
        ("tests/test_engines.py::test_open_mpi_fixed_allreduce_table_at_its_boundaries",),
    ),
    Mutant(
        "openmpi_alltoall_decides_on_total",
        "rankopt/engines/openmpi.py",
        'decide = nbytes / n if collective == "alltoall" else nbytes',
        "decide = nbytes",
        "Open MPI alltoall decided on the whole buffer, not the block to each peer",
        ("tests/test_engines.py::test_open_mpi_alltoall_decides_on_the_block_to_each_peer",),
    ),
    Mutant(
        "mpich_allreduce_small_threshold",
        "rankopt/engines/mpich.py",
        "if nbytes <= 8 or count < _pow2(n):",
        "if nbytes <= 32 or count < _pow2(n):",
        "MPICH allreduce table: recursive doubling up to 32 bytes instead of 8",
        ("tests/test_engines.py::test_mpich_auto_selection_and_cvars",),
    ),
    # ---------------------------------------------------------------- methods
    Mutant(
        "swap_python_delta_sign",
        "rankopt/solvers/swap.py",
        "            if d < -tol:",
        "            if d > tol:",
        "Python swap search applies swaps that raise the cost (wrong delta sign)",
        ("tests/test_method_contract.py",),
    ),
    Mutant(
        "swap_ignores_init",
        "rankopt/solvers/swap.py",
        "order = np.array(ctx.init if ctx.init is not None else identity(model.n), dtype=np.int64)",
        "order = np.array(identity(model.n), dtype=np.int64)",
        "swap search starts from the launch order whatever `init` says",
        ("tests/test_mutants_caught.py", "tests/test_method_contract.py"),
    ),
    Mutant(
        "swap_python_moves_rank0",
        "rankopt/solvers/swap.py",
        "    lo = 1 if pinned else 0\n    m = n - lo\n    if m < 2:",
        "    lo = 0\n    m = n - lo\n    if m < 2:",
        "Python swap search moves position 0 under keep_rank0 (fixed rank 0 not honoured)",
        ("tests/test_mutants_caught.py", "tests/test_method_contract.py"),
    ),
    Mutant(
        "ring_start_ignores_init",
        "rankopt/solvers/ring.py",
        "    if ctx.init is not None:\n        return np.array(ctx.init, dtype=np.int64)\n    if nb is None:",
        "    if nb is None:",
        "ring methods (two_opt, ils, nearest_neighbor) ignore `init`",
        ("tests/test_mutants_caught.py",),
    ),
    Mutant(
        "anneal_ignores_init",
        "rankopt/solvers/anneal.py",
        "    if ctx.init is not None:\n        order = np.array(ctx.init, dtype=np.int64)",
        "    if False:\n        order = np.array(ctx.init, dtype=np.int64)",
        "annealing ignores `init`",
        ("tests/test_mutants_caught.py", "tests/test_method_contract.py"),
    ),
    Mutant(
        "anneal_insert_delta_sign",
        "rankopt/solvers/anneal.py",
        "d = float(model.cost(new)) - cur",
        "d = cur - float(model.cost(new))",
        "annealing scores insert moves with the wrong sign",
        ("tests/test_mutants_caught.py", "tests/test_method_contract.py"),
    ),
    Mutant(
        "anneal_moves_rank0",
        "rankopt/solvers/anneal.py",
        "    lo = 1 if rank0_pinned(model, ctx) else 0\n",
        "    lo = 0\n",
        "annealing moves position 0 under keep_rank0 on a model that is not rotation invariant",
        ("tests/test_method_contract.py",),
    ),
    Mutant(
        "brute_force_always_fixes_rank0",
        "rankopt/solvers/exact.py",
        "    fixed = model.capabilities.rotation_invariant or rank0_pinned(model, ctx)",
        "    fixed = True",
        "brute force pins process 0 at rank 0 on models that are not rotation invariant",
        ("tests/test_solvers.py::test_exact_for_every_model",),
    ),
    Mutant(
        "held_karp_on_symmetrised_matrix",
        "rankopt/solvers/exact.py",
        "cost, order = _exact.held_karp(caps.ring_matrix)",
        "cost, order = _exact.held_karp(caps.ring_weights)",
        "Held-Karp solves the symmetrised matrix, not the directed one",
        ("tests/test_solve.py::test_held_karp_matches_brute_force_directed",),
    ),
    Mutant(
        "greedy_bit_orders_ignore_the_permutation",
        "rankopt/solvers/greedy.py",
        "q |= ((r >> b) & 1) << t",
        "q |= ((r >> b) & 1) << b",
        "greedy clustering's bit mapping ignores the bit permutation",
        ("tests/test_mutants_caught.py", "tests/test_solvers.py::test_bit_orders_is_permutation"),
    ),
    Mutant(
        "greedy_moves_rank0",
        "rankopt/solvers/greedy.py",
        "        if rank0_pinned(self.model, self.ctx):\n            cands = _fix_rank0",
        "        if False:\n            cands = _fix_rank0",
        "greedy clustering scores orders that move rank 0 under keep_rank0",
        ("tests/test_method_contract.py",),
    ),
    # ----------------------------------------------------------------- façade
    Mutant(
        "solve_ignores_bandwidth",
        "rankopt/solvers/solve.py",
        '            "objective": spec.objective,\n            "bandwidth": bandwidth,\n',
        '            "objective": spec.objective,\n            "bandwidth": None,\n',
        "solve() builds its model without the bandwidth it was given",
        ("tests/test_models.py::test_solve_accepts_every_pair",),
    ),
    Mutant(
        "solve_ignores_measured_bandwidth",
        "rankopt/solvers/solve.py",
        '        kw["bandwidth"] = network.bandwidth\n',
        '        kw["bandwidth"] = None\n',
        "solve() drops the bandwidth of a measurement / Network",
        ("tests/test_probe_measurement.py",),
    ),
    Mutant(
        "solve_init_fallback_inverted",
        "rankopt/solvers/solve.py",
        "        if init_cost < cost:",
        "        if init_cost > cost:",
        "solve() returns `init` when it is worse than the method's order, not better",
        ("tests/test_mutants_caught.py",),
    ),
    Mutant(
        "solve_rank0_roll_direction",
        "rankopt/solvers/solve.py",
        "order = np.roll(order, -int(np.flatnonzero(order == 0)[0]))",
        "order = np.roll(order, int(np.flatnonzero(order == 0)[0]))",
        "solve() rotates a ring the wrong way under keep_rank0 (rank 0 not first)",
        ("tests/test_mutants_caught.py", "tests/test_solve.py::test_keep_rank0_and_rotation"),
    ),
    Mutant(
        "seed_not_replayable",
        "rankopt/_rng.py",
        "    return np.random.default_rng(seed), seed",
        "    return (np.random.default_rng() if rng is None else np.random.default_rng(seed)), seed",
        "rng=None: the recorded seed is not the one the run used",
        ("tests/test_mutants_caught.py",),
    ),
    # ------------------------------------------------------- compiled kernels
    Mutant(
        "cython_ring_sum_drops_closing_edge",
        "src_ext/_ring_eval.pyx",
        "        s += w[order[n - 1], order[0]]\n    return s",
        "    return s",
        "compiled ring sum forgets the edge n-1 -> 0 (dropped step)",
        ("tests/test_ring_kernels.py::test_full_costs_equal_reference",),
    ),
    Mutant(
        "cython_contention_share",
        "src_ext/_schedule_eval.pyx",
        "            po[f] = up[f] / (self.share[co[f]] + mo[f])",
        "            po[f] = up[f] / (self.share[co[f] - 1 if co[f] > 1 else 1] + mo[f])",
        "compiled step evaluator: K flows leaving a group get 1/(K-1) of its uplink",
        ("tests/test_models.py::test_compiled_matches_reference",),
    ),
    Mutant(
        "cython_contention_in_share_reads_out",
        "src_ext/_schedule_eval.pyx",
        "            pi[f] = upi[f] / (self.share[ci[f]] + mi[f])",
        "            pi[f] = up[f] / (self.share[ci[f]] + mi[f])",
        "compiled step evaluator: flows entering a group share its uplink out, not its uplink in",
        ("tests/test_directional_uplinks.py",),
    ),
    Mutant(
        "cython_step_contention_in_reads_out",
        "src_ext/_step_contention.pyx",
        "            return mx + self.c[s] / (self.upi[L, g] / (self.share[count] + self.mi[L, g]))",
        "            return mx + self.c[s] / (self.up[L, g] / (self.share[count] + self.mi[L, g]))",
        "incremental contention kernel: the in slot of a group is priced with its uplink out",
        ("tests/test_directional_uplinks.py",),
    ),
    Mutant(
        "cython_flow_uplink_in_reads_out",
        "src_ext/_flow_eval.pyx",
        "                    cap[x] = self.uplink_in[lev, gb]",
        "                    cap[x] = self.uplink[lev, gb]",
        "compiled flow model: the uplink into a group gets the capacity of the one out of it",
        ("tests/test_directional_uplinks.py",),
    ),
    Mutant(
        "cython_flow_alone_in_fold_reads_out",
        "src_ext/_flow_eval.pyx",
        "                    pc = fold(cap, xi, pc, self.uplink_in[lev, gb])",
        "                    pc = fold(cap, xi, pc, self.uplink[lev, gb])",
        "compiled flow model: a lone receiver's uplink folded with its capacity out, not in",
        ("tests/test_directional_uplinks.py",),
    ),
    Mutant(
        "cython_flow_sends_do_not_share_the_link",
        "src_ext/_flow_eval.pyx",
        "                    cap[xo] = self.capout[a]",
        "                    cap[xo] = INF",
        "compiled flow model: a process's concurrent sends each get its whole link",
        ("tests/test_flow.py",),
    ),
    Mutant(
        "cython_flow_in_link_left_out",
        "src_ext/_flow_eval.pyx",
        "                xi = ne + n + b if self.in_shared[self.dst[e]] else -1",
        "                xi = -1",
        "compiled flow model: a process's concurrent receives each get its whole link",
        ("tests/test_flow.py",),
    ),
    Mutant(
        "cython_step_contention_apply_keeps_step_list",
        "src_ext/_step_contention.pyx",
        "                                             self.meta[gs, 0]))\n            self._top_update(s)",
        "                                             self.meta[gs, 0]))",
        "incremental contention kernel: an applied swap leaves the step's list of largest "
        "uplink terms as it was",
        (
            "tests/test_solve_scale.py::test_contention_deltas_equal_the_reference_after_accepted_swaps",
        ),
    ),
    Mutant(
        "cython_step_eval_apply_keeps_moved_times",
        "src_ext/_schedule_eval.pyx",
        "            self.sn[s] = top_drop(&self.sv[s, 0], &self.si[s, 0], self.sn[s], &self.buf[0], k)",
        "            pass",
        "compiled step evaluator: an applied swap leaves the moved transfers' old times listed",
        ("tests/test_solve_scale.py::test_time_deltas_equal_the_reference_after_accepted_swaps",),
    ),
    Mutant(
        "layout_pieces_unaligned",
        "rankopt/solvers/layout.py",
        "    pieces.sort(key=lambda p: (-p[0], p[1]))",
        "    pieces.sort(key=lambda p: (p[1], -p[0]))",
        "packed layout: a group's power-of-two pieces follow each other, off their aligned blocks",
        (
            "tests/test_solve_scale.py::test_packed_order_puts_power_of_two_groups_on_aligned_blocks",
        ),
    ),
    Mutant(
        "cython_flow_alone_uplink_dropped",
        "src_ext/_flow_eval.pyx",
        "    return u if u < pc else pc",
        "    return pc",
        "compiled flow model: a lone process's uplink is not folded into its one flow",
        ("tests/test_flow.py",),
    ),
    Mutant(
        "cython_flow_forward_skips_latency",
        "src_ext/_flow_eval.pyx",
        "                            start[x] = now + elat[x]",
        "                            start[x] = now",
        "compiled flow model: a forwarded send starts moving bytes with no latency",
        ("tests/test_flow.py",),
    ),
    Mutant(
        "flow_spec_down_reads_out",
        "rankopt/models/flow.py",
        'keys.append((("down", lev, gb), float(net.uplink_in[lev, gb])))',
        'keys.append((("down", lev, gb), float(net.uplink[lev, gb])))',
        "flow spec: the uplink into a group gets the capacity of the one out of it",
        (
            "tests/test_directional_uplinks.py::test_flow_single_transfer_is_capped_by_the_receivers_uplink_in",
        ),
    ),
    Mutant(
        "concurrent_in_load_over_out",
        "rankopt/models/concurrent.py",
        "(gb[cross], net.uplink_in[lev])",
        "(gb[cross], net.uplink[lev])",
        "concurrent all-to-all: the load into a group divided by its uplink out",
        (
            "tests/test_directional_uplinks.py::test_concurrent_alltoall_busiest_uplink_per_direction",
        ),
    ),
    Mutant(
        "flow_spec_no_refill",
        "rankopt/models/flow.py",
        "                    left[c] = max(left[c] - level, 0.0)",
        "                    left[c] = 0.0",
        "flow spec: a filled flow takes all that is left of its other links (no max-min refill)",
        ("tests/test_flow.py",),
    ),
    # ------------------------------------ sizes that are not powers of two
    Mutant(
        "binary_tree_parent_off_by_one",
        "rankopt/models/_algorithms.py",
        "    parent = np.array([-1] + [(k - 1) // 2 for k in range(1, n)], dtype=np.int64)",
        "    parent = np.array([-1] + [k // 2 for k in range(1, n)], dtype=np.int64)",
        "binary-tree broadcast: parent k // 2 (the same depth on powers of two, deeper elsewhere)",
        ("tests/test_algorithm_contract.py",),
    ),
    Mutant(
        "bruck_last_step_full",
        "rankopt/models/_algorithms.py",
        "        cnt = min(d, n - d)",
        "        cnt = d",
        "Bruck allgather: the last step sends d blocks where n - d are left (not a power of two)",
        ("tests/test_algorithm_contract.py",),
    ),
    # ------------------------------------------------ the last block of a tile loop
    Mutant(
        "is_symmetric_skips_last_column",
        "src_ext/_ring_eval.pyx",
        "            while j0 < n and sym:\n                jend = j0 + B if j0 + B < n else n",
        "            while j0 < n and sym:\n                jend = j0 + B if j0 + B < n else n - 1",
        "is_symmetric: the last tile of each row band stops one column short",
        ("tests/test_ring_kernels.py::test_is_symmetric_sees_one_asymmetric_pair_anywhere",),
    ),
    Mutant(
        "symmetrize_skips_last_column",
        "src_ext/_ring_eval.pyx",
        "            while j0 < n:\n                jend = j0 + B if j0 + B < n else n",
        "            while j0 < n:\n                jend = j0 + B if j0 + B < n else n - 1",
        "symmetrize: the last tile of each row band stops one column short (left unwritten)",
        ("tests/test_ring_kernels.py::test_symmetrize_writes_every_entry",),
    ),
    # ------------------------------------------ documented thresholds, at the limit
    Mutant(
        "auto_brute_force_limit",
        "rankopt/solvers/solve.py",
        '    if n <= 8:\n        return "brute_force"',
        '    if n < 8:\n        return "brute_force"',
        "auto rule: brute force below 8 processes, not up to 8 as documented",
        ("tests/test_solvers.py::test_auto_rule_at_each_documented_limit",),
    ),
    Mutant(
        "auto_held_karp_limit",
        "rankopt/solvers/solve.py",
        "caps.ring_sum_exact and n <= min(AUTO_EXACT_MAX_N, HELD_KARP_MAX_N)",
        "caps.ring_sum_exact and n < min(AUTO_EXACT_MAX_N, HELD_KARP_MAX_N)",
        "auto rule: Held-Karp below 12 processes, not up to 12 as documented",
        ("tests/test_solvers.py::test_auto_rule_at_each_documented_limit",),
    ),
    Mutant(
        "auto_greedy_time_limit_inclusive",
        "rankopt/solvers/solve.py",
        '    if time_limit is not None and time_limit < 1e-5 * n:\n        return "greedy_cluster"',
        '    if time_limit is not None and time_limit <= 1e-5 * n:\n        return "greedy_cluster"',
        "auto rule: greedy_cluster at exactly 10 us per process, documented as under it",
        ("tests/test_solvers.py::test_auto_rule_at_each_documented_limit",),
    ),
    # --------------------------------------------- directional (asymmetric) rates
    Mutant(
        "chain_kernel_reads_reverse_rate",
        "src_ext/_schedule_eval.pyx",
        "            r = bw[a, b] if has_bw else INF",
        "            r = bw[b, a] if has_bw else INF",
        "chain kernel: a link's rate read in the other direction",
        ("tests/test_algorithm_contract.py",),
    ),
    Mutant(
        "step_cache_keeps_reverse_rate",
        "src_ext/_schedule_eval.pyx",
        "                    self.tr[e] = (self.bw[o[self.src[e]], o[self.dst[e]]] if self.has_bw else INF)",
        "                    self.tr[e] = (self.bw[o[self.dst[e]], o[self.src[e]]] if self.has_bw else INF)",
        "step evaluator: the pair rate cached for a swap's untouched transfers is the reverse one",
        (
            "tests/test_directional_uplinks.py::"
            "test_swap_deltas_after_accepted_swaps_read_each_direction",
        ),
    ),
    # --------------------------------------------- the ring's direction beside load
    Mutant(
        "gloo_ring_sends_forward",
        ALG,
        "    members = np.array([0, *range(n - 1, 0, -1)], dtype=np.int64)  # 0 -> n-1 -> ... -> 1\n"
        "    chunks = [(int(r),) for r in members]\n    return (",
        "    members = np.arange(n, dtype=np.int64)\n"
        "    chunks = [(int(r),) for r in members]\n    return (",
        "Gloo's ring allreduce priced sending to r + 1, as Open MPI's",
        ("tests/test_ring_direction.py",),
    ),
    Mutant(
        "direction_rule_counts_gloo_forward",
        "rankopt/solvers/solve.py",
        '_RING_STEP = {"ring": 1, "ring_gloo": -1, "allreduce_gloo": -1}',
        '_RING_STEP = {"ring": 1, "ring_gloo": 1, "allreduce_gloo": 1}',
        "the direction rule counts Gloo's hops as if it sent to r + 1",
        ("tests/test_ring_direction.py",),
    ),
    Mutant(
        "direction_rule_reads_host_links",
        "rankopt/solvers/solve.py",
        "    skip = 1 if network.hosts is not None else 0",
        "    skip = 0",
        "the direction rule counts the host level's own links as loaded uplinks",
        ("tests/test_ring_direction.py",),
    ),
    Mutant(
        "uneven_block_read_by_its_second_best",
        "rankopt/network/core.py",
        "                low = float(block.min())",
        "                low = float(np.sort(block)[1])",
        "a block's slowest pair is read as its second slowest: one pair beside load is missed",
        ("tests/test_ring_direction.py",),
    ),
    Mutant(
        "uneven_block_without_its_noise",
        "rankopt/network/core.py",
        "                if low < UNEVEN_BELOW * mid and low < mid - UNEVEN_SIGMAS * sigma:",
        "                if low < UNEVEN_BELOW * mid:",
        "a merely noisy block counts as load that comes and goes",
        ("tests/test_ring_direction.py",),
    ),
)

#: A pytest plugin written into each copy: the run stops unless rankopt comes from the copy.
_GUARD = '''\
"""Refuse to run unless rankopt is imported from this copy (mutation check)."""
import os

import pytest


def pytest_configure(config):
    import rankopt

    root = os.path.realpath(os.environ["RANKOPT_MUTANT_ROOT"])
    where = os.path.realpath(rankopt.__file__)
    if not where.startswith(root + os.sep):
        raise pytest.UsageError(f"rankopt imported from {where}, not from the copy {root}")
    with open(os.path.join(root, "_mutation_guard.ok"), "w") as f:
        f.write(where)
'''

#: Rebuild one extension of ``setup.py`` (``argv[1]``: its ``.pyx`` source) in place, and
#: build the ones whose module is missing from the copy (a kernel added since the last build).
_BUILD_ONE = """\
import os
import sys
import sysconfig

import Cython.Build
import setuptools

captured = {}
real_cythonize, real_setup = Cython.Build.cythonize, setuptools.setup
Cython.Build.cythonize = lambda exts, **kw: captured.update(exts=exts, kw=kw) or []
setuptools.setup = lambda **kw: None
exec(compile(open("setup.py").read(), "setup.py", "exec"), {"__name__": "__main__"})
Cython.Build.cythonize, setuptools.setup = real_cythonize, real_setup
mutated = [e for e in captured["exts"] if e.sources == [sys.argv[1]]]
assert len(mutated) == 1, sys.argv[1]
suffix = sysconfig.get_config_var("EXT_SUFFIX")
missing = [
    e for e in captured["exts"]
    if e not in mutated and not os.path.exists(e.name.replace(".", "/") + suffix)
]
exts = real_cythonize(mutated, force=True, **captured["kw"])
exts += real_cythonize(missing, **captured["kw"]) if missing else []
real_setup(ext_modules=exts, script_args=["build_ext", "--inplace"])
"""


def tree_files(repo: Path) -> list[str]:
    """Tracked and untracked-but-not-ignored files, plus the built extension modules."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        check=True,
        capture_output=True,
    ).stdout.decode()
    files = [f for f in out.split("\0") if f and (repo / f).is_file()]
    return sorted(set(files) | set(built_extensions(repo)))


def built_extensions(repo: Path) -> list[str]:
    """The compiled modules built in place (``rankopt/**/*.so``)."""
    return [str(p.relative_to(repo)) for p in sorted((repo / "rankopt").rglob("*.so"))]


def copy_tree(repo: Path, dest: Path, source: str = "worktree") -> None:
    """Copy the working tree (``source="worktree"``) or the last commit (``"head"``).

    The built extension modules always come from the working tree; file
    times are kept, so they stay newer than their sources.
    """
    if source == "head":
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", "--format=tar", "HEAD"], cwd=repo, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        files = built_extensions(repo)
    else:
        files = tree_files(repo)
    for f in files:
        target = dest / f
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / f, target)


def read_source(path: str, source: str = "worktree", repo: Path = REPO) -> str | None:
    """The text of ``path`` in the working tree or the last commit (``None``: no such file)."""
    if source == "head":
        proc = subprocess.run(
            ["git", "show", f"HEAD:{path}"], cwd=repo, capture_output=True, text=True
        )
        return proc.stdout if proc.returncode == 0 else None
    p = repo / path
    return p.read_text() if p.is_file() else None


def snippet_status(m: Mutant, source: str = "worktree") -> str:
    """``"ok"`` when the snippet occurs exactly once, else what is wrong."""
    text = read_source(m.path, source)
    if text is None:
        return f"stale: {m.path} not found"
    count = text.count(m.original)
    if count != 1:
        return f"stale: snippet found {count} times in {m.path}"
    return "ok"


def _env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env["RANKOPT_MUTANT_ROOT"] = str(copy)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("HYPOTHESIS_PROFILE", "ci")
    shared = REPO.parent / "shared" / "data"
    if "RANKOPT_SHARED_DATA" not in env and (shared / "optima.csv").exists():
        env["RANKOPT_SHARED_DATA"] = str(shared)
    return env


def _first_failure(output: str) -> str:
    hit = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
    return hit.group(1) if hit else ""


def run_tests(copy: Path, tests: Sequence[str], timeout: float = TIMEOUT_S) -> tuple[int, str]:
    """Run ``tests`` in ``copy``; return pytest's exit code and its output."""
    (copy / "_mutation_guard.py").write_text(_GUARD)
    marker = copy / "_mutation_guard.ok"
    marker.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider"]
    cmd += ["-p", "_mutation_guard"]
    proc = subprocess.Popen(
        cmd,
        cwd=copy,
        env=_env(copy),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        return -1, output + f"\ntimeout after {timeout:.0f} s"
    finally:  # interrupted (Ctrl-C, SIGTERM): the test run goes with us
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode in (0, 1, 2) and not marker.is_file():
        return 4, output + "\nthe guard plugin did not confirm that rankopt came from the copy"
    return proc.returncode, output


def build_extension(copy: Path, source: str) -> tuple[bool, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _BUILD_ONE, source],
        cwd=copy,
        env=_env(copy),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    return proc.returncode == 0, proc.stdout + proc.stderr


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | stale | error
    detail: str
    seconds: float


def check(
    m: Mutant, *, source: str = "worktree", keep: bool = False, verbose: bool = False
) -> Outcome:
    t0 = time.perf_counter()
    st = snippet_status(m, source)
    if st != "ok":
        return Outcome(m, "stale", st, 0.0)
    tmp = Path(tempfile.mkdtemp(prefix=f"rankopt-mutant-{m.name}-"))
    copy = tmp / "repo"
    try:
        copy_tree(REPO, copy, source)
        target = copy / m.path
        text = target.read_text()
        if text.count(m.original) != 1:  # changed between the check and the copy
            return Outcome(m, "stale", f"snippet not found once in the copy of {m.path}", 0.0)
        target.write_text(text.replace(m.original, m.replacement))
        if m.path.endswith(".pyx"):
            ok, log = build_extension(copy, m.path)
            if not ok:
                return Outcome(
                    m, "error", "rebuild failed: " + log[-300:], time.perf_counter() - t0
                )
        rc, output = run_tests(copy, m.tests)
        if verbose:
            print(output)
        secs = time.perf_counter() - t0
        if rc in (1, 2):
            return Outcome(m, "killed", _first_failure(output) or f"pytest exit {rc}", secs)
        if rc == 0:
            return Outcome(m, "survived", "all selected tests passed", secs)
        return Outcome(m, "error", f"pytest exit {rc}: {output.strip()[-300:]}", secs)
    finally:
        if keep:
            print(f"kept {copy}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def baseline(tests: Sequence[str], source: str = "worktree") -> tuple[int, str]:
    """Run every selected test once, in one pytest run, on an unmutated copy."""
    tmp = Path(tempfile.mkdtemp(prefix="rankopt-mutant-baseline-"))
    copy = tmp / "repo"
    try:
        copy_tree(REPO, copy, source)
        rc, output = run_tests(copy, tests, timeout=3 * TIMEOUT_S)
        return rc, _first_failure(output) or output.strip()[-300:]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _selection(mutants: Sequence[Mutant]) -> list[str]:
    """The tests of ``mutants``, each once: a test id is dropped when its file is selected."""
    tests = list(dict.fromkeys(t for m in mutants for t in m.tests))
    files = {t for t in tests if "::" not in t}
    return [t for t in tests if "::" not in t or t.split("::")[0] not in files]


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--list", action="store_true", help="list the mutants and whether they apply")
    p.add_argument("--only", action="append", metavar="NAME", help="run this mutant (repeatable)")
    p.add_argument("--no-baseline", action="store_true", help="skip the unmutated runs")
    p.add_argument("--keep", action="store_true", help="keep the mutated copies")
    p.add_argument("-v", "--verbose", action="store_true", help="print pytest's output")
    p.add_argument(
        "--source",
        choices=("worktree", "head"),
        default="worktree",
        help="mutate the working tree (default) or the last commit",
    )
    args = p.parse_args(argv)
    names = {m.name for m in MUTANTS}
    if len(names) != len(MUTANTS):
        raise SystemExit("mutant names must be unique")
    if args.list:
        rows = [("name", "file", "snippet", "tests", "description")]
        rows += [
            (m.name, m.path, snippet_status(m, args.source), " ".join(m.tests), m.description)
            for m in MUTANTS
        ]
        print(_table(rows))
        return 0 if all(snippet_status(m, args.source) == "ok" for m in MUTANTS) else 1
    chosen = list(MUTANTS)
    if args.only:
        unknown = sorted(set(args.only) - names)
        if unknown:
            raise SystemExit(f"unknown mutant(s): {', '.join(unknown)}")
        chosen = [m for m in MUTANTS if m.name in args.only]
    signal.signal(signal.SIGTERM, _interrupt)
    if not args.no_baseline:
        ok = [m for m in chosen if snippet_status(m, args.source) == "ok"]
        t0 = time.perf_counter()
        rc, detail = baseline(_selection(ok), args.source)
        state = "pass" if rc == 0 else f"FAIL (exit {rc}): {detail}"
        print(f"baseline (unmutated, {time.perf_counter() - t0:.0f} s): {state}", flush=True)
        if rc != 0:
            print("the unmutated tests fail: the kills below would mean nothing")
            return 2
    outcomes = []
    for m in chosen:
        o = check(m, source=args.source, keep=args.keep, verbose=args.verbose)
        print(f"{o.status:8s} {m.name} ({o.seconds:.0f} s) {o.detail}", flush=True)
        outcomes.append(o)
    rows = [("mutant", "file", "status", "killed by", "description")]
    rows += [(o.mutant.name, o.mutant.path, o.status, o.detail, o.mutant.description)
             for o in outcomes]  # fmt: skip
    print()
    print(_table(rows))
    counts = {
        s: sum(o.status == s for o in outcomes) for s in ("killed", "survived", "stale", "error")
    }
    print("\n" + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0 if counts["killed"] == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
