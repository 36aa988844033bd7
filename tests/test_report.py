"""`make report`: the rehearsal's report page, its PNGs and CSVs; and a run that crashed mid-round."""

from __future__ import annotations

import json
import re
import shutil
import struct
import zlib

from support.rehearsal import in_rehearsal, pyhelpers_cmd, rows

ROUNDS, STEPS = 2, 2


def _valid_png(path) -> bool:
    """PNG signature, an IHDR chunk with a non-zero size, and a correct CRC on every chunk."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    pos, kinds = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            return False
        kinds.append(kind)
        pos += 12 + length
    width, height = struct.unpack(">II", data[16:24])
    return kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds and width > 0 and height > 0


def _check_page(out):
    page = (out / "index.html").read_text()
    images = re.findall(r'<img src="([^"]+)"', page)
    assert len(images) == 6  # val, gate, bank, training, timeline, GPU time per round
    for name in images:
        assert _valid_png(out / name), name
    for name in re.findall(r'<a href="([^"]+\.csv)"', page):
        assert (out / name).is_file(), name
    return page


def test_the_rehearsal_leaves_a_report_and_make_report_rewrites_it(reference, tmp_path):
    assert (reference.run.run_dir / "report" / "index.html").is_file()  # the loop wrote one at the run's end
    # Rewritten in a copy: other tests read the shared reference at the same time.
    runs = tmp_path / "runs"
    shutil.copytree(reference.run.run_dir, runs / "rehearsal", symlinks=True)
    shutil.rmtree(runs / "rehearsal" / "report")
    env = {**reference.env, "RUNS_DIR": str(runs)}
    out = runs / "rehearsal" / "report"
    res = in_rehearsal(env, *pyhelpers_cmd("run", "report"))
    assert res.returncode == 0, res.stderr
    assert re.search(r"wrote .*report/index\.html \(\d+\.\d s\)", res.stdout)
    _check_page(out)
    val = rows(out / "val.csv")
    assert [r["round"] for r in val] == ["0", "1"] and all(r["status"] == "ok" for r in val)
    gate = rows(out / "gate.csv")
    decisions = sum(len(json.loads((reference.run.round_dir(r) / "gate" / "decisions.json").read_text())["decisions"])
                    for r in range(ROUNDS))
    assert len(gate) == decisions > 0 and {r["decision"] for r in gate} <= {"accept", "reject", "retire", "keep"}
    assert [(r["round"], r["step"]) for r in rows(out / "steps.csv")] == [("0", "0"), ("0", "1"), ("1", "2"), ("1", "3")]
    assert [r["round"] for r in rows(out / "bank.csv")] == ["0", "1", "final"]
    train = rows(out / "train.csv")  # train/* from slime's offline W&B runs
    assert [int(r["step"]) for r in train] == list(range(ROUNDS * STEPS * 2)) and "train/loss" in train[0]
    stages = {(r["round"], r["stage"]) for r in rows(out / "timeline.csv")}
    assert ("1", "evaluate") in stages and ("0", "train") in stages
    st = in_rehearsal(env, *pyhelpers_cmd("run", "status"))
    assert f"report: {out / 'index.html'}" in st.stdout


def test_a_run_that_crashed_mid_round_still_reports_what_is_missing(reference, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(reference.run.run_dir, runs / "rehearsal", symlinks=True)
    shutil.rmtree(runs / "rehearsal" / "report")
    r1 = runs / "rehearsal" / "rounds" / "round-001"
    for name in ("val", "gate", "compiled.json"):  # round 1 crashed in training: no val, gate, compile
        p = r1 / name
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    (runs / "rehearsal" / "skillbank-final.json").unlink()
    metrics = (r1 / "rollout_metrics.jsonl").read_text().splitlines()
    (r1 / "rollout_metrics.jsonl").write_text(metrics[0] + "\n" + metrics[1][:40])  # a torn last line
    env = {**reference.env, "RUNS_DIR": str(runs)}
    res = in_rehearsal(env, *pyhelpers_cmd("run", "report"))
    assert res.returncode == 0, res.stderr
    out = runs / "rehearsal" / "report"
    page = _check_page(out)
    assert "round 1: no val, no gate yet" in page
    assert [(r["round"], r["status"]) for r in rows(out / "val.csv")] == [("0", "ok"), ("1", "missing")]
    gate = rows(out / "gate.csv")
    assert gate and all(r["round"] == "0" for r in gate)  # round 0's decisions, none of the missing round
    assert [r["step"] for r in rows(out / "steps.csv")] == ["0", "1", "2"]
    assert [(r["round"], r["status"]) for r in rows(out / "bank.csv")][-1] == ("final", "missing")


def test_report_refuses_a_run_that_does_not_exist(reference, tmp_path):
    env = {**reference.env, "RUNS_DIR": str(tmp_path / "nothing")}
    res = in_rehearsal(env, *pyhelpers_cmd("run", "report"))
    assert res.returncode == 1 and "there is no run named rehearsal" in res.stderr
