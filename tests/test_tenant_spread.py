"""bench/tenant_spread.py: the same order timed twice, read from kept tenant launches."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from tenant_spread import collect, table  # noqa: E402


def test_the_same_order_against_itself(tmp_path):
    """Two launches of one case, one of a quiet network, and one without an order alone."""

    def kept(name, user, alone, visits=None):
        results = [{"label": "user", "times": user}, {"label": "user-replay/solo", "times": alone}]
        if visits is not None:
            results.append({"label": "user-replay", "times": visits})
        (tmp_path / name).write_text(json.dumps({"results": results}))

    kept("3_3_3-one_uplink__TCP_unpaced-1.json", [2.0, 10.0, 2.2], [1.9, 2.0, 2.1], [2.0, 2.0, 2.0])
    kept("3_3_3-one_uplink__TCP_unpaced-2.json", [1.0, 1.0, 1.0], [1.0, 1.1, 0.9])
    kept("3_3_3-None-1.json", [1.0, 1.1, 1.2], [1.0, 1.0, 1.0])
    (tmp_path / "4_3_2-None-1.json").write_text(
        json.dumps({"results": [{"label": "user", "times": [1.0]}]})
    )
    (tmp_path / "broken.json").write_text("{")
    cases = collect([tmp_path])
    assert sorted(cases) == ["none", "one uplink, TCP unpaced"]
    tcp = cases["one uplink, TCP unpaced"]
    assert [round(r["alone"], 3) for r in tcp] == [1.1, 1.0]
    assert tcp[0]["visits"] == 1.1 and tcp[1]["visits"] is None
    assert tcp[0]["spread"]["user"] == 5.0
    text = table(cases)
    assert "| one uplink, TCP unpaced | 2 | 1.050 (1.00-1.10) | 1 | 1 of 1 |" in text
    assert "| none | 1 | 1.100 (1.10-1.10) | 1 | 0 of 0 |" in text
    assert text.endswith("2 of 3 launches: the order below 95% of itself timed alone")
    # the best: every order but the launch order (the user path's own against the rest)
    assert [round(r["of_best"], 3) for r in tcp] == [round(2.0 / 2.2, 3), 1.0]
    assert "| 2 | 1.050 (1.00-1.10) | 1 | 1 of 1 | 1.00-3.00 | 1 of 2 |" in text
    # by total time: the stall of the first launch's user call counts in full
    mean = collect([tmp_path], "mean")["one uplink, TCP unpaced"]
    assert mean[0]["alone"] == pytest.approx(14.2 / 3 / 2.0)
    assert mean[0]["of_best"] == pytest.approx(2.0 / (14.2 / 3))
