"""The GPU-idle bench reads val beside compile (VAL_BESIDE_COMPILE=1) on a clock per activity
(bench/modelled_time.py, issue 44): val on the eval server's own waits, compile's drain on the
analyst's, the GPUs' idle from both. On one clock, inside compile's window every instant ran at
the analyst's rate, so val's time on this CPU counted 60x as busy and a loaded machine moved the
verdict. These runs are synthetic (events and wait records written here, no rehearsal)."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import modelled_time  # noqa: E402
import round_gpu_idle  # noqa: E402

from pyhelpers import stages  # noqa: E402
from pyhelpers.run import gpu_time  # noqa: E402

SCALE = 1 / 60  # rehearsal seconds per modelled second, as the bench's
LATENCY, ANALYST = "FAKE_SGLANG_LATENCY_MS", round_gpu_idle.ANALYST_KNOB


class Recorder:
    """One synthetic run: its events and its stand-ins' wait records. `cpu` stretches every part
    that is this CPU's own (unscaled) time: 2 reads as a machine twice as loaded."""

    def __init__(self, cpu: float = 1.0):
        self.cpu, self.evs, self.waits = cpu, [], []

    def ev(self, t: float, kind: str, r: int, **fields) -> None:
        self.evs.append({"t": round(t, 3), "kind": kind, "round": r, **fields})

    def busy(self, t: float, seconds: float) -> float:
        return t + seconds * self.cpu

    def wait(self, t: float, knob: str, modelled: float) -> float:
        end = t + modelled * SCALE
        self.waits.append({"knob": knob, "start": t, "end": end, "waited_s": modelled * SCALE, "modelled_s": modelled})
        return end

    def write(self, tmp):
        run = tmp / "runs" / "rehearsal"
        run.mkdir(parents=True)
        (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in sorted(self.evs, key=lambda e: e["t"])))
        (tmp / round_gpu_idle.WAITS).write_text("".join(json.dumps(w) + "\n" for w in self.waits))
        return tmp

    def play(self, t: float, r: int, what: str, turns: int) -> float:
        """Episodes: each turn this CPU's handling, then one /generate (0.8 modelled s)."""
        began = t
        for _ in range(turns):
            t = self.wait(self.busy(t, 0.1), LATENCY, 0.8)
        self.ev(t, "episodes", r, what=what, seconds=round(t - began, 3))
        return t

    def rollout(self, t: float, r: int, k: int) -> float:
        """Step k's rollout: this CPU playing its episodes (the stand-in engines' turns are not timed here)."""
        return self.busy(t, 3.0)

    def drain(self, t: float, r: int, answers: int) -> float:
        """compile: the analyst's answers (60 modelled s each), its own polling between them."""
        self.ev(t, "stage-start", r, stage="compile")
        for _ in range(answers):
            t = self.busy(self.wait(t, ANALYST, 60), 0.05)
        t = self.busy(t, 0.1)
        self.ev(t, "stage-end", r, stage="compile", status=0)
        return t

    def evaluate(self, t: float, r: int, gate_after: float) -> float:
        """evaluate: the eval server's start, bare val, the gate once compile has ended (gate_after)."""
        self.ev(t, "stage-start", r, stage="evaluate")
        t = self.busy(t, 0.5)
        self.ev(t, "service-start", r, service="eval-server")
        t = self.wait(self.busy(t, 1.0), "FAKE_SGLANG_START_DELAY", 30)
        self.ev(t, "service-ready", r, service="eval-server")
        t = self.play(t, r, "val", 24)
        t = self.play(self.busy(max(t, gate_after), 0.05), r, "gate", 32)
        t = self.busy(t, 0.3)
        self.ev(t, "stage-end", r, stage="evaluate", status=0)
        return t

    def steps(self, t: float, r: int) -> float:
        """Training's steps, from the first rollout; then the checkpoint's save."""
        self.ev(t, "rollout-started", r)
        for k in range(4):
            t = self.wait(self.rollout(t, r, k), "FAKE_SLIME_STEP_DELAY", 1250)
            self.ev(t, "step-done", r)
            self.ev(t, "train-done", r)
        t = self.wait(t, "FAKE_SLIME_SAVE_DELAY", 10)
        self.ev(t, "checkpoint-saved", r)
        return t

    def train(self, t: float, r: int) -> float:
        self.ev(t, "stage-start", r, stage="train")
        t = self.steps(self.wait(self.busy(t, 2.0), "FAKE_SLIME_START_DELAY", 90), r)
        t = self.busy(self.wait(t, "FAKE_SLIME_EXIT_DELAY", 15), 0.5)
        self.ev(t, "stage-end", r, stage="train", status=0)
        return t

    def round(self, t: float, r: int, beside: bool) -> float:
        t = self.train(t, r)
        for stage, knob, modelled in (("rotate", None, 0), ("export", "FAKE_CONVERT_DELAY", 60)):
            self.ev(t, "stage-start", r, stage=stage)
            t = self.busy(t, 0.2)
            t = self.wait(t, knob, modelled) if knob else t
            self.ev(t, "stage-end", r, stage=stage, status=0)
        if beside:  # the loop starts compile's thread, then evaluate
            ends = self.drain(t, r, answers=5)
            t = self.evaluate(t, r, gate_after=ends)
        else:
            t = self.evaluate(self.drain(t, r, answers=5), r, gate_after=0)
        self.ev(t, "stage-start", r, stage="inject")
        t = self.busy(t, 0.3)
        self.ev(t, "stage-end", r, stage="inject", status=0)
        return t


def idle_fraction(tmp, beside: bool, cpu: float, make=Recorder) -> float:
    rec, t = make(cpu), 1_000.0
    for r in (0, 1):
        t = rec.round(t, r, beside)
    rounds, _waits, healed = round_gpu_idle.modelled_rounds(rec.write(tmp))
    assert healed == 0 and [rt.round for rt in rounds] == [0, 1]
    return gpu_time.run_idle_frac(round_gpu_idle.five_rounds(rounds))


def test_val_beside_compile_reads_the_same_on_a_quiet_and_a_loaded_machine(tmp_path):
    # The same logical run recorded twice: once quiet, once with every part of this CPU's own
    # time twice as long (a machine beside two hogs). Val's share of the drain is the eval
    # server's waits and its real CPU seconds, not those seconds times the analyst's rate.
    frac = {(beside, cpu): idle_fraction(tmp_path / f"{beside}-{cpu}", beside, cpu)
            for beside in (False, True) for cpu in (1.0, 2.0)}
    quiet, loaded = frac[True, 1.0] / frac[False, 1.0], frac[True, 2.0] / frac[False, 2.0]
    assert loaded == pytest.approx(quiet, rel=0.01), f"ratio quiet {quiet:.3f}, loaded {loaded:.3f}"
    assert frac[True, 2.0] == pytest.approx(frac[True, 1.0], rel=0.02)


def one_window(tmp, drain_end: float, val_generates: list[float]):
    """Round 0 from t=0: compile (one analyst answer of 60 modelled s from 0 to 1, then its own
    polling until drain_end) beside evaluate (server 0-0.5 = 30 s; val: each generate 0.5 s of
    wall modelling the given seconds, each after 0.25 s of this CPU; the gate one generate after
    compile)."""
    rec = Recorder()
    rec.ev(0, "stage-start", 0, stage="compile")
    rec.wait(0, ANALYST, 60)
    rec.ev(drain_end, "stage-end", 0, stage="compile", status=0)
    rec.ev(0, "stage-start", 0, stage="evaluate")
    rec.ev(0, "service-start", 0, service="eval-server")
    t = rec.wait(0, "FAKE_SGLANG_START_DELAY", 30)
    rec.ev(t, "service-ready", 0, service="eval-server")
    began = t
    for modelled in val_generates:
        t += 0.25
        rec.waits.append({"knob": LATENCY, "start": t, "end": t + 0.5, "waited_s": 0.5, "modelled_s": modelled})
        t += 0.5
    rec.ev(t, "episodes", 0, what="val", seconds=round(t - began, 3))
    gate = max(t, drain_end) + 0.1
    rec.waits.append({"knob": LATENCY, "start": gate, "end": gate + 0.5, "waited_s": 0.5, "modelled_s": 40})
    rec.ev(gate + 0.5, "episodes", 0, what="gate", seconds=0.5)
    rec.ev(gate + 0.5, "stage-end", 0, stage="evaluate", status=0)
    rec.ev(gate + 0.5, "stage-start", 0, stage="inject")
    rec.ev(gate + 0.5, "stage-end", 0, stage="inject", status=0)
    [rt], _waits, _healed = round_gpu_idle.modelled_rounds(rec.write(tmp))
    return rt


def test_the_gpus_idle_while_only_the_drain_is_waited_for(tmp_path):
    # The drain models 60 s + 0.5 s of its own; val 2 x 10 s of generates + 0.5 s of this CPU,
    # after the server's 30 s. On the analyst's clock val's second (0.5-1.0, at 60x) would read 30 s.
    rt = one_window(tmp_path, drain_end=1.5, val_generates=[10, 10])
    s = rt.seconds
    assert s["server-start"] == pytest.approx(30, abs=0.01)
    assert s["episodes"] == pytest.approx(20.5 + 40, abs=0.01)  # val, then the gate's one generate
    assert s["compile-wait"] == pytest.approx(60.5 - 30 - 20.5, abs=0.01)  # the drain val did not cover
    assert rt.wall_s == pytest.approx(60.5 + 0.1 + 40, abs=0.01)  # the gate 0.1 s after the drain


def test_a_val_longer_than_the_drain_leaves_no_wait_whichever_ended_first_here(tmp_path):
    # Here the drain's polling ends at 5 s of wall, after val (at 2.0): modelled, the drain is
    # 60 + 4 s and val ends at 30 + 120.5 s, so the gate waits for nothing.
    rt = one_window(tmp_path, drain_end=5.0, val_generates=[60, 60])
    s = rt.seconds
    assert s["compile-wait"] == pytest.approx(0, abs=0.01)
    assert s["episodes"] == pytest.approx(120.5 + 40, abs=0.01)
    assert rt.wall_s == pytest.approx(30 + 120.5 + 0.1 + 40, abs=0.01)


def test_today_order_reads_on_the_one_clock_as_before(tmp_path):
    # Compile then evaluate (VAL_BESIDE_COMPILE=0): nothing overlaps, so the one clock it always
    # was -- the analyst's answers count inside compile's window, everything else as it was.
    rec, t = Recorder(), 1_000.0
    for r in (0, 1):
        t = rec.round(t, r, beside=False)
    tmp = rec.write(tmp_path)
    rounds, _w, _h = round_gpu_idle.modelled_rounds(tmp)
    evs = sorted(rec.evs, key=lambda e: e["t"])
    windows = [(a["t"], b["t"]) for a, b in zip(evs, evs[1:], strict=False)
               if a.get("stage") == b.get("stage") == "compile" and a["kind"] == "stage-start"]
    to = modelled_time.clock(modelled_time.within(rec.waits, ANALYST, windows), origin=evs[0]["t"])
    one = gpu_time.split(modelled_time.events(evs, to), stages.GPU_ROLES)
    assert [rt.row() for rt in rounds] == [rt.row() for rt in one]


class JobRecorder(Recorder):
    """The train stage as the toolkit records it: the job's submission and end between this CPU's
    own time (services, submission; the log copier's and analyst's stop) and the job's, whose
    start and teardown on the stand-ins also spend this CPU's time beside their waits (Ray's job
    supervisor, the driver's, the actors' and the engines' Python starts; Ray stopping the actors)."""

    def train(self, t: float, r: int) -> float:
        self.ev(t, "stage-start", r, stage="train")
        t = self.busy(t, 1.0)
        self.ev(t, "job-submitted", r, job_id=f"job-{r}")
        t = self.wait(self.busy(t, 8.0), "FAKE_SLIME_START_DELAY", 90)
        t = self.wait(self.busy(t, 3.0), "FAKE_SGLANG_START_DELAY", 30)
        t = self.busy(t, 1.0)
        # the plugin's marker, noticed a little later by the step watcher (its mtime as `since`)
        self.ev(self.busy(t, 0.2), "rollout-started", r, since=round(t, 3))
        for k in range(4):
            t = self.wait(self.rollout(t, r, k), "FAKE_SLIME_STEP_DELAY", 1250)
            self.ev(t, "step-done", r)
            # slime's perf line, through Ray's log forwarding and the log copier: the last one
            # reaches the toolkit once the save has begun (later the busier this CPU)
            self.ev(t + (0.2 * self.cpu if k == 3 else 0), "train-done", r)
        saved = t = self.wait(t, "FAKE_SLIME_SAVE_DELAY", 10)
        t = self.busy(self.wait(self.busy(t, 2.0), "FAKE_SLIME_EXIT_DELAY", 15), 1.0)
        self.ev(t, "job-end", r, job_id=f"job-{r}", status="SUCCEEDED")
        # read after the job's end, from the tracker's mtime (stages/train.py _note_checkpoint): in
        # the file after job-end
        self.ev(t + 0.001, "checkpoint-saved", r, since=round(saved, 3))
        t = self.busy(t, 0.5)
        self.ev(t, "stage-end", r, stage="train", status=0)
        return t


def test_the_jobs_start_save_and_teardown_read_the_delay_tables_figures_on_a_quiet_and_a_loaded_machine(tmp_path):
    # The table's figures are the whole of a real job's start (submission, Megatron's init and
    # load, the engines' start) and teardown: what the stand-ins spend on this CPU beside their
    # waits between the job's submission and its first rollout, and between its checkpoint and its
    # end, stands for nothing more (on a loaded machine it read 196-217 s quietly and 231-248 s
    # beside two hogs of round 0's job-start). The toolkit's own time around the job still counts.
    seconds = {}
    for cpu in (1.0, 2.0):
        rec, t = JobRecorder(cpu), 1_000.0
        for r in (0, 1):
            t = rec.round(t, r, beside=True)
        rounds, _waits, _healed = round_gpu_idle.modelled_rounds(rec.write(tmp_path / str(cpu)))
        seconds[cpu] = rounds[1].seconds
    for cpu, s in seconds.items():
        assert s["job-start"] == pytest.approx(90 + 30 + cpu * 1.0, abs=0.01), (cpu, s)
        assert s["checkpoint"] == pytest.approx(10, abs=0.01), (cpu, s)  # the save, however late the line
        # (and the toolkit's own after the job's end: the train stage's last 0.5 s, rotate's 0.2 s)
        assert s["teardown"] == pytest.approx(15 + cpu * (0.5 + 0.2), abs=0.01), (cpu, s)


class OneJobRecorder(Recorder):
    """The one-job mode (ONE_JOB=1) as the toolkit records it: one job trains every round; at a
    round's save the job's eval hook plays bare val on the job's engines while the loop, once it
    noticed the save, exports the checkpoint on the CPU (the converter); the hook's gate once
    compile has ended; the next round's first rollout once inject wrote its bank."""

    def __init__(self, cpu: float = 1.0, val_generates: tuple[float, ...] = (10, 10)):
        super().__init__(cpu)
        self.val_generates = val_generates

    def play_generates(self, t: float, r: int, what: str, generates) -> float:
        began = t
        for modelled in generates:
            t = self.wait(self.busy(t, 0.1), LATENCY, modelled)
        self.ev(t, "episodes", r, what=what, seconds=round(t - began, 3))
        return t

    def round(self, t: float, r: int, last: bool) -> float:
        self.ev(t, "stage-start", r, stage="train")
        if r == 0:
            t = self.wait(self.busy(t, 1.0), "FAKE_SLIME_START_DELAY", 90)
        self.ev(t, "rollout-started", r)
        for _ in range(4):
            t = self.wait(self.rollout(t, r, 0), "FAKE_SLIME_STEP_DELAY", 1250)
            self.ev(t, "step-done", r)
            self.ev(t, "train-done", r)
        saved = t = self.wait(t, "FAKE_SLIME_SAVE_DELAY", 10)
        self.ev(t, "checkpoint-saved", r)
        self.ev(t, "job-round-saved", r, job_id="job")
        # the hook: the weight sync, then val on the job's engines
        val_end = self.play_generates(self.busy(saved, 0.3), r, "val", self.val_generates)
        # the loop notices the saved round (the busier this CPU, the later), then exports
        t = self.busy(saved, 0.5)
        self.ev(t, "stage-end", r, stage="train", status=0)
        self.ev(t, "stage-start", r, stage="export")
        t = self.busy(self.wait(self.busy(t, 0.2), "FAKE_CONVERT_DELAY", 60), 0.2)
        self.ev(t, "stage-end", r, stage="export", status=0)
        self.ev(t, "stage-start", r, stage="compile")
        self.ev(t, "stage-start", r, stage="evaluate")
        compiled = self.busy(t, 0.1)
        self.ev(compiled, "stage-end", r, stage="compile", status=0)
        t = self.play_generates(self.busy(max(val_end, compiled), 0.05), r, "gate", (40,))
        if last:
            t = self.wait(t, "FAKE_SLIME_EXIT_DELAY", 15)
            self.ev(t, "job-end", r, job_id="job", status="SUCCEEDED")
        t = self.busy(t, 0.3)
        self.ev(t, "stage-end", r, stage="evaluate", status=0)
        self.ev(t, "stage-start", r, stage="inject")
        t = self.busy(t, 0.3)
        self.ev(t, "stage-end", r, stage="inject", status=0)
        return t


def one_job_rounds(tmp, cpu: float, val_generates: tuple[float, ...]) -> list[gpu_time.RoundTime]:
    rec, t = OneJobRecorder(cpu, val_generates), 1_000.0
    for r in (0, 1):
        t = rec.round(t, r, last=r == 1)
    rounds, _waits, _healed = round_gpu_idle.modelled_rounds(rec.write(tmp))
    assert [rt.round for rt in rounds] == [0, 1]
    return rounds


@pytest.mark.parametrize("val_generates", [(10, 10), (60, 60)], ids=["val-shorter-than-the-export", "val-longer"])
def test_the_one_job_modes_export_beside_its_in_job_val_reads_the_same_on_a_quiet_and_a_loaded_machine(
        tmp_path, val_generates):
    # On one clock the converter's wait (60 modelled s in 1 s of wall) ran at its rate over val's
    # end, and how much of it val covered moved with when the loop noticed the save: beside two
    # CPU hogs the one-job row's hf-export read 51 s where a quiet run read 21 s (issue 44). On a
    # clock per activity the export lasts its 60 s and its own CPU time, val its generates and
    # its own, and the GPUs wait only for what the export adds after val: max(0, X - V).
    seconds = {cpu: [rt.seconds for rt in one_job_rounds(tmp_path / str(cpu), cpu, val_generates)]
               for cpu in (1.0, 2.0)}
    val = sum(val_generates)
    for cpu, rounds in seconds.items():
        for s in rounds:
            # the export: from the loop's notice (0.5 s of this CPU after the save) its 0.2 s, the
            # converter's 60 s and its 0.2 s; val from the save: the sync's 0.3 s, then per generate
            # 0.1 s of this CPU and its modelled seconds
            export, played = cpu * (0.5 + 0.2 + 0.2) + 60, cpu * 0.3 + val + cpu * 0.1 * len(val_generates)
            # (within 0.1: the events' times are kept to 1 ms of wall, 60 ms on the converter's clock)
            assert s["hf-export"] == pytest.approx(max(0.0, export - played), abs=0.1), (cpu, s)
    assert seconds[2.0][0]["hf-export"] == pytest.approx(seconds[1.0][0]["hf-export"], abs=1.0)
