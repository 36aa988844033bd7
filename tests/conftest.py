"""Shared fixtures: an isolated configuration per test, and ways to call the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.lane_estimate import LANE_ENV, LANES_KEY, lane_record

ROOT = Path(__file__).resolve().parent.parent
FAKES = ROOT / "tests" / "fakes"


# --- Lanes, limits and order (README "Tests") -------------------------------------------------
# `make test` runs every test, on xdist workers; `make test-fast` only those not marked heavy.
# Heavy: starts a rehearsal, Ray, service processes or a pytest of its own. A test that uses a rehearsal's fixtures is
# heavy by that alone; a module or test that starts services says so with `pytest.mark.heavy`.
HEAVY_FIXTURES = {"rehearsal_world", "_reference_run"}
# Hang guards on the test body alone (timeout_func_only: a shared fixture's setup is not the
# test's). Measured on 2 quiet cores (the longest bodies): fast tests well under 2 s, heavy ones
# up to about 130 s; the limits leave a wide margin for a loaded machine.
FAST_TIMEOUT_S, HEAVY_TIMEOUT_S = 120, 900


def pytest_configure(config):
    config.addinivalue_line("markers", "heavy: starts a rehearsal, Ray, service processes or a pytest of its own "
                            "(make test runs it, make test-fast does not)")
    if os.environ.get(LANE_ENV) and not os.environ.get("PYTEST_XDIST_WORKER"):
        # bin/test runs a whole lane: its time and the load as it began (before the workers start)
        # are the next run's estimate (support/lane_estimate.py)
        _lane_run.update(t0=time.monotonic(), load=os.getloadavg()[0])


_lane_run: dict[str, float] = {}


def _uses_a_module_fixture(item) -> bool:
    """The test uses a module-scoped fixture of its own module (a server it starts once)."""
    info = getattr(item, "_fixtureinfo", None)
    return bool(info) and any(d.scope == "module" and d.baseid.endswith(".py") and item.nodeid.startswith(d.baseid + "::")
                              for defs in info.name2fixturedefs.values() for d in defs)


DURATIONS_KEY = "shopsimrl/durations"  # in .pytest_cache: {test id: seconds, setup to teardown}
# The same, measured on a 2-core machine and checked in, for a clone's first run (CI's every run):
# `python tests/support/lane_estimate.py save` writes it from this machine's last full run.
CHECKED_IN_DURATIONS = ROOT / "tests" / "durations.json"


def _checked_in_durations() -> dict[str, float]:
    try:
        return json.loads(CHECKED_IN_DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
_durations: dict[str, float] = {}


@pytest.hookimpl(tryfirst=True)  # before xdist appends the group to each test id
def pytest_collection_modifyitems(config, items):
    cache = getattr(config, "cache", None)
    last = {**_checked_in_durations(), **(cache.get(DURATIONS_KEY, {}) if cache else {})}
    for item in items:
        if HEAVY_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.heavy)
        heavy = item.get_closest_marker("heavy") is not None
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(HEAVY_TIMEOUT_S if heavy else FAST_TIMEOUT_S))
        if _uses_a_module_fixture(item):  # one worker starts the module's server, not each
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))

    # Longest first, from the last run's durations (a heavy test never timed yet first of all):
    # the workers then end together instead of one running the longest test alone at the end. A
    # module that starts a server once stays together (its group), costing its tests' sum.
    def unit(item):
        mark = item.get_closest_marker("xdist_group")
        return mark.args[0] if mark else item.nodeid

    units: dict[str, float] = {}
    for item in items:
        guess = 10_000.0 if item.get_closest_marker("heavy") else 0.0
        units[unit(item)] = units.get(unit(item), 0.0) + last.get(item.nodeid, guess)
    first = {u: i for i, u in reversed(list(enumerate(unit(item) for item in items)))}
    items.sort(key=lambda item: (-units[unit(item)], first[unit(item)]))


HEAVY_KEY = "shopsimrl/heavy"  # the heavy lane's test ids (support/lane_estimate.py save)
_heavy: set[str] = set()


def pytest_runtest_logreport(report):
    """Each test's time, setup to teardown (under xdist the controller sees every worker's)."""
    test_id = report.nodeid.split("@")[0]  # xdist's loadgroup appends "@group"
    _durations[test_id] = _durations.get(test_id, 0.0) + report.duration
    if "heavy" in report.keywords:
        _heavy.add(test_id)


def pytest_sessionfinish(session, exitstatus):
    """Remember the durations for the next run's order, and a whole lane's run (every test ran,
    passed or failed: not interrupted) for `make test`'s estimate."""
    from support.rehearsal import remove_ray_temps

    remove_ray_temps()  # (in each xdist worker: the rehearsals it ran)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None:  # every worker is done: the shared reference's Ray temp dir goes too
        from support import reference
        from support.shared import shared_root

        reference.remove_ray_temp(shared_root(factory))
    cache = getattr(session.config, "cache", None)
    if not cache or not _durations:
        return
    cache.set(DURATIONS_KEY, {**cache.get(DURATIONS_KEY, {}), **_durations})
    cache.set(HEAVY_KEY, sorted(set(cache.get(HEAVY_KEY, [])) | _heavy))
    if _lane_run and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        run = lane_record(time.monotonic() - _lane_run["t0"], _lane_run["load"],
                          session.config.getoption("numprocesses", None), len(os.sched_getaffinity(0)),
                          passed=exitstatus == pytest.ExitCode.OK)
        cache.set(LANES_KEY, {**cache.get(LANES_KEY, {}), os.environ[LANE_ENV]: run})


def _knob_names() -> list[str]:
    from pyhelpers.config.load import read_knobs

    return list(read_knobs())


@pytest.fixture
def toolkit_env(tmp_path, monkeypatch) -> dict[str, str]:
    """A process environment whose configuration points only into tmp_path.

    Knobs from the developer's own environment are removed; .env is tmp_path/.env (empty);
    TRAIN_SAVE is under tmp_path and SYSTEM_DISK is /dev/shm, a different device, so the
    M2 disk rule passes. The dict is also applied to os.environ for in-process CLI calls.
    """
    for name in _knob_names():
        monkeypatch.delenv(name, raising=False)
    env_file = tmp_path / ".env"
    env_file.write_text("")
    env_file.chmod(0o600)
    values = {
        "SHOPSIMRL_ENV_FILE": str(env_file),
        "RUNS_DIR": str(tmp_path / "runs"),
        "TRAIN_SAVE": str(tmp_path / "save"),
        "DATA_DISK": str(tmp_path),
        "SYSTEM_DISK": "/dev/shm",
        "WANDB_MODE": "offline",
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return {**os.environ}


def run_pyhelpers(args: list[str], env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    """Run the real `python -m pyhelpers ...` in a subprocess, capturing text output."""
    return subprocess.run([sys.executable, "-m", "pyhelpers", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=kw.pop("timeout", 300), **kw)


# --- W&B offline runs, read back with W&B's own reader -------------------------------------

def offline_runs(run_dir: Path, rid: str) -> list[Path]:
    """The offline W&B run dirs of run id `rid` under a run's WANDB_DIR."""
    return sorted((Path(run_dir) / "wandb" / "wandb").glob(f"offline-run-*-{rid}"))


def wandb_records(offline_run: Path) -> list[dict]:
    """Every record of one offline W&B run, as `wandb leet inspect --json` reads them (its reader,
    run without the CLI's import of wandb: pyhelpers/tracking/wandb_read.py)."""
    from pyhelpers.tracking.wandb_read import inspect_argv

    argv = inspect_argv(offline_run)
    assert argv is not None, f"{offline_run}: no single run-*.wandb file, or wandb-core is missing"
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# --- Rehearsals (tests/support/rehearsal.py) ------------------------------------------------

@pytest.fixture(autouse=True)
def _fresh_slime_singletons():
    """Tests of the rollout plugin each get their own slime GenerateState (support/rollout_stack.py)."""
    if "slime.utils.misc" in sys.modules:
        from support.rollout_stack import fresh_slime_singletons

        fresh_slime_singletons()
    yield


@pytest.fixture(autouse=True)
def _stop_leftover_rehearsals():
    """A failed rehearsal test must not leave its services holding the rehearsal's ports."""
    yield
    from support import rehearsal

    rehearsal.stop_all_created()


def _shared_world(tmp_path_factory) -> Path:
    from fakes.rehearsal import build
    from support.shared import once

    return Path(once(tmp_path_factory, "rehearsal-world", lambda d: {"world": str(build(d / "world"))})["world"])


def _shared_reference(tmp_path_factory):
    from support import reference
    from support.shared import once

    world = _shared_world(tmp_path_factory)
    return reference.view(once(tmp_path_factory, "reference", lambda d: reference.build(d, world)))


@pytest.fixture(scope="session")
def rehearsal_world(tmp_path_factory) -> Path:
    """The stand-in world every rehearsal of this `make test` shares (read-only once built): built
    once, by whichever worker asks first (support/shared.py)."""
    return _shared_world(tmp_path_factory)


@pytest.fixture(scope="session")
def _reference_run(tmp_path_factory, rehearsal_world):
    return _shared_reference(tmp_path_factory)


@pytest.fixture(scope="session", autouse=True)
def _reference_built_early(request, tmp_path_factory):
    """Under xdist, the reference rehearsal starts building in the background as a worker starts,
    when its session has tests that read it: its minute then overlaps the worker's first tests
    instead of holding up every worker that reaches a reader while another builds it (the
    readers' fixture waits on the same lock, then reads what was built)."""
    wanted = any("_reference_run" in item.fixturenames for item in request.session.items)
    if not (wanted and os.environ.get("PYTEST_XDIST_WORKER")):
        yield
        return
    import threading

    tmp_path_factory.getbasetemp()  # made here, in the main thread: the two must not both make it
    thread = threading.Thread(target=_shared_reference, args=(tmp_path_factory,), daemon=True)
    thread.start()
    yield
    thread.join(timeout=900)  # never leave its rehearsal running past the session


@pytest.fixture
def reference(_reference_run):
    """One uninterrupted rehearsal (ROUNDS=2, fake keys in .env), built once per `make test` and
    read by every test that needs a finished run; the fault and self-healing tests compare their
    results with it. Tests on other workers read it at the same time, so a test that writes into
    it fails (copy it first)."""
    from support.shared import untouched

    ref = _reference_run
    assert ref.result.returncode == 0, ref.result.stdout[-6000:]
    with untouched([ref.run.runs, ref.tmp / "wandb-home"], "the shared reference rehearsal"):
        yield ref


@pytest.fixture(autouse=True)
def _rollout_stacks_closed():
    """Every rollout stack a test started (support/rollout_stack.py) ends with it: one whose test
    failed before its own close (a bad setting in st.args(...)) left its three stand-ins running
    past the suite. Stacks of a wider scope, started before this test, are their fixture's."""
    before = len(getattr(sys.modules.get("support.rollout_stack"), "OPEN", []))
    yield
    stacks = getattr(sys.modules.get("support.rollout_stack"), "OPEN", [])
    for st in list(stacks[before:]):
        st.close()


@pytest.fixture
def hook():
    """A webhook receiver on loopback (support/rehearsal.py Hook)."""
    from support.rehearsal import Hook

    h = Hook()
    yield h
    h.close()


@pytest.fixture
def hang_hook():
    """A webhook that never answers (until the test ends)."""
    from support.rehearsal import Hook

    h = Hook(hang=True)
    yield h
    h.close()
