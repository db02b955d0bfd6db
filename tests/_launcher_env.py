"""Launcher environments for the tests of launcher detection, and the check of what is detected."""

from __future__ import annotations

from typing import Any


def world_env(
    prefix: str, rank: int, size: int, local_rank: int, local_size: int
) -> dict[str, str]:
    """The ``{prefix}_COMM_WORLD_*`` variables an MPI launcher (Open MPI, ToyMPI) sets.

    >>> world_env("OMPI", 2, 4, 0, 2)["OMPI_COMM_WORLD_LOCAL_SIZE"]
    '2'
    """
    return {
        f"{prefix}_COMM_WORLD_RANK": str(rank),
        f"{prefix}_COMM_WORLD_SIZE": str(size),
        f"{prefix}_COMM_WORLD_LOCAL_RANK": str(local_rank),
        f"{prefix}_COMM_WORLD_LOCAL_SIZE": str(local_size),
    }


def detected(env: dict[str, str], **expected: Any) -> Any:
    """``detect(env)``, after checking each attribute named in ``expected``."""
    from rankopt.adapters._env import detect

    info = detect(env)
    assert {name: getattr(info, name) for name in expected} == expected
    return info
