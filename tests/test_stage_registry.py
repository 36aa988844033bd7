"""The stage registry is the one source of stage facts (docs/architecture.md §4): a stage added
with one file and one line in the registry runs in a rehearsal and shows up in where a run stands,
`make plan`, the ETAs, `make status` and the report, without a change anywhere else; the modules
that read the registry name no stage themselves, no test or document lists a round's stages, and
no stage imports another (what two stages share is a module below them).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support.rehearsal import NO_WANDB, Run, copy_checkout, rehearse, rehearse_env

from pyhelpers import stages

ROOT = Path(__file__).resolve().parents[1]

# A stage as a contributor would add it: one file...
NEW_STAGE = '''"""A stage added by tests/test_stage_registry.py: it leaves a note in the round dir."""

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
    loop.echo(f"announced round {r}")


def launches(cfg, lay: RunLayout, r: int, model_args: list[str]) -> list[tuple[str, str, str]]:
    return [("announcer", "announce --round %d" % r, "")]
'''



def add_stage(pkg: Path, after: str, name: str = "announce", source: str = NEW_STAGE) -> None:
    """...and one line in the registry: a copy of the line of the round's stage `after`, naming the
    new one, just below it (a contributor's edit of pyhelpers/stages/__init__.py, nothing more)."""
    (pkg / "stages" / f"{name}.py").write_text(source)
    registry = pkg / "stages" / "__init__.py"
    lines = registry.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("ROUND"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith(")"))
    mine = [i for i in range(start + 1, end) if re.search(rf"\b{after}\b", lines[i])]
    assert len(mine) == 1, f"the registry's ROUND has no one line for {after}: {lines[start:end + 1]}"
    lines.insert(mine[0] + 1, re.sub(rf"\b{after}\b", name, lines[mine[0]]))
    registry.write_text("".join(lines))

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
    add_stage(proj / "pyhelpers", after=stages.END.name)
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


def test_a_stage_added_in_one_file_and_one_line_runs_in_a_rehearsal(tmp_path, rehearsal_world):
    """The stage above, added to a copy of this checkout with one file and one registry line (after
    export, in the middle of a round), runs in a one-round rehearsal in its place: after export,
    before the stage that came next, and the run finishes."""
    after = "export"
    follows = stages.NAMES[stages.NAMES.index(after) + 1]
    proj = copy_checkout(tmp_path / "proj")
    add_stage(proj / "pyhelpers", after=after)
    env = rehearse_env(tmp_path / "rehearsal", rehearsal_world, ROUNDS=1, PYTHONPATH=str(proj), **NO_WANDB)
    res = rehearse(env, root=proj)
    assert res.returncode == 0, res.stdout[-5000:]
    run = Run(Path(env["RUNS_DIR"]))
    assert (run.round_dir(0) / "announced.txt").read_text() == "done"
    assert "announced round 0" in res.stdout
    evs = run.events()

    def at(kind: str, stage: str) -> int:
        found = [i for i, e in enumerate(evs) if e["kind"] == kind and e.get("stage") == stage and e["round"] == 0]
        assert len(found) == 1, (kind, stage, found)
        return found[0]
    assert at("stage-end", after) < at("stage-start", "announce") < at("stage-end", "announce") < at("stage-start", follows)
    assert evs[at("stage-end", "announce")]["status"] == 0


def _imports_reached(graph: dict[str, set[str]], module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_no_stage_imports_another_and_none_reaches_back_to_the_registry():
    """A stage module is imported by the registry alone: what two stages share (the slime job's
    stop, the analyst's drain, the eval server's session) is a module below them, and the loop and
    `make stop` use those, not a stage. The registry loads its stages by name, an edge
    tests/test_architecture.py's graph cannot see: no stage may import its way back to it."""
    from test_architecture import import_graph

    graph, registry = import_graph(), stages.__name__
    modules = {f"{registry}.{name}" for name in stages.ALL_NAMES}
    wrong = [f"{m} -> {t}" for m, targets in sorted(graph.items()) if m != registry for t in sorted(targets & modules)]
    assert not wrong, "stage modules imported outside the registry:\n" + "\n".join(wrong)
    back = [m for m in sorted(modules) if registry in _imports_reached(graph, m)]
    assert not back, f"stages that import the registry that loads them (a circle): {back}"


def test_the_stage_context_declares_all_a_stage_uses_of_it():
    """A stage uses of its `run(ctx, r)` argument only what StageContext (stages/context.py)
    declares, each with its type (no Any): the one place to read what a stage may ask of the loop."""
    import typing

    from pyhelpers.stages import context

    hints = typing.get_type_hints(context.StageContext)
    declared = set(hints) | {n for n, v in vars(context.StageContext).items() if callable(v) and not n.startswith("_")}
    untyped = sorted(n for n, h in hints.items() if "typing.Any" in repr(h) or h is typing.Any)
    used: dict[str, list[str]] = {}
    for path in sorted((ROOT / "pyhelpers" / "stages").glob("*.py")):
        rel = path.relative_to(ROOT)
        is_stage = path.stem in stages.ALL_NAMES
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
            ctx = {a.arg for a in params if a.annotation is not None and "StageContext" in ast.unparse(a.annotation)}
            if is_stage and fn.name == "run" and params:
                ctx.add(params[0].arg)  # a stage's run(ctx, r), annotated or not
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ctx:
                    used.setdefault(node.attr, []).append(f"{rel}:{node.lineno}")
    missing = {name: where for name, where in sorted(used.items()) if name not in declared}
    assert not missing, f"stages use what StageContext does not declare: {missing}"
    assert not untyped, f"StageContext members typed Any: {untyped}"


def test_no_test_or_document_lists_a_rounds_stages():
    """A round's stages written out as a list (in a test, a golden file, the README, a menu line, a
    docstring) go stale when a stage is added: tests derive the list from the registry, prose
    points at it or at `make plan`. A list: three of the round's stages in their order with only
    punctuation between them. The registry itself is the one list."""
    names = stages.NAMES
    listed = re.compile("|".join(r"\b" + r"\W+".join(map(re.escape, names[i:i + 3])) + r"\b"
                                 for i in range(len(names) - 2)))
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    registry = Path(stages.__file__).relative_to(ROOT).as_posix()
    found = []
    for rel in files:
        path = ROOT / rel
        if not rel or rel == registry or not path.is_file() or path.is_symlink():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}" for m in listed.finditer(text)]
    assert not found, "a round's stages listed by name (derive them from pyhelpers.stages):\n" + "\n".join(found)
