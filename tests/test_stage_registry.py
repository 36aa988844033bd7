"""The stage registry is the one source of stage facts (docs/architecture.md §4): a stage added
with one file and its line in the registry shows up in where a run stands, `make plan`, the ETAs,
`make status` and the report, without a change anywhere else; and the modules that read the
registry name no stage themselves.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pyhelpers import stages

ROOT = Path(__file__).resolve().parents[1]

# A stage after the round's last one, as a contributor would add it: one file...
NEW_STAGE = '''"""A stage added by tests/test_stage_registry.py: after inject, it leaves a note in the round dir."""

from __future__ import annotations

from pyhelpers.run.layout import RunLayout

LOG = None
COLOUR = "#00acc1"
LABEL = "announce"
SUMMARY = "tell the team"


def done(lay: RunLayout, r: int, rounds: int) -> tuple[bool, str]:
    note = lay.round_dir(r) / "announced.txt"
    return note.is_file(), note.name


def run(loop, r: int) -> None:
    (loop.lay.round_dir(r) / "announced.txt").write_text("done")


def launches(cfg, lay: RunLayout, r: int, model_args: list[str]) -> list[tuple[str, str, str]]:
    return [("announcer", "announce --round %d" % r, "")]
'''

# ...and its line in the registry (with its name in the import above it).
REGISTRY_EDITS = (("from pyhelpers.stages import baseline, compile, evaluate, export, inject, rotate, train",
                   "from pyhelpers.stages import announce, baseline, compile, evaluate, export, inject, rotate, train"),
                  ("    _stage(inject),\n", "    _stage(inject),\n    _stage(announce),\n"))

PROBE = r'''
import json, os, sys
from pyhelpers import stages
from pyhelpers.config import load as config
from pyhelpers.overview import manifest, plan, status
from pyhelpers.report import build
from pyhelpers.run import checkpoints as ck, events
from pyhelpers.run.layout import from_config
from pyhelpers.stages import position, progress
from fakes.megatron_layout import write_checkpoint, write_hf

cfg = config.load(dict(os.environ))
lay = from_config(cfg)
lay.run_dir.mkdir(parents=True)
manifest.record_or_compare(cfg, lay.manifest)
# round 0 of 1 finished up to inject, as the stages would leave it
it = lay.last_iteration(0)
write_checkpoint(lay.megatron, it)
ck.rotate(lay.megatron)
write_hf(lay.hf_dir(it), it)
ck.flip_hf(lay.hf_link, lay.hf_dir(it))
for p in (lay.compiled(0), lay.val_summary(0), lay.gate_summary(0)):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("{}")
lay.bank_out(0, 1).parent.mkdir(parents=True, exist_ok=True)
lay.bank_out(0, 1).write_text('{"round": 1}')
for name in stages.NAMES[:-1]:  # every stage but the added one has run
    events.append(lay.run_dir, "stage-start", round=0, stage=name)
    events.append(lay.run_dir, "stage-end", round=0, stage=name, status=0, seconds=1.0)
eta = progress.estimate(events.read(lay.run_dir), stages.ROUND, rounds=2, steps=1, r=0, stage="inject", steps_done=0)
got = {"position": position.position(lay, 1).as_dict(), "plan": plan.plan(cfg, lay, model_args=[]),
       "untimed": eta.untimed, "status": status.render(status.gather(cfg, lay))}
# the report: the added stage's bar in the timeline (its colour and legend label from the registry);
# the "{}" placeholders above only satisfied evaluate's done(), the report reads real summaries
events.append(lay.run_dir, "stage-start", round=0, stage="announce")
events.append(lay.run_dir, "stage-end", round=0, stage="announce", status=0, seconds=1.0)
lay.val_summary(0).unlink()
lay.gate_summary(0).unlink()
index = build(cfg, lay)
got["timeline_csv"] = (index.parent / "timeline.csv").read_text()
print(json.dumps(got))
'''


def test_a_stage_added_with_one_file_and_one_registry_line_is_seen_everywhere(tmp_path, toolkit_env):
    proj = tmp_path / "proj"
    shutil.copytree(ROOT / "pyhelpers", proj / "pyhelpers", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "env", proj / "env", ignore=shutil.ignore_patterns("conda"))
    (proj / "pyhelpers" / "stages" / "announce.py").write_text(NEW_STAGE)
    registry = proj / "pyhelpers" / "stages" / "__init__.py"
    text = registry.read_text()
    for old, new in REGISTRY_EDITS:
        assert text.count(old) == 1, f"the registry no longer has {old!r}: update this test's edit"
        text = text.replace(old, new)
    registry.write_text(text)
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**toolkit_env, "ROUNDS": "1", "PYTHONPATH": f"{proj}{os.pathsep}{ROOT / 'tests'}"}
    out = subprocess.run([sys.executable, str(tmp_path / "probe.py")], env=env, cwd=proj, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout)

    # resume: a stage after the old last one runs (the round is not over until it is done)
    assert got["position"] == {"round": 0, "stage": "announce", "detail": "announced.txt"}
    plan = "\n".join(got["plan"])
    assert "resume point: round 0, stage announce (announced.txt)" in plan
    assert "round 0: announce" in plan
    assert "announcer: announce --round 0" in plan  # its launches() in the command lines
    assert got["untimed"] == ["announce", "W&B", "report"]  # the ETA names it: never timed, and not SHORT
    assert any("announce" in line for line in got["status"]), got["status"]
    assert "announce" in got["timeline_csv"]  # the report drew its bar (the old legend raised KeyError)


def test_the_report_draws_an_added_stage_with_its_registry_colour_and_label(tmp_path, toolkit_env):
    """...and with a stage run in the events, its bar takes the registry's colour and the legend its label."""
    from pyhelpers.report import data

    assert set(data.STAGES) == set(stages.ALL_NAMES)
    for name, stage in data.STAGES.items():
        assert stage.colour.startswith("#") and stage.label, name


# Where a string equal to a stage name is not that stage, with the reason.
NOT_A_STAGE = {("pyhelpers/report/data.py", "train"): "the CSV of W&B's training metrics (train.csv, COLUMNS)",
               ("pyhelpers/report/plots.py", "train"): "the Tables field of W&B's training metrics (FIGURES)"}

READERS = ["pyhelpers/report", "pyhelpers/stages/progress.py", "pyhelpers/stages/position.py",
           "pyhelpers/stages/inputs.py", "pyhelpers/stages/preflight.py", "pyhelpers/overview/plan.py",
           "pyhelpers/capacity/diskguard.py", "pyhelpers/run/gpu_time.py"]


def test_the_registry_readers_name_no_stage():
    names = set(stages.ALL_NAMES)
    found = []
    for entry in READERS:
        base = ROOT / entry
        for path in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
            rel = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in names and (rel, node.value) not in NOT_A_STAGE:
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "stage names written outside the registry (read stages.* instead):\n" + "\n".join(found)
