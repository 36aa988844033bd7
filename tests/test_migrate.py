"""`make migrate-pack` + `make migrate-machine` on the stand-ins: a run finished through round 0 in
root A is packed, migrated into root B over rsync (interrupted once, a byte corrupted in flight,
a file damaged at the source), A is moved away, and `make resume` in B ends with the results of an
uninterrupted rehearsal. No absolute path of A survives in B's run files; the only exceptions are
history that says where it was written (logs/previous-machine/, W&B offline runs made in A)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess

from support.rehearsal import (
    Run,
    in_rehearsal,
    outcome,
    pyhelpers_cmd,
    rehearse,
    rehearse_env,
    start,
    wait_for,
)

SHARD = "save/megatron/iter_0000001/__0_0.distcp"
BIG = "run/logs/previous-machine/zz-big.log"


def _migrate(env, from_, **extra) -> subprocess.CompletedProcess:
    return in_rehearsal({**env, **extra}, *pyhelpers_cmd("migrate", "machine", "--from", from_), timeout=300)


def _flip(path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0xFF
    with open(path, "r+b") as fh:  # in place: the pack's hardlink sees it too, as a disk fault would
        fh.write(data)


def test_a_run_moves_to_a_new_root_and_finishes_there(tmp_path, rehearsal_world, reference):
    a, b = tmp_path / "A", tmp_path / "B"
    env_a = rehearse_env(a, rehearsal_world, ROUNDS=1)
    assert rehearse(env_a).returncode == 0
    old = Run(a / "runs")
    (old.run_dir / "logs" / "zz-big.log").write_bytes(os.urandom(2_000_000))  # a file to interrupt the copy in

    packed = in_rehearsal(env_a, *pyhelpers_cmd("migrate", "pack"))
    assert packed.returncode == 0, packed.stderr
    from_ = re.search(r"FROM=root@<this machine>:(\S+)", packed.stdout).group(1)
    manifest = json.loads((a / "runs" / ".migration" / "rehearsal" / "manifest.json").read_text())
    paths = {f"{f['root']}/{f['path']}" for f in manifest["files"]}
    assert SHARD in paths and BIG in paths and "run/run.json" in paths and "save/megatron/latest_checkpointed_iteration.txt" in paths
    assert not [p for p in paths if p.endswith("slime.yaml") or "/pids/" in p or p.endswith("slime-job.json")]
    assert manifest["symlinks"] == [{"root": "save", "path": "hf", "target": "hf-0000001"}]

    # 1. The copy, interrupted halfway (a bandwidth limit makes the big file take seconds).
    env_b = rehearse_env(b, rehearsal_world, ROUNDS=2)
    new = Run(b / "runs")
    proc, _ = start({**env_b, "MIGRATE_BWLIMIT": "300"}, "--env", *pyhelpers_cmd("migrate", "machine", "--from", from_))
    big_dir = new.run_dir / "logs" / "previous-machine"
    wait_for("the big file's copy", lambda: big_dir.is_dir() and any(
        p.name.startswith(".zz-big.log.") and p.stat().st_size > 0 for p in big_dir.iterdir()), timeout=300)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=300)
    assert not (big_dir / "zz-big.log").exists()  # never a half file under its real name
    done = {p: p.stat().st_ino for p in new.run_dir.rglob("*") if p.is_file() and not p.name.startswith(".")
            and ".rsync-partial" not in p.parts and p.name != "MIGRATING"}
    assert len(done) >= 5  # the run's top-level files and the logs before the big one
    blocked = rehearse(env_b, "--resume", timeout=300)
    assert blocked.returncode == 1 and "a migration into this run has not finished" in blocked.stdout

    # 2. A file damaged at the source is found by its hash, fetched again, and reported: nothing resumes.
    shard = old.save_dir / "megatron" / "iter_0000001" / "__0_0.distcp"
    _flip(shard, 100)
    res = _migrate(env_b, from_)
    assert res.returncode == 1
    assert f"DAMAGED AT THE SOURCE: {SHARD}" in res.stderr and "the run stays unusable here" in res.stderr
    assert (new.run_dir / "MIGRATING").is_file()

    # 3. Repaired at the source; this time a byte is corrupted in flight: detected, fetched again, done.
    _flip(shard, 100)
    res = _migrate(env_b, from_, SHOPSIMRL_TEST_CORRUPT_AFTER_COPY="run/rounds/round-000/compiled.json")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "hash mismatch: run/rounds/round-000/compiled.json; fetching it again" in res.stderr
    assert f"all {len(manifest['files'])} files verified (blake2b-256)" in res.stderr
    assert "continue the run with: make resume ROUND=0" in res.stderr
    assert not (new.run_dir / "MIGRATING").exists()
    kept = [p for p, ino in done.items() if p.exists() and p.stat().st_ino == ino]
    assert len(kept) >= len(done) - 1  # finished files were not copied again (only the corrupted one)
    assert os.readlink(new.save_dir / "hf") == "hf-0000001"

    # 4. The old root is gone; nothing of it survives in the new run's files but history.
    a.rename(tmp_path / "A.moved")
    for p in list(new.run_dir.rglob("*")) + list(new.save_dir.rglob("*")):
        if p.is_file() and "previous-machine" not in p.parts and new.run_dir / "wandb" / "wandb" not in p.parents:
            assert str(a).encode() not in p.read_bytes(), p
    assert not [p for p in new.run_dir.rglob("*.json") if str(a) in p.read_text(errors="ignore")]

    # 5. make resume in B finishes (ROUNDS 1 -> 2 is allowed), with an uninterrupted run's results.
    travelled = set(new.run_dir.glob("wandb/wandb/*run-*"))  # A's offline runs: history, synced as they are
    assert travelled
    res = rehearse(env_b, "--resume")
    assert res.returncode == 0, res.stdout[-4000:]
    assert outcome(new) == outcome(reference.run)
    written_in_b = [p for p in new.run_dir.glob("wandb/wandb/*run-*") if p not in travelled]
    assert written_in_b  # round 1's W&B runs, written here: they name B's paths, never A's
    for p in (f for d in written_in_b for f in d.rglob("*") if f.is_file()):
        assert str(a).encode() not in p.read_bytes(), p
