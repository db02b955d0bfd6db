import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=40,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=100)
# the large fuzz run of tests/test_fuzz_files.py: HYPOTHESIS_PROFILE=fuzz (examples per test
# from RANKOPT_FUZZ_EXAMPLES, default 3,000: over 20,000 in all)
settings.register_profile(
    "fuzz",
    deadline=None,
    max_examples=int(os.environ.get("RANKOPT_FUZZ_EXAMPLES", "3000")),
    suppress_health_check=list(HealthCheck),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    env = os.environ.get("RANKOPT_SHARED_DATA")
    cands = [Path(env)] if env else []
    cands += [REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data"]
    for c in cands:
        if (c / "optima.csv").exists():
            return c
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if d is None:
        pytest.skip("shared reference data (../shared/data) not found; set RANKOPT_SHARED_DATA")
    return d


@pytest.fixture(scope="session", autouse=True)
def own_tmpdir():
    """``TMPDIR`` of every program the tests start: a folder of the run's own, removed after.

    Open MPI and PRRTE keep session folders there, and the jobs the tests end
    on purpose leave theirs behind. The path is kept short: PRRTE puts Unix
    sockets in it, whose paths may not exceed about 100 characters.
    """
    old = os.environ.get("TMPDIR")
    folder = tempfile.mkdtemp(prefix="rkt-", dir=old or "/tmp")
    os.environ["TMPDIR"] = folder
    # the probe cache of the entry points the tests run: under the run's own folder
    os.environ["RANKOPT_CACHE_DIR"] = os.path.join(folder, "cache")
    try:
        yield Path(folder)
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


def swapped(order: np.ndarray, i: int, j: int) -> np.ndarray:
    """A copy of ``order`` with positions ``i`` and ``j`` exchanged."""
    new = order.copy()
    new[i], new[j] = new[j], new[i]
    return new


def random_matrix(rng: np.random.Generator, n: int, symmetric: bool = True) -> np.ndarray:
    pts = rng.random((n, 2))
    m = np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1))
    if not symmetric:
        m = m * rng.uniform(0.7, 1.3, size=(n, n))
    np.fill_diagonal(m, 0.0)
    return m


# Programs that the tests launch under mpiexec/torchrun: not test modules, and
# importing them (doctest collection) would run them.
collect_ignore_glob = ["mpi_scripts/*", "shim_programs/*"]
