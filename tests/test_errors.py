"""Every exception rankopt raises on purpose shares one base and keeps its builtin."""

import pytest

import rankopt
from rankopt._files import RankoptFileError
from rankopt.adapters._launch import LaunchError
from rankopt.adapters.mpi import RankoptMPIError
from rankopt.adapters.shim import ShimBuildError
from rankopt.probe._common import ProbeTimeoutError
from rankopt.testbed.topology import TestbedError


@pytest.mark.parametrize(
    "cls, builtin",
    [
        (rankopt.RankoptInputError, ValueError),
        (RankoptFileError, OSError),
        (ProbeTimeoutError, RuntimeError),
        (RankoptMPIError, RuntimeError),
        (LaunchError, RuntimeError),
        (ShimBuildError, RuntimeError),
        (TestbedError, RuntimeError),
    ],
)
def test_one_base_and_the_expected_builtin(cls, builtin):
    assert issubclass(cls, rankopt.RankoptError) and issubclass(cls, builtin)


def test_bad_input_is_caught_by_the_base():
    with pytest.raises(rankopt.RankoptError, match="must be square"):
        rankopt.solve([[0.0, 1.0, 2.0]])
