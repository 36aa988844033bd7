"""Task files: `pyhelpers data build|check`, line-numbered validation, the published split, indices."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import run_pyhelpers
from fakes.shop_fixture import goals, records, write_shop_fixture

from pyhelpers.errors import ToolkitError
from pyhelpers.tasks import build, files


def _read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_build_from_directory_uses_published_split_and_exact_indices(toolkit_env, tmp_path):
    fx = write_shop_fixture(tmp_path / "shop", n_tasks=8, n_eval=4, quirks=True)
    out = tmp_path / "data"
    r = run_pyhelpers(["data", "build", "--source", str(tmp_path / "shop"), "--out-dir", str(out)], toolkit_env)
    assert r.returncode == 0, r.stderr
    train, val = _read(out / "train.jsonl"), _read(out / "val.jsonl")
    report = json.loads((out / "tasks_build.json").read_text())
    assert "exact" in report["index_basis"] and report["skipped"] == {"bad_asin": 1, "duplicate_asin": 1,
                                                                      "no_attributes": 1}
    # Published split: eval-file records only in val, train-file records only in train; disjoint.
    eval_asins = {json.loads(line)["asin"] for line in fx["eval_file"].read_text().splitlines()}
    assert {t["asin"] for t in val} <= eval_asins and not {t["asin"] for t in train} & eval_asins
    assert not {t["task_id"] for t in train} & {t["task_id"] for t in val}
    # shopsim_idx is the server's goal order (skips and multi-instruction records included).
    by_instruction = {g["instruction"]: g["idx"] for g in fx["tasks"]}
    assert all(t["shopsim_idx"] == by_instruction[t["instruction"]] for t in train + val)
    assert sorted(t["shopsim_idx"] for t in train + val) == list(range(len(fx["tasks"])))
    assert {t["task_id"] for t in train} >= {"700010-0", "700010-1"}
    r = run_pyhelpers(["data", "check", str(out / "train.jsonl"), str(out / "val.jsonl")], toolkit_env)
    assert r.returncode == 0 and "disjoint" in r.stdout, r.stderr


def test_unlabeled_file_needs_a_split_and_hash_split_is_seeded(tmp_path):
    src = tmp_path / "fine_items_eval_train_all.jsonl.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records(40))
    with pytest.raises(ToolkitError, match="--val-share"):
        build.build([src])
    a = build.build([src], val_share=0.25, seed=7)
    b = build.build([src], val_share=0.25, seed=7)
    c = build.build([src], val_share=0.25, seed=8)
    assert len(a.val) == 10 and len(a.train) == 30
    assert files.dumps_tasks(a.val) == files.dumps_tasks(b.val)  # same inputs, same bytes
    assert {t["task_id"] for t in a.val} != {t["task_id"] for t in c.val}
    files.check_disjoint(a.train, a.val)
    e = build.build([src], eval_tasks=5)
    assert [t["shopsim_idx"] for t in e.val] == [0, 1, 2, 3, 4]
    assert "itself" in e.report["index_basis"]


def test_published_val_subsample_and_persona_scenario(tmp_path):
    fx = write_shop_fixture(tmp_path, n_tasks=12, n_eval=6)
    res = build.build([fx["eval_file"], fx["train_file"]], val_count=2, seed=1)
    assert len(res.val) == 2 and res.report["published_val_unused"] == 4 and len(res.train) == 6
    assert "assumes" in res.report["index_basis"]
    persona = build.build([fx["eval_file"], fx["train_file"]], scenario="all")
    assert all(t["scenario"] == "standard" for t in persona.train + persona.val)
    p = build.build([fx["server_file"]], scenario="persona", eval_tasks=6)
    assert p.val and all(t["task_id"].endswith("-p") and t["persona"] == {"年龄": "25"} for t in p.val + p.train)


def test_source_errors_name_the_line(tmp_path):
    bad = tmp_path / "fine_items_train_standard.jsonl"
    good = json.dumps(records(1)[0], ensure_ascii=False)
    bad.write_text(good + "\n\n{not json\n", encoding="utf-8")
    with pytest.raises(ToolkitError, match=r"line 3"):
        build.read_records(bad)
    bad.write_text(good + "\n" + json.dumps({"asin": "1", "instructions": []}) + "\n", encoding="utf-8")
    with pytest.raises(ToolkitError, match=r"line 2.*|no instructions"):
        build.read_records(bad)


def test_task_file_validation_names_the_line(toolkit_env, tmp_path):
    ok = {"task_id": "a-0", "shopsim_idx": 0, "split": "train", "instruction": "买鞋"}
    f = tmp_path / "train.jsonl"
    f.write_text(json.dumps(ok) + "\n" + json.dumps({**ok, "task_id": "b-0", "shopsim_idx": -1}) + "\n")
    r = run_pyhelpers(["data", "check", str(f)], toolkit_env)
    assert r.returncode == 1 and "line 2" in r.stderr and "shopsim_idx" in r.stderr and "Traceback" not in r.stderr
    f.write_text(json.dumps(ok) + "\n" + json.dumps(ok) + "\n")
    with pytest.raises(ToolkitError, match="duplicate task_id.*line 1"):
        files.load_tasks(f)
    f.write_text(json.dumps(ok) + "\n{oops\n")
    with pytest.raises(ToolkitError, match="line 2"):
        files.load_tasks(f)
    with pytest.raises(ToolkitError, match="expected 'val'"):
        f.write_text(json.dumps(ok) + "\n")
        files.load_tasks(f, split="val")
    with pytest.raises(ToolkitError, match="overlap"):
        files.check_disjoint([ok], [{**ok, "split": "val"}])


def test_dry_run_writes_nothing_and_goal_rules_match_fixture(toolkit_env, tmp_path):
    fx = write_shop_fixture(tmp_path / "shop", quirks=True)
    r = run_pyhelpers(["data", "build", "--source", str(fx["server_file"]), "--eval-tasks", "3", "--dry-run",
                       "--out-dir", str(tmp_path / "out")], toolkit_env)
    assert r.returncode == 0 and "dry run" in r.stdout and not (tmp_path / "out").exists()
    assert [g.idx for g in build.enumerate_goals(fx["records"])] == [g["idx"] for g in goals(fx["records"])]
