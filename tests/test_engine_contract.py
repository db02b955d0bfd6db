"""One contract for every registered engine, and for the example engine of tests/example_engine.py.

An engine (:class:`rankopt.engines.base.Engine`) answers four questions:
which algorithm it runs for a call, which probe transport measures over it,
which function applies an order, and which launcher environment it runs
under. Each test below asks one of them of every engine, so an engine is
done when it passes this file; ``toyccl`` shows that a new one needs only
its module and its registration line.
"""

from __future__ import annotations

import inspect
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest
from _launcher_env import detected, world_env
from example_engine import CROSSOVER, ToyCCL, ToyMPI

import rankopt
from rankopt import RankoptInputError
from rankopt.adapters._env import detect
from rankopt.adapters._launch import LaunchDecision, child_env
from rankopt.engines import ENGINES, from_backend, from_library, get, register
from rankopt.engines.base import FAMILIES, UNTABULATED_SOURCE, Engine
from rankopt.models import make_model
from rankopt.models.schedule import ALGORITHMS, schedule
from rankopt.models.workload import Call, price_calls

KIB = 1024
#: every registered engine, then the example one (registered by the fixture below)
NAMES = [*ENGINES, ToyCCL.name]
#: message sizes around the usual switch points, 1 B to 1 GiB
SIZES = [1, 8, 2 * KIB, 2 * KIB + 8, 4 * KIB, 8 * KIB, 64 * KIB - 8, 64 * KIB, 256 * KIB, 1 << 20,
         16 << 20, 256 << 20, 1 << 30]  # fmt: skip
COMM_SIZES = range(2, 65)


@pytest.fixture(scope="module", autouse=True)
def toyccl():
    """The example engine, registered as a user registers one (and removed afterwards)."""
    engine = register(ToyCCL())
    yield engine
    del ENGINES[engine.name]


@pytest.fixture(params=NAMES)
def engine(request) -> Engine:
    return get(request.param)


def _two_nodes(n: int) -> list[str]:
    return ["a" if i < (n + 1) // 2 else "b" for i in range(n)]


# ------------------------------------------------------------ registration
def test_registered_once_under_its_name(engine):
    assert isinstance(engine, Engine) and ENGINES[engine.name] is engine
    assert get(engine.name.upper()) is engine and get(engine) is engine
    assert register(engine) is engine  # the same instance again: a no-op
    with pytest.raises(RankoptInputError, match="is registered already"):
        register(type(engine)())
    assert register(engine, replace=True) is engine


def test_declares_the_interface(engine):
    assert engine.name == engine.name.strip().lower() and engine.name not in ("mpi", "none")
    assert engine.doc.strip() and engine.source.strip()
    assert engine.collectives and set(engine.collectives) <= set(ALGORITHMS)
    assert engine.granularity in ("rank", "node")
    assert engine.family in FAMILIES
    assert engine.markers and all(m == m.lower() and m.strip() for m in engine.markers)
    rank_var, size_var = engine.launch_vars
    assert rank_var != size_var and rank_var.isupper() and size_var.isupper()
    assert isinstance(engine.probe_module, str) and ":" in engine.apply_function


def test_register_refuses_what_is_not_an_engine():
    with pytest.raises(RankoptInputError, match="must be an Engine instance"):
        register("toyccl")  # type: ignore[arg-type]

    class Odd(ToyCCL):
        name = "odd"
        family = "ucx"

    with pytest.raises(RankoptInputError, match="`family` must be one of"):
        register(Odd())
    assert "odd" not in ENGINES


# -------------------------------------------------------- algorithm choice
@pytest.mark.parametrize("collective", sorted(ALGORITHMS))
def test_choice_is_a_model_of_the_collective(engine, collective):
    for n in COMM_SIZES:
        for nodes in (None, _two_nodes(n)):
            for nbytes in SIZES:
                alg, params = engine.algorithm(collective, nbytes, n, env={}, nodes=nodes)
                where = (engine.name, collective, n, nbytes, nodes is not None)
                assert alg in ALGORITHMS[collective], where
                assert params["engine"] == engine.name, where
                assert isinstance(params["source"], str) and params["source"], where
                assert "rule" in params and "engine_algorithm" in params, where
                if collective in engine.collectives:
                    assert params["rule"] != "untabulated", where
                else:
                    assert (params["rule"], params["source"]) == ("untabulated", UNTABULATED_SOURCE)
                if engine.granularity != "rank":
                    assert params["granularity"] == engine.granularity


def test_tables_name_their_source(engine):
    """Without a node layout every tabulated call cites the engine's source."""
    for collective in engine.collectives:
        for nbytes in SIZES:
            params = engine.algorithm(collective, nbytes, 16, env={})[1]
            assert params["source"] == engine.source, (collective, nbytes)
    module = sys.modules[type(engine).__module__]
    assert (module.__doc__ or "").strip() and (type(engine).__doc__ or "").strip()
    assert (type(engine).choose.__doc__ or "").strip()


def test_choice_is_deterministic_and_reads_only_the_given_env(engine, monkeypatch):
    calls = [(c, s, n) for c in engine.collectives for s in (8, 64 * KIB, 16 << 20)
             for n in (2, 7, 16)]  # fmt: skip
    first = [engine.algorithm(*call, env={}) for call in calls]
    env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
           "OMPI_MCA_coll_tuned_allreduce_algorithm": "1",
           "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring", "NCCL_ALGO": "Tree"}  # fmt: skip
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert [engine.algorithm(*call, env={}) for call in calls] == first
    given = dict(env)
    assert [engine.algorithm(*call, env=None) for call in calls] == [
        engine.algorithm(*call, env=given) for call in calls
    ]
    assert given == env  # not written to


def test_bad_calls_are_refused(engine):
    for args, match in (
        (("scan", 8, 4), "`collective` must be one of"),
        (("allreduce", 0, 4), "`nbytes` must be positive"),
        (("allreduce", math.nan, 4), "`nbytes` must be positive"),
        (("allreduce", "big", 4), "`nbytes` must be a number"),
        (("allreduce", 8, 1), "`n` must be at least 2"),
        (("allreduce", 8, 2.5), "`n` must be an integer"),
        (("allreduce", 1e19, 4), "`nbytes` must be at most 1e\\+18 bytes"),
    ):
        with pytest.raises(RankoptInputError, match=match):
            engine.algorithm(*args, env={})
    with pytest.raises(RankoptInputError, match="one node label per rank"):
        for collective in engine.collectives:
            engine.algorithm(collective, 8, 4, env={}, nodes=["a"])
    with pytest.raises(TypeError):
        engine.algorithm("allreduce", 8, 4, env={}, colour="blue")


# ---------------------------------------------------- the models price it
def test_every_choice_has_a_schedule(engine):
    seen = set()
    for collective in ALGORITHMS:
        for n in (2, 3, 5, 8, 12, 13, 16, 31, 64):
            for nodes in (None, _two_nodes(n)):
                for nbytes in SIZES:
                    alg = engine.algorithm(collective, nbytes, n, env={}, nodes=nodes)[0]
                    seen.add((collective, alg, n))
    for collective, alg, n in sorted(seen):
        steps = list(schedule(collective, alg, n).steps())
        assert steps, (collective, alg, n)
        ranks = {r for step in steps for x, y, _ in step for r in (x, y)}
        assert ranks <= set(range(n)), (collective, alg, n)


def _network():
    from rankopt.network.cloud import synthetic_cloud

    return rankopt.Network.from_cloud(synthetic_cloud(1, 2, 4, 1, rng=2, noise=0.0))


def test_every_choice_is_priced_by_the_workload_model(engine):
    net = _network()
    calls = [Call(c, float(s), 2.0) for c in sorted(ALGORITHMS) for s in (KIB, 1 << 20, 64 << 20)]
    kw = net.default_model()
    order = np.arange(net.n)
    for nodes in (None, _two_nodes(net.n)):
        priced = price_calls(calls, net.n, engine.name, nodes=nodes, env={})
        assert [p.algorithm for p in priced] == [
            engine.algorithm(c.collective, c.nbytes, net.n, env={}, nodes=nodes)[0] for c in calls
        ]
        model = make_model(
            net.latency, workload=priced, bandwidth=kw["bandwidth"], groups=kw["groups"],
            uplink_bandwidth=kw["uplink_bandwidth"],
        )  # fmt: skip
        cost = model.cost(order)
        assert math.isfinite(cost) and cost > 0
        assert cost == pytest.approx(model.reference_cost(order))


def test_solve_takes_the_engine_by_name(engine, monkeypatch):
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    net = _network()
    res = rankopt.solve(net, workload=[("allreduce", 4 * KIB, 10), ("allreduce", 16 << 20, 1)],
                        engine=engine.name, method="swap", rng=0, max_iter=50)  # fmt: skip
    assert res.extra["engine"] == engine.name and res.cost <= res.baseline_cost
    assert res.notes[0].startswith(f"engine {engine.name}: ")


# ------------------------------------------------ probe transport and apply
def test_probe_transport_and_apply_resolve(engine):
    probe = engine.transport()
    assert isinstance(probe, ModuleType) and probe.__name__ == engine.probe_module
    assert callable(probe.measure)
    apply = engine.applier()
    assert callable(apply)
    first = next(iter(inspect.signature(apply).parameters))
    assert first in ("comm", "order")


def test_importing_and_using_the_engine_imports_neither_mpi4py_nor_torch(engine):
    cls = type(engine)
    code = (
        "import importlib, sys\n"
        f"m = importlib.import_module({cls.__module__!r})\n"
        f"e = getattr(m, {cls.__name__!r})()\n"
        "e.algorithm('allreduce', 1 << 20, 8, env={})\n"
        "e.transport(), e.applier()\n"
        "import rankopt.engines\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('mpi4py', 'torch')))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------ launcher environment
def test_launcher_environment_round_trips(engine):
    env = engine.launch_env(2, 5)
    assert engine.launched(env) and not engine.launched({})
    info = detect({**env, "MASTER_ADDR": "h0"})
    assert (info.rank, info.world_size, info.master_addr) == (2, 5, "h0")
    if engine.family == "torch":  # rankopt run gives the program its new RANK
        decision = LaunchDecision(2, 4, np.array([0, 1, 3, 4, 2]), ("h0",) * 5, "")
        out = child_env(env, detect({**env, "MASTER_ADDR": "h0"}), decision)
        assert engine.launched(out) and detect(out).rank == 4


def test_entry_points_recognise_the_engine(engine, monkeypatch):
    import argparse

    from rankopt._model_args import add_model_arguments, model_options

    for marker in engine.markers:
        if engine.family == "mpi":
            text = f"{marker.title()} Version 9.9 (build 2027)"
            assert from_library(text) is engine
            fake = SimpleNamespace(Get_library_version=lambda text=text: text)
            monkeypatch.setitem(sys.modules, "mpi4py.MPI", fake)
            assert get("mpi") is engine
        else:
            assert from_backend(marker) is engine and from_backend(marker.upper()) is engine
    p = argparse.ArgumentParser(prog="rankopt solve")
    add_model_arguments(p, default_nbytes=1e6)
    assert model_options(p.parse_args(["--engine", engine.name]))["engine"] == engine.name
    if engine.family == "torch":
        from rankopt.adapters._launch import add_arguments

        run = argparse.ArgumentParser(prog="rankopt run")
        add_arguments(run)
        assert model_options(run.parse_args(["--backend", engine.name]))["engine"] == engine.name


# --------------------------------------------------------- the example one
def test_the_example_engine_runs_what_it_says(toyccl):
    assert toyccl.algorithm("allreduce", CROSSOVER - 1, 8, env={})[0] == "recursive_doubling"
    assert toyccl.algorithm("allreduce", CROSSOVER, 8, env={})[0] == "ring"
    assert toyccl.algorithm("reduce_scatter", 8, 8, env={})[0] == "ring"
    assert toyccl.algorithm("broadcast", 8, 8, env={})[1]["rule"] == "untabulated"


def test_an_mpi_engine_is_one_module_and_one_registry_line():
    """A derived MPI library: named by its longer marker, its launcher read from its variables."""
    from rankopt.adapters._env import detect
    from rankopt.engines import from_library

    version = "TOYMPI2 Version: 2.3.7 (derived from MPICH Version: 3.2.1)"
    assert from_library(version).name == "mpich"  # not registered yet: the parent's marker
    engine = register(ToyMPI())
    try:
        assert from_library(version) is engine
        assert from_library("MPICH Version: 4.2.0").name == "mpich"
        env = {**world_env("TOY", 2, 4, 0, 4), "TOY_JOBID": "j7"}
        e = detected(env, launcher="toympi", rank=2, world_size=4, local_rank=0, job_id="j7")
        assert e.master_addr == "127.0.0.1"  # every process on one host
        assert engine.algorithm("allreduce", 1 << 20, 8, env={})[0] == "ring"
    finally:
        del ENGINES[engine.name]
    with pytest.raises(RankoptInputError, match="TOY_COMM_WORLD_RANK"):
        register(ToyMPI())
        try:
            detect({})
        finally:
            del ENGINES["toympi"]
