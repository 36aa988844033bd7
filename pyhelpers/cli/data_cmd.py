"""`pyhelpers data build|check`: the train/val task files (M19)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pyhelpers.config import load
from pyhelpers.jsonfiles import write_json_atomic
from pyhelpers.tasks import build
from pyhelpers.tasks.files import check_disjoint, load_tasks, write_tasks


@click.group()
def data():
    """Task files: build them from ShopSimulator's dataset files, check them."""


@data.command("build")
@click.option("--source", "sources", multiple=True, required=True, type=click.Path(path_type=Path),
              help="fine_items_* file or a directory of them (repeatable).")
@click.option("--server-file", type=click.Path(path_type=Path),
              help="The file the simulator loads (items_eval_train.json): exact task indices.")
@click.option("--out-dir", type=click.Path(path_type=Path), help="Default: DATA_DIR.")
@click.option("--scenario", type=click.Choice(["standard", "persona", "all"]), default="standard",
              show_default=True)
@click.option("--val-share", type=float, help="Seeded share of unlabeled tasks (or of the published val) for val.")
@click.option("--val-count", type=int, help="Seeded count instead of a share.")
@click.option("--eval-tasks", type=int, help="In a combined file, indices below N are the published eval split.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--dry-run", is_flag=True, help="Print the counts; write nothing.")
def data_build(sources, server_file, out_dir, scenario, val_share, val_count, eval_tasks, seed, dry_run):
    """Make train.jsonl and val.jsonl (disjoint by task id) plus tasks_build.json (the report).

    Files named fine_items_eval_* go to val and fine_items_train_* to train; other files need
    --val-share/--val-count or --eval-tasks. Task indices (shopsim_idx) follow the order the
    simulator enumerates its goals; see docs/shopsim_protocol.md.

    \b
    Example:
      pyhelpers data build --source /root/ShopSimulator/shop_env/data
      pyhelpers data build --source fine_items_eval_train_all.json.gz --eval-tasks 1459
    """
    out = out_dir or load.load().DATA_DIR
    res = build.build(list(sources), server_file=server_file, scenario=scenario, val_share=val_share,
                         val_count=val_count, eval_tasks=eval_tasks, seed=seed)
    check_disjoint(res.train, res.val, str(out))
    click.echo(f"train {len(res.train)} tasks, val {len(res.val)} tasks; index basis: {res.report['index_basis']}")
    if res.report["skipped"]:
        click.echo("skipped as the simulator does: " + json.dumps(res.report["skipped"], sort_keys=True))
    if dry_run:
        click.echo(f"dry run: nothing written (would write {out}/train.jsonl, val.jsonl, tasks_build.json)")
        return
    write_tasks(out / "train.jsonl", res.train)
    write_tasks(out / "val.jsonl", res.val)
    write_json_atomic(out / "tasks_build.json", res.report)
    click.echo(f"wrote {out}/train.jsonl, {out}/val.jsonl, {out}/tasks_build.json")


@data.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def data_check(files):
    """Validate task files line by line; with two files (train, val), also check they are disjoint.

    \b
    Example:
      pyhelpers data check data/train.jsonl data/val.jsonl
    """
    loaded = []
    for f in files:
        rows = load_tasks(f)
        loaded.append(rows)
        click.echo(f"{f}: {len(rows)} tasks ok")
    if len(loaded) == 2:
        check_disjoint(loaded[0], loaded[1], f"{files[0]} / {files[1]}")
        click.echo("disjoint: no shared task id or task index")
