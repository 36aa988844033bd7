"""`make rehearse` end to end (the shared reference rehearsal, ROUNDS=2, STEPS_PER_ROUND=2): what a
finished run leaves, its W&B offline runs read back, and no secret anywhere."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import wandb_records
from support.rehearsal import (
    KEYS,
    Run,
    in_rehearsal,
    pyhelpers_cmd,
    ray_temp_dir,
    rehearse,
    rehearse_env,
)

from pyhelpers import stages

ROUNDS, STEPS = 2, 2
NOTHING_TO_DO = {(0, "rotate")}  # (round, stage) whose done() holds before it runs: round 0 has no older checkpoint


def _offline_runs(run) -> dict[str, list]:
    """{job_type: [(run record, history items, summary)]} of the run's offline W&B runs."""
    out: dict[str, list] = {}
    for d in sorted((run.run_dir / "wandb" / "wandb").glob("offline-run-*")):
        recs = wandb_records(d)
        meta = next(r["run"] for r in recs if r["type"] == "run")
        history = [r["history"]["item"] for r in recs if r["type"] == "history"]
        summary = {}
        for r in recs:
            if r["type"] == "summary":
                summary.update(r["summary"].get("update", {}))
        out.setdefault(meta["job_type"], []).append((meta, history, summary))
    return out


def test_a_rehearsal_leaves_every_artifact_of_a_run(reference):
    run = reference.run
    assert "run rehearsal: finished" in reference.result.stdout
    for r in range(ROUNDS):
        d = run.round_dir(r)
        for name in ("skillbank.json", "slime.yaml", "compiled.json", "val/summary.json", "val/episodes.jsonl",
                     "gate/summary.json", "gate/decisions.json", "plugin.started"):
            assert (d / name).is_file(), f"round {r}: {name} missing"
        ran = [s for s in stages.NAMES if (r, s) not in NOTHING_TO_DO]
        assert sorted(p.name for p in (d / "stages").glob("*.done")) == sorted(f"{s}.done" for s in ran)
        assert len(list((d / "spool").glob("*.json"))) >= 1, f"round {r}: no spool records"
        assert len(list((d / "candidates").glob("*.json"))) >= 1, f"round {r}: no analyst candidates"
        steps = [json.loads(line)["rollout_id"] for line in (d / "rollout_metrics.jsonl").read_text().splitlines()]
        assert steps == list(range(r * STEPS, (r + 1) * STEPS))
    assert (run.run_dir / "skillbank-final.json").is_file()
    # One Megatron checkpoint (the last round's), one HF export, `hf` pointing at it.
    megatron = run.save_dir / "megatron"
    assert sorted(p.name for p in megatron.glob("iter_*")) == ["iter_0000003"]
    assert (megatron / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    assert sorted(p.name for p in run.save_dir.glob("hf-*")) == ["hf-0000003"]
    assert (run.save_dir / "hf").resolve() == (run.save_dir / "hf-0000003").resolve()
    # Marked as a rehearsal; nothing left running; the lock is free.
    assert json.loads((run.run_dir / "run.json").read_text())["rehearsal"] is True
    assert (run.save_dir / "REHEARSAL").is_file()
    assert list((run.run_dir / "pids").glob("*.json")) == []
    assert run.lock_holder() is None
    # The simulator's pool was freed before the run's one slime job (ONE_JOB=1, the default) played
    # anything (a killed job, or a reset that failed after pack_api popped a slot, leaves slots taken
    # nobody can name); later rounds play in the same job, and no evaluate stage played.
    freed = {(e["round"], e["stage"]) for e in run.events("shopsim-slots-freed")}
    assert freed == {(0, "train")}, freed
    assert len(run.events("job-submitted")) == 1
    ends = {(e["round"], e["stage"]) for e in run.events() if e["kind"] == "stage-end" and e["status"] == 0}
    assert ends == {(r, s) for r in range(ROUNDS) for s in stages.NAMES} - NOTHING_TO_DO


def test_slimes_own_training_lines_end_every_step_in_the_event_log(reference):
    """The step watcher turns slime's `perf <id>:` line of train_metric_utils.py (each rollout's
    training over) into a train-done event: every step the plugin counted has one, in its round,
    so the last step's training is GPU work in the report's split (run/gpu_time.py)."""
    steps = {(e["round"], e["rollout_id"]) for e in reference.run.events("step-done")}
    trained = {(e["round"], e["rollout_id"]) for e in reference.run.events("train-done")}
    assert steps and trained == steps


def test_a_whole_run_parses_env_defaults_at_most_once(reference):
    """The configuration is resolved once per run start and handed on (issue #26 item 3): bin/train's
    `config export` hands every later process the resolved values through the environment, and the
    declarations through the generated pyhelpers/config/knobs.py (checked against defaults.env's
    digest); no process of the run -- preflight, cleanup, the loop, the stages, the stand-ins --
    parses env/defaults.env again. SHOPSIMRL_PARSE_LOG: tests/fakes/README.md."""
    log = reference.tmp / "defaults-env-parses.log"
    parses = log.read_text().splitlines() if log.exists() else []
    assert len(parses) <= 1, f"{len(parses)} parses of env/defaults.env in one rehearsal: {parses[:12]}"


def test_a_rehearsal_reads_its_configuration_once_and_hands_it_on(reference):
    """Issue 43: every process bin/train started (config export, the preflight, cleanup, init, the
    loop and what it starts) resolved the configuration again from defaults.env and .env. Now
    bin/rehearse's `config export` reads them and hands what they hold to every later process of
    the start, bin/train's included (SHOPSIMRL_CONFIG); what comes before it checks the user's own
    configuration and builds the stand-ins'. One line per configuration a process resolved or was
    handed (SHOPSIMRL_RESOLVE_LOG: tests/fakes/README.md)."""
    lines = [ln.split(" ", 3) for ln in reference.resolutions]
    exports = [i for i, (_, _, _, what) in enumerate(lines) if what == "__main__.py config export"]
    assert exports, reference.resolutions
    again = [f"{how} by {what}" for _, _, how, what in lines[exports[0] + 1:] if how != "handed"]
    handed = {what for _, _, how, what in lines if how == "handed"}
    assert not again, f"{len(again)} resolutions after the start's own:\n" + "\n".join(again)
    assert {"__main__.py run loop", "__main__.py doctor --profile", "__main__.py run init"} <= handed, handed


def test_wandb_offline_runs_hold_the_logged_values(reference):
    run = reference.run
    by_type = _offline_runs(run)
    # slime (the fake's own run, as slime logs it): rollout/shopsim/* per step, as the plugin wrote them.
    trains = by_type["train"]
    assert len(trains) == 1  # one job for the run (ONE_JOB=1, the default)
    logged = {}
    for meta, history, _ in trains:
        assert meta["run_group"] == "rehearsal-rehearsal"  # never the real run's group
        for item in history:
            if "rollout/step" in item:
                logged[int(item["rollout/step"])] = item["rollout/shopsim/success_rate"]
    written = {}
    for r in range(ROUNDS):
        for line in (run.round_dir(r) / "rollout_metrics.jsonl").read_text().splitlines():
            rec = json.loads(line)
            written[rec["rollout_id"]] = rec["metrics"]["rollout/shopsim/success_rate"]
    assert logged == written and len(logged) == ROUNDS * STEPS
    # val and gate: one run each per round, logged once, with the summaries' figures.
    vals = {m["run_id"]: s for m, _, s in by_type["val"]}
    gates = {m["run_id"] for m, _, _ in by_type["gate"]}
    assert set(vals) == {f"rehearsal-rehearsal-val-r{r}" for r in range(ROUNDS)}
    assert gates == {f"rehearsal-rehearsal-gate-r{r}" for r in range(ROUNDS)}
    for r in range(ROUNDS):
        summary = json.loads((run.round_dir(r) / "val" / "summary.json").read_text())
        assert vals[f"rehearsal-rehearsal-val-r{r}"]["val/success_rate"] == summary["success"]["rate"]
    assert {m["run_id"] for m, _, _ in by_type["analyst"]} == {f"rehearsal-analyst-r{r:03d}" for r in range(ROUNDS)}


def test_no_secret_on_any_command_line_or_in_any_file(reference):
    assert reference.cmdline_scans > 20  # the watch really ran during the rehearsal
    assert reference.cmdline_hits == []
    token_file = reference.run.run_dir / "ray" / "auth-token"
    secrets = [*KEYS, token_file.read_text().strip()]  # the run's Ray token: in its own file only
    assert len(secrets[-1]) >= 32
    hits = []
    roots = [reference.run.runs, reference.tmp / "wandb-home", Path(ray_temp_dir(reference.env))]
    for root in roots:
        for p in root.rglob("*"):
            if p.is_file() and not p.is_symlink() and p != token_file:
                data = p.read_bytes()
                hits += [f"{p}: {key[:6]}..." for key in secrets if key.encode() in data]
    assert hits == []
    # The analyst key did its job: the stand-in answers 401 to any other key.
    assert list(reference.run.round_dir(0).glob("candidates/*.json"))


# Who may hold a secret in its environment (architecture §3, pyhelpers/launch/secret_env.py): the
# toolkit's processes that use it -- for W&B's key, with what W&B starts under them (wandb-core,
# wandb-symon); the analyst keeps DashScope's key to itself.
USERS = {"WANDB_API_KEY": ("pyhelpers analyst run", "pyhelpers run log-wandb"),
         "DASHSCOPE_API_KEY": ("pyhelpers analyst run",),
         "the Ray token": ()}  # Ray's processes read it from its 0600 file (RAY_AUTH_TOKEN_PATH)
WITH_CHILDREN = {"WANDB_API_KEY"}


def _uses(name: str, line: list[str]) -> bool:
    """line: a holder's command, then its parent's, …"""
    return any(user in cmd for cmd in (line if name in WITH_CHILDREN else line[:1]) for user in USERS[name])


def test_a_secret_reaches_only_the_processes_that_use_it(reference):
    watch = reference.environ
    assert watch.scans > 20 and len(watch.members) > 15  # the watch saw the rehearsal's processes
    # The analyst (DashScope's user) was seen with its key: the scan finds a holder when there is one.
    assert any("pyhelpers analyst run" in line[0] for line in watch.holders.get("DASHSCOPE_API_KEY", {}).values())
    wrong: dict[str, dict[str, list[int]]] = {}  # secret -> "command <- parent's" -> pids holding it
    for name, held in watch.holders.items():
        for pid, line in sorted(held.items()):
            if not _uses(name, line):
                wrong.setdefault(name, {}).setdefault("  <- ".join(line[:2]), []).append(pid)
    assert wrong == {}, "\n".join(
        f"{name} is in the environment of {sum(map(len, who.values()))} process(es) that do not use it:\n"
        + "\n".join(f"  {cmd}  (pid {', '.join(map(str, pids))})" for cmd, pids in sorted(who.items()))
        for name, who in wrong.items())
    # slime's W&B loggers found the key in the job's 0600 netrc (NETRC, a path in the job's runtime
    # env), which went with the job.
    slime_log = (reference.run.run_dir / "logs" / "slime-log.log").read_text(errors="replace")
    for who in ("train.py", "the RolloutManager"):
        assert f"W&B key of {who}: the netrc file NETRC names" in slime_log, f"{who} found no W&B key in the job's netrc"
    assert not (reference.run.run_dir / "ray" / "job-netrc").exists()


def test_status_plan_and_logs_of_a_finished_rehearsal(reference):
    env = reference.env
    st = in_rehearsal(env, *pyhelpers_cmd("run", "status"))
    assert st.returncode == 0, st.stderr
    assert "run rehearsal (rehearsal)" in st.stdout and "position: finished" in st.stdout
    assert "round 000  val success" in st.stdout and "round 001  val success" in st.stdout
    assert "services: none running or recorded" in st.stdout
    js = json.loads(in_rehearsal(env, *pyhelpers_cmd("run", "status", "--json")).stdout)
    assert js["position"]["stage"] is None and js["tracker"] == 3 and js["hf"] == "hf-0000003"
    plan = in_rehearsal(env, "bin/plan")
    assert plan.returncode == 0 and "resume point: finished, nothing to do" in plan.stdout
    logs = in_rehearsal(env, *pyhelpers_cmd("run", "logs", "--service", "shopsim", "-n", "5"))
    assert logs.returncode == 0 and "shopsim.log" in logs.stdout
    bad = in_rehearsal(env, *pyhelpers_cmd("run", "logs", "--service", "nosuch"))
    assert bad.returncode == 1 and "no log named nosuch.log" in bad.stderr and "choose one of" in bad.stderr
    sync = in_rehearsal(env, *pyhelpers_cmd("run", "wandb-sync", "--dry-run"))
    assert sync.returncode == 0 and "offline W&B run(s) to upload" in sync.stdout
    assert sync.stdout.count("offline-run-") == len(list((reference.run.run_dir / "wandb" / "wandb")
                                                          .glob("offline-run-*")))


def test_a_rehearsal_refuses_a_train_save_with_real_checkpoints(tmp_path, rehearsal_world):
    save = tmp_path / "save"
    real = save / "qwen35-4b-train-100" / "megatron"
    (real / "iter_0000019").mkdir(parents=True)
    (real / "latest_checkpointed_iteration.txt").write_text("19")
    env = rehearse_env(tmp_path, rehearsal_world, TRAIN_SAVE=str(save))
    res = rehearse(env, timeout=300)
    assert res.returncode == 1
    assert "refusing to rehearse in a TRAIN_SAVE that holds real checkpoints: qwen35-4b-train-100" in res.stdout
    assert (real / "latest_checkpointed_iteration.txt").read_text() == "19"
    assert not (tmp_path / "runs" / "rehearsal").exists()


def test_a_rehearsal_says_which_inputs_stand_ins_replace(reference):
    out = reference.result.stdout
    assert "rehearse replaces SEED_BANK, TRAIN_TASKS, VAL_TASKS: stand-in task files" in out
    assert "your inputs: PASS  run-files" in out


def test_a_rehearsal_checks_the_users_seed_bank_and_task_files(tmp_path, rehearsal_world):
    seed = tmp_path / "seed.json"
    seed.write_text('{"schema_version": 1, "round": 0, "skills": [')  # truncated
    tasks = tmp_path / "train.jsonl"
    tasks.write_text('{"task_id": 1}\n')
    env = rehearse_env(tmp_path, rehearsal_world, dotenv={"SEED_BANK": str(seed), "TRAIN_TASKS": str(tasks)})
    res = rehearse(env, timeout=300)
    assert res.returncode == 1, res.stdout[-3000:]
    assert f"{seed}" in res.stdout and "not valid JSON" in res.stdout and "SEED_BANK" in res.stdout
    assert f"{tasks}:1:" in res.stdout
    assert not (tmp_path / "runs" / "rehearsal").exists()  # refused before anything started


def test_a_fresh_rehearsal_refused_by_its_preflight_keeps_the_previous_one(tmp_path, rehearsal_world):
    env = rehearse_env(tmp_path, rehearsal_world, DOCTOR_SKIP="no-such-check")
    run = Run(tmp_path / "runs")
    (run.run_dir / "report").mkdir(parents=True)
    (run.run_dir / "run.json").write_text(json.dumps({"rehearsal": True}))
    (run.run_dir / "report" / "index.html").write_text("the last good rehearsal's report")
    run.save_dir.mkdir(parents=True)
    (run.save_dir / "REHEARSAL").write_text("stand-in checkpoints\n")
    res = rehearse(env, timeout=300)
    assert res.returncode == 1 and "remove no-such-check from DOCTOR_SKIP" in res.stdout, res.stdout[-3000:]
    assert (run.run_dir / "report" / "index.html").read_text() == "the last good rehearsal's report"
    assert (run.save_dir / "REHEARSAL").is_file()


def test_the_final_bank_is_called_the_final_bank_not_a_round_that_never_runs(reference):
    """A bank's `round` is the round it is injected into: the final bank of a 2-round run says 2,
    a round the run never has. Its line must name it as what it is."""
    out = reference.result.stdout
    final = [line for line in out.splitlines() if "skillbank-final.json" in line and "sha256" in line]
    assert final, out[-3000:]
    assert all(f"round {ROUNDS}:" not in line for line in final), final
    assert any(f"final bank (after round {ROUNDS - 1}, the last)" in line for line in final), final


PORT_KNOBS = ("SHOPSIM_PORT", "EVAL_PORT", "RAY_PORT", "RAY_DASHBOARD_PORT")


def test_a_rehearsal_takes_the_ports_in_env_and_names_each_setting_it_replaces(tmp_path, rehearsal_world):
    """Two clones with their own ports in .env must not collide, and the preflight's "set
    SHOPSIM_PORT to a free port" must work when followed in .env (issue 27, item 1)."""
    import subprocess

    from conftest import ROOT
    from support.rehearsal import own_ports

    ports = own_ports()
    env = rehearse_env(tmp_path, rehearsal_world, tracked=False,
                       dotenv={**ports, "ROUNDS": "7", "MAX_TURNS": "9"})
    for knob in PORT_KNOBS:
        env.pop(knob)  # in .env only, as a user writes them
    shown = in_rehearsal(env, *pyhelpers_cmd("config", "show", "--json"))
    assert shown.returncode == 0, shown.stderr
    values = json.loads(shown.stdout)["values"]
    assert {k: values[k] for k in PORT_KNOBS} == ports
    assert (values["ROUNDS"], values["MAX_TURNS"]) == ("2", "8")  # shrunk, and said so:
    explain = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "tests" / "fakes" / "rehearsal.py"),
                              "env", "--explain"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert explain.returncode == 0, explain.stderr
    replaced = [line for line in explain.stderr.splitlines() if "replaces your" in line]
    assert any("ROUNDS=7 with 2" in line and "MAX_TURNS=9 with 8" in line for line in replaced), explain.stderr
    assert not any(knob in line for knob in PORT_KNOBS for line in replaced), explain.stderr
    assert f"SHOPSIM_PORT={ports['SHOPSIM_PORT']}" in explain.stderr  # the ports it keeps are named too


def test_bad_env_values_fail_make_rehearse_and_make_doctor_profile_rehearse_as_they_fail_make_check(
        tmp_path, rehearsal_world):
    """ROUNDS and DISK_MARGIN_GB are knobs the rehearsal shrinks: their .env values must still be
    checked, with make check's own words, before anything starts (issue 27, item 1)."""
    import subprocess

    from conftest import ROOT

    env = rehearse_env(tmp_path, rehearsal_world, tracked=False, dotenv={"ROUNDS": "2.5", "DISK_MARGIN_GB": "-1"})

    def make(*args):
        return subprocess.run(["make", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)

    check = make("check")
    assert check.returncode != 0
    wanted = [line for line in check.stderr.splitlines() if line.startswith(("error: ROUNDS=", "error: DISK_MARGIN_GB="))]
    assert len(wanted) == 2, check.stderr
    for args in (("rehearse",), ("doctor", "PROFILE=rehearse")):
        res = make(*args)
        assert res.returncode != 0, (args, res.stdout[-3000:], res.stderr[-3000:])
        for line in wanted:
            assert line in res.stderr, (args, line, res.stderr[-3000:])
    assert not (tmp_path / "runs" / "rehearsal").exists()  # refused before anything started
    assert not (tmp_path / "runs" / ".rehearsal" / "analyst.port").exists()


# --- A finished or resumed rehearsal: what it says at its end and afterwards (issue 40) --------

def test_a_finished_rehearsal_ends_naming_its_report_and_status(reference):
    """It ended with "run rehearsal: finished" and no next step (the interrupted one names status
    and resume): its last line names the rehearsal's own report and status commands."""
    last = reference.result.stdout.rstrip().splitlines()[-1]
    assert "train    run rehearsal: finished" in last, last
    assert "make report REHEARSAL=1" in last and "make status REHEARSAL=1" in last, last
    assert str(reference.run.run_dir / "report" / "index.html") in last, last


def test_make_plan_of_a_finished_rehearsal_says_it_is_finished_with_its_own_commands(reference):
    plan = in_rehearsal(reference.env, "bin/plan")
    assert plan.returncode == 0, plan.stderr
    head = plan.stdout.splitlines()[0]
    assert "continues" not in head and "make resume" not in plan.stdout and "make train" not in plan.stdout, head
    assert head.startswith("run rehearsal: finished") and "make report REHEARSAL=1" in head, head
    assert "stages:" not in plan.stdout  # nothing under it: no heading either


def test_make_plan_of_a_stopped_rehearsal_names_the_rehearsals_resume(toolkit_env, tmp_path):
    """A rehearsal that continues is continued with `make rehearse RESUME=1`; `make rehearse`
    starts a new one (the plan said "make resume / make train", the real run's commands)."""
    from pyhelpers.config.load import load
    from pyhelpers.overview.plan import plan
    from pyhelpers.run.layout import from_config

    cfg = load()
    lay = from_config(cfg)
    lay.run_dir.mkdir(parents=True)
    lay.manifest.write_text(json.dumps({"rehearsal": True}))
    head = plan(cfg, lay)[0]
    assert "make rehearse RESUME=1" in head and "make train" not in head and "make resume" not in head, head
    lay.manifest.write_text(json.dumps({"rehearsal": False}))
    assert "continues (make resume / make train)" in plan(cfg, lay)[0]


def test_the_rehearsals_cleanup_stops_ray_without_killing_it(reference):
    """Ray's head was TERMed as a whole group: `ray start` then drains through a GCS that got the
    same TERM, hangs, and was killed after STOP_GRACE on every run. Stopped the way Ray stops
    (its `ray start` first, which ends the raylet, the GCS and the rest in order), nothing is killed."""
    cleanup = [line for line in reference.result.stdout.splitlines() if " cleanup  " in line]
    ray = [line for line in cleanup if "ray-head: pid " in line]
    assert ray and all(": stopped (exited " in line for line in ray), cleanup
    assert not [line for line in cleanup if "killed" in line], cleanup


def test_the_rehearsals_report_has_headers_for_empty_tables_and_says_it_ran_on_stand_ins(reference):
    from pyhelpers.report.data import COLUMNS

    report = reference.run.run_dir / "report"
    assert (report / "restarts.csv").read_text().splitlines() == ["at,t,kind,round,stage,cause,detail"]
    for name, columns in COLUMNS.items():  # the declared columns are the rows' own (train: + train/*)
        header = tuple((report / f"{name}.csv").read_text().splitlines()[0].split(","))
        assert header[:len(columns)] == columns and (name == "train" or header == columns), (name, header)
    page = (report / "index.html").read_text()
    assert "GPU(s)" not in page.split("<h2>", 1)[0], page[:600]  # a CPU rehearsal has no GPUs to name
    assert "rehearsal" in page.split("<h2>", 1)[0] and "stand-ins" in page.split("<h2>", 1)[0], page[:600]


def test_the_run_records_the_time_of_its_end_of_run_work(reference):
    """The ETA counts the W&B logging and the report after the last step (pyhelpers/stages/progress.py):
    the run records each one's time (a round's background ones, and the run's own at its end)."""
    evs = reference.run.events()
    for kind in ("wandb-logged", "report-written"):
        timed = [e for e in evs if e["kind"] == kind]
        assert timed and all(e["seconds"] >= 0 for e in timed), kind


STAMPED = r"^\d\d:\d\d:\d\d train    "  # bin/lib.sh `log`, pyhelpers/loop/console.py stamp()


def test_a_resumed_runs_first_lines_carry_the_time_and_the_service(toolkit_env):
    """`make rehearse RESUME=1` printed "resuming rehearsal: round 0 at train" without the time and
    service every other line has; so did "continuing run ..., stopped by `make stop`"."""
    import re

    from conftest import run_pyhelpers

    assert run_pyhelpers(["run", "init"], toolkit_env).returncode == 0
    res = run_pyhelpers(["run", "check-resume"], toolkit_env)
    assert res.returncode == 0, res.stderr
    assert re.search(STAMPED + r"resuming qwen35-4b-train-100: round 0 at train \(", res.stderr, re.M), res.stderr
    stopped = Path(toolkit_env["RUNS_DIR"]) / "qwen35-4b-train-100" / "stopped"
    stopped.write_text("stopped by `make stop` at some time\n")
    res = run_pyhelpers(["run", "init", "--resume", "--continue-stopped", str(stopped.stat().st_mtime + 1)], toolkit_env)
    assert res.returncode == 0, res.stderr
    assert re.search(STAMPED + "continuing run qwen35-4b-train-100, stopped by `make stop`", res.stderr, re.M), res.stderr


def test_the_users_inputs_line_speaks_of_their_seed_bank_not_of_a_new_run(toolkit_env):
    """Before the stand-ins, `make rehearse` (and RESUME=1) checks the user's own SEED_BANK as the real
    run's round 0 will read it; the line said "nothing of the run to read yet (a new run, ...)",
    wrong on a resume, and about which run?"""
    from conftest import run_pyhelpers

    res = run_pyhelpers(["run", "rehearsal-inputs"], toolkit_env)
    assert res.returncode == 0, res.stderr
    [line] = [ln for ln in res.stderr.splitlines() if "your inputs: PASS  run-files" in ln]
    assert "new run" not in line and "nothing of the run" not in line, line
    assert "SEED_BANK is empty: round 0 starts with an empty bank" in line, line


def test_the_rehearsals_ray_starts_no_worker_that_no_job_asked_for(reference):
    """Ray 2.60 prestarts one idle Python worker per CPU it declares when its first driver (the
    dashboard agent's job manager) registers; the stand-in job's actors never use them (each job
    starts its own), so on a 2-core test machine each rehearsal paid two workers' start and life
    for nothing. The rehearsal turns that prestart off (tests/fakes/README.md, "The rehearsal's Ray"): every
    worker Ray starts is one a job asked for. Ray names a worker's log by its job, ffffffff for none."""
    sessions = sorted(Path(ray_temp_dir(reference.env)).glob("session_2*"))
    workers = [p.name for s in sessions for p in (s / "logs").glob("worker-*.out")]
    assert sessions and workers, (ray_temp_dir(reference.env), sessions)
    assert not [w for w in workers if w.split("-")[2] == "ffffffff"], workers
