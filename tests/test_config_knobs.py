"""Every knob has one type and one range, declared beside its default, and `make check` enforces it.

The walk below takes every knob of env/defaults.env: a knob without a `#:` line fails it, and for
each knob a value of the wrong type and a value out of range must each make `pyhelpers config check`
(what `make check` and every bin/ script's load_config run) exit 1 naming the knob and its range.
"""

from __future__ import annotations

import re
import subprocess

import pytest
from click.testing import CliRunner
from conftest import ROOT, run_pyhelpers

from pyhelpers.cli import main
from pyhelpers.config import load, types

KNOBS = load.read_knobs()


def _check(env: dict[str, str]):
    return CliRunner().invoke(main, ["config", "check"], env=env)


def test_every_knob_declares_a_type_and_a_range():
    missing = [k.name for k in KNOBS.values() if k.type is None]
    assert missing == [], f"add a `#: TYPE RANGE` line above these knobs in env/defaults.env: {missing}"


@pytest.mark.parametrize("name", list(KNOBS))
def test_each_knob_refuses_a_wrong_type_and_an_out_of_range_value(name, toolkit_env):
    knob = KNOBS[name]
    assert knob.type is not None, f"{name}: no `#:` line in env/defaults.env"
    bad = knob.type.bad_examples()
    if not bad:  # only a path or text "or empty" accepts every value
        assert knob.type.kind in ("path", "text") and knob.type.empty_ok, name
        return
    for what, value in bad.items():
        r = _check({name: value})
        assert r.exit_code == 1, f"{name}={value!r} ({what}) passed the check:\n{r.output}"
        lines = [ln for ln in r.output.splitlines() if ln.startswith("error:") and f"{name}" in ln]
        assert any(knob.type.text in ln for ln in lines), \
            f"{name}={value!r} ({what}): no error line names {name} and its range {knob.type.text!r}:\n{r.output}"


def test_defaults_pass_and_the_issues_values_are_refused(toolkit_env):
    assert _check({}).exit_code == 0
    for name, value in (("ANALYST_POLL_INTERVAL", "xyz"), ("DISK_MARGIN_GB", "-100"), ("JOB_START_TIMEOUT", "-5"),
                        ("MEMORY_WARN_FRACTION", "nan"), ("RESTART_BACKOFF", "abc"), ("MAX_RESTARTS", "-3"),
                        ("STOP_GRACE", "-1"), ("EVAL_MAX_INFRA_SHARE", "2")):
        r = _check({name: value})
        assert r.exit_code == 1 and f"error: {name}=" in r.output, (name, value, r.output)


def test_a_secret_value_is_never_shown_in_a_refusal(toolkit_env):
    r = _check({"NOTIFY_WEBHOOK": "hunter2-not-a-url"})
    assert r.exit_code == 1 and "NOTIFY_WEBHOOK" in r.output
    assert "hunter2" not in r.output


def test_make_check_names_the_knob_and_the_range(toolkit_env):
    r = subprocess.run(["make", "-s", "check", "STOP_GRACE=-1"], cwd=ROOT, env=toolkit_env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "STOP_GRACE=-1" in r.stderr and "float >= 0" in r.stderr


def test_the_batch_hint_suggests_a_real_divisor(toolkit_env):
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "ROLLOUT_GROUPS": "5", "SAMPLES_PER_GROUP": "3",
                                            "GLOBAL_BATCH_SIZE": "4", "OVER_SAMPLING_GROUPS": "5"})
    assert r.returncode == 1
    hint = re.search(r"GLOBAL_BATCH_SIZE that divides 15, e\.g\. (\d+)", r.stderr)
    assert hint, r.stderr
    assert 15 % int(hint.group(1)) == 0


def test_consumers_read_each_knob_as_its_declared_type():
    """cfg.int on a knob declared float would fail on 2.5 at hour six; cfg.flag needs a flag."""
    wrong = []
    for path in (ROOT / "pyhelpers").rglob("*.py"):
        for how, name in re.findall(r"\.(int|float|flag)\(\s*[\"']([A-Z][A-Z0-9_]*)[\"']\s*\)", path.read_text()):
            kind = KNOBS[name].type.kind if name in KNOBS and KNOBS[name].type else None
            ok = {"int": ("int",), "float": ("int", "float"), "flag": ("flag",)}[how]
            if kind not in ok:
                wrong.append(f"{path.relative_to(ROOT)}: .{how}({name!r}) but {name} is declared {kind}")
    assert wrong == []


def test_a_bad_spec_line_is_named():
    with pytest.raises(types.SpecError, match="env/defaults.env:7"):
        types.parse("int between 1 and 2", "env/defaults.env:7")


def test_declared_choices_are_the_ones_the_code_knows():
    from pyhelpers.doctor.base import PROFILES
    from pyhelpers.loop.notify import FORMATS
    from pyhelpers.rollout.settings import REWARDS

    assert KNOBS["NOTIFY_FORMAT"].type.choices == FORMATS
    assert KNOBS["REWARD"].type.choices == REWARDS
    assert KNOBS["DOCTOR_PROFILE"].type.choices == PROFILES


def test_a_value_the_plugin_would_refuse_is_refused_by_make_check(toolkit_env):
    """RETRY_TRAINS=1 is refused by the plugin's settings check, which runs only when the train stage
    writes slime.yaml -- after the preflight. make check must refuse it first, naming the knob."""
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "RETRY_TRAINS": "1"})
    assert r.returncode == 1 and "RETRY_TRAINS" in r.stderr


def test_training_resets_wait_as_long_as_the_simulator_may_wait_for_a_slot(toolkit_env, tmp_path):
    """pack_api waits SHOPSIM_RESET_RETRIES x SHOPSIM_RESET_DELAY for a free slot before it answers;
    the plugin's reset timeout must outlast that, as the eval client's does."""
    from pyhelpers.rollout.settings import from_mapping, plugin_values
    from pyhelpers.run.layout import from_config

    cfg = load.load({**toolkit_env, "SHOPSIM_RESET_RETRIES": "20", "SHOPSIM_RESET_DELAY": "6"})
    values = plugin_values(cfg, from_config(cfg), 0)
    assert from_mapping(values).shopsim_reset_timeout_s > 20 * 6
