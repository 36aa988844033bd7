"""`make test`'s estimate (tests/support/lane_estimate.py): what it rests on (this checkout's last
whole run of the lane, the load then) and the load now; the committed figures when no run is
recorded here, saying so, and the same figures in README and bin/test's Summary lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT
from support import lane_estimate

LAST_FULL = {"wall_s": 526.0, "load": 1.2, "workers": 3, "cpus": 2, "passed": True, "at": "2026-12-05 23:10"}


def test_the_estimate_names_the_last_run_here_its_load_and_the_load_now():
    assert lane_estimate.estimate("full", 3, LAST_FULL, load_now=8.3, cpus=2) == (
        "est. 9 min: last full run here 8:46 at load 1.2 (2026-12-05 23:10); load now 8.3 on 2 CPUs: expect longer")
    assert lane_estimate.estimate("full", 3, {**LAST_FULL, "load": 9.0}, load_now=0.4, cpus=2).endswith(
        "at load 9.0 (2026-12-05 23:10); load now 0.4 on 2 CPUs: expect shorter")
    assert lane_estimate.estimate("full", 3, LAST_FULL, load_now=1.9, cpus=2).endswith("load now 1.9 on 2 CPUs")  # about as then


def test_a_fast_run_is_estimated_in_seconds_and_what_differed_then_is_named():
    fast = {**LAST_FULL, "wall_s": 52.4, "workers": 5, "cpus": 4, "passed": False}
    assert lane_estimate.estimate("fast", 3, fast, load_now=0.5, cpus=2) == (
        "est. 52 s: last fast run here 0:52 at load 1.2 (5 workers, 4 CPUs, with failures; 2026-12-05 23:10); "
        "load now 0.5 on 2 CPUs")
    assert lane_estimate.estimate("full", 3, {**LAST_FULL, "wall_s": 3723}, 1.0, 2).startswith("est. 62 min: last full run here 1:02:03 ")


def test_with_no_run_recorded_here_it_gives_the_committed_figure_and_says_so():
    assert lane_estimate.estimate("full", 3, None, load_now=5.27, cpus=2) == (
        "est. about 15 min on a quiet 2-core machine (no full run recorded here yet, so the committed figure); "
        "load now 5.3 on 2 CPUs: expect longer")
    assert lane_estimate.estimate("fast", 3, None, 0.1, 2) == (
        "est. under a minute on a quiet 2-core machine (no fast run recorded here yet, so the committed figure); "
        "load now 0.1 on 2 CPUs")


def test_the_printed_line_reads_the_record_and_ignores_one_it_cannot_use(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(lane_estimate, "CACHE", tmp_path)
    monkeypatch.setattr(os, "getloadavg", lambda: (8.3, 5.0, 2.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(sys, "argv", ["lane_estimate.py", "full", "3"])

    def printed() -> str:
        assert lane_estimate.main() == 0
        return capsys.readouterr().out

    (tmp_path / "lanes").write_text(json.dumps({"full": LAST_FULL}))
    assert printed() == ("lane full: every test, the rehearsals, Ray and fault tests included; 3 workers; est. 9 min: "
                         "last full run here 8:46 at load 1.2 (2026-12-05 23:10); load now 8.3 on 2 CPUs: expect longer\n")
    (tmp_path / "lanes").write_text(json.dumps({"full": {"wall": "8:46"}}))  # another version's record
    assert "(no full run recorded here yet, so the committed figure)" in printed()
    (tmp_path / "lanes").write_text("{")
    assert "(no full run recorded here yet, so the committed figure)" in printed()


def _session(tmp_path, lane: str | None, workers: int) -> dict | None:
    """A small pytest session with the suite's conftest, as bin/test starts a lane (lane set) or as
    a user runs some tests (unset); one test passes, one fails. Returns the lanes in its cache."""
    tmp_path.mkdir()
    (tmp_path / "test_some.py").write_text("def test_passes():\n    pass\n\n\ndef test_fails():\n    assert False\n")
    # not this worker's xdist variables: the session's controller would take itself for a worker
    env = {k: v for k, v in os.environ.items() if k != lane_estimate.LANE_ENV and not k.startswith("PYTEST_XDIST")}
    env.update({"PYTHONPATH": str(ROOT / "tests"), **({lane_estimate.LANE_ENV: lane} if lane else {})})
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-q", "-n", str(workers), "--rootdir",
                          str(tmp_path), str(tmp_path / "test_some.py")], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert "1 failed, 1 passed" in res.stdout, res.stdout[-3000:] + res.stderr[-3000:]
    path = tmp_path / ".pytest_cache" / "v" / "shopsimrl" / "lanes"
    return json.loads(path.read_text()) if path.is_file() else None


@pytest.mark.heavy  # two pytest sessions of its own, one on two xdist workers
def test_a_whole_lane_run_is_recorded_with_its_workers_and_load_and_a_chosen_few_tests_are_not(tmp_path):
    assert _session(tmp_path / "some", None, workers=0) is None  # `bin/test tests/test_x.py`: not the lane's time
    lanes = _session(tmp_path / "lane", "fast", workers=2)  # recorded once, by xdist's controller
    assert set(lanes) == {"fast"} and lanes["fast"]["workers"] == 2 and lanes["fast"]["wall_s"] > 0
    assert lanes["fast"]["load"] >= 0 and lanes["fast"]["cpus"] == len(os.sched_getaffinity(0))
    assert lanes["fast"]["passed"] is False  # every test ran, one failed: its time still counts


def test_readme_and_the_summary_lines_state_the_committed_figures():
    readme = (ROOT / "README.md").read_text()
    for lane, script, row in (("full", "test", "| `make test` |"), ("fast", "test-fast", "| `make test-fast` |")):
        summary = next(line for line in (ROOT / "bin" / script).read_text().splitlines() if line.startswith("# Summary:"))
        assert f"({lane_estimate.QUIET[lane]} on 2 quiet cores" in summary, summary
        line = next(line for line in readme.splitlines() if line.startswith(row))
        assert f"({lane_estimate.QUIET[lane]} {lane_estimate.QUIET_MACHINE}" in line, line
