"""Configuration: precedence, expansion, validation messages, secrets."""

from __future__ import annotations

import json
import shlex

from click.testing import CliRunner
from conftest import ROOT, run_pyhelpers

from pyhelpers.cli import main
from pyhelpers.config import declarations, handed, load


def test_every_knob_has_a_doc_and_a_section():
    for knob in declarations.read_knobs().values():
        assert knob.doc, f"{knob.name} has no comment above it in env/defaults.env"
        assert knob.section, knob.name


def test_precedence_environment_over_dotenv_over_defaults(toolkit_env, tmp_path):
    (tmp_path / ".env").write_text("NUM_GPUS=2\nTP_SIZE=1\nMODELS_DIR=/data/m\n")
    cfg = load.load({**toolkit_env, "NUM_GPUS": "1"})
    assert cfg["NUM_GPUS"] == "1" and cfg.sources["NUM_GPUS"] == "environment"
    assert cfg["TP_SIZE"] == "1" and cfg.sources["TP_SIZE"].endswith(".env")
    assert cfg["ROUNDS"] == "5" and cfg.sources["ROUNDS"] == "env/defaults.env"
    # ${MODELS_DIR} in the default of HF_MODEL follows the .env override.
    assert cfg["HF_MODEL"] == "/data/m/Qwen3.5-4B"


def test_derived_values(toolkit_env):
    cfg = load.load({**toolkit_env, "NUM_GPUS": "3"})
    assert cfg.cuda_visible_devices == "0,1,2"
    assert cfg.run_name == "qwen35-4b-train-100"
    assert len(cfg.ray_temp_dir) <= 40 and cfg.ray_temp_dir.startswith("/tmp/ray-")


def test_check_passes_on_defaults(toolkit_env):
    r = run_pyhelpers(["config", "check"], toolkit_env)
    assert r.returncode == 0, r.stderr
    assert "config ok" in r.stdout


def test_gpus_not_divisible_by_tp_names_both_and_the_fix(toolkit_env):
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "NUM_GPUS": "3", "TP_SIZE": "2"})
    assert r.returncode == 1
    assert "NUM_GPUS=3 is not divisible by TP_SIZE=2" in r.stderr
    assert "use TP_SIZE=1 or 2" in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_integer_is_named(toolkit_env):
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "ROUNDS": "five"})
    assert r.returncode == 1
    assert "ROUNDS='five' is not a whole number" in r.stderr and "ROUNDS=5" in r.stderr


def test_train_save_on_system_disk_is_refused(toolkit_env, tmp_path):
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "SYSTEM_DISK": "/", "TRAIN_SAVE": str(tmp_path / "x")})
    assert r.returncode == 1
    assert "TRAIN_SAVE=" in r.stderr and "is on the system disk" in r.stderr and "M2" in r.stderr


def test_train_save_on_system_disk_names_the_knob_to_change_and_the_rehearsal(toolkit_env, tmp_path):
    """A fresh machine's first `make train` stops here: TRAIN_SAVE's default follows DATA_DISK, so
    that is the knob to set, and a machine without a data disk or GPUs can still rehearse."""
    env = {k: v for k, v in toolkit_env.items() if k != "TRAIN_SAVE"}
    r = run_pyhelpers(["config", "check"], {**env, "SYSTEM_DISK": "/", "DATA_DISK": str(tmp_path / "data")})
    assert r.returncode == 1
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("error: TRAIN_SAVE="))
    assert "set DATA_DISK to where the data disk is mounted" in line and "`make rehearse`" in line, line
    explicit = run_pyhelpers(["config", "check"], {**toolkit_env, "SYSTEM_DISK": "/", "TRAIN_SAVE": str(tmp_path / "x")})
    line = next(ln for ln in explicit.stderr.splitlines() if ln.startswith("error: TRAIN_SAVE="))
    assert "set TRAIN_SAVE to a directory on the data disk" in line and "DATA_DISK to" not in line, line


def test_batch_and_length_rules(toolkit_env):
    env = {**toolkit_env, "GLOBAL_BATCH_SIZE": "48", "OVER_SAMPLING_GROUPS": "8", "SHOPSIM_SLOTS": "16",
           "ROLLOUT_MAX_RESPONSE_LEN": "30000", "RAY_TEMP_DIR": "/tmp/" + "x" * 60}
    r = run_pyhelpers(["config", "check"], env)
    assert r.returncode == 1
    for needle in ("GLOBAL_BATCH_SIZE=48", "OVER_SAMPLING_GROUPS=8 is below ROLLOUT_GROUPS=16",
                   "SHOPSIM_SLOTS=16 is below SHOPSIM_EPISODE_CONCURRENCY=32",
                   "ROLLOUT_MAX_RESPONSE_LEN=30000 must be below", "107-byte limit"):
        assert needle in r.stderr, needle


def test_ray_takes_ray_port_and_the_ports_above_it(toolkit_env):
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "RAY_PORT": "26380", "EVAL_PORT": "26385"})
    assert r.returncode == 1 and "EVAL_PORT and RAY_PORT+5 are all 26385" in r.stderr
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "RAY_PORT": "65530"})
    assert r.returncode == 1 and "RAY_PORT=65530" in r.stderr and "65526" in r.stderr
    # Workers take kernel-chosen ports now: Ray's old worker range is no reason to refuse a port.
    assert run_pyhelpers(["config", "check"], {**toolkit_env, "RAY_PORT": "16380"}).returncode == 0


def test_typo_in_dotenv_is_refused_with_suggestion(toolkit_env, tmp_path):
    """ROUDNS=3 would leave ROUNDS at its default: the run trains 5 rounds. A name a typo away
    from a knob is refused before anything starts, naming the knob meant."""
    (tmp_path / ".env").write_text("NUM_GPU=2\nROUDNS=3\n")
    r = run_pyhelpers(["config", "check"], toolkit_env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "config ok" not in r.stdout
    assert "error: NUM_GPU in" in r.stderr and "did you mean NUM_GPUS?" in r.stderr
    assert "error: ROUDNS in" in r.stderr and "did you mean ROUNDS?" in r.stderr
    assert "EXTRA_VARS" in r.stderr  # the way to keep a deliberate one


def test_a_deliberate_extra_variable_is_declared_in_extra_vars(toolkit_env, tmp_path):
    """A variable of the user's own whose name happens to be near a knob's passes once listed in
    EXTRA_VARS; one far from every knob (a proxy) needs nothing."""
    (tmp_path / ".env").write_text("ROUDNS=3\nHTTPS_PROXY=http://127.0.0.1:3128\nEXTRA_VARS=ROUDNS\n")
    r = run_pyhelpers(["config", "check"], toolkit_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ROUDNS" not in r.stderr and "HTTPS_PROXY" not in r.stderr
    (tmp_path / ".env").write_text("EXTRA_VARS=ROUDNS,NOT_IN_ENV\n")  # a listed name that is absent: harmless
    assert run_pyhelpers(["config", "check"], toolkit_env).returncode == 0


def test_runs_dir_that_cannot_be_created_or_written_is_one_line(toolkit_env, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for bad in (a_file, a_file / "runs", "/proc/shopsimrl-runs"):
        r = run_pyhelpers(["config", "check"], {**toolkit_env, "RUNS_DIR": str(bad)})
        assert r.returncode == 1, (bad, r.stdout + r.stderr)
        assert "Traceback" not in r.stderr
        line = [ln for ln in r.stderr.splitlines() if ln.startswith("error: RUNS_DIR=")]
        assert len(line) == 1 and "set RUNS_DIR to" in line[0], (bad, r.stderr)
    assert not (tmp_path / "runs").exists()  # the check creates nothing


def test_run_commands_name_a_runs_dir_that_is_a_file_in_one_line(toolkit_env, tmp_path):
    """make status / logs / stop read under RUNS_DIR without `make check` first: a file there gave
    a NotADirectoryError traceback."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for cmd in (["run", "status"], ["run", "logs"], ["run", "stop"]):
        r = run_pyhelpers(cmd, {**toolkit_env, "RUNS_DIR": str(a_file)})
        assert r.returncode == 1 and "Traceback" not in r.stderr, (cmd, r.stdout + r.stderr)
        assert f"RUNS_DIR={str(a_file)!r} is a file (set RUNS_DIR to a directory" in r.stderr, (cmd, r.stderr)


def test_a_non_loopback_shopsim_host_is_refused_unless_exposed_on_purpose(toolkit_env):
    for host in ("0.0.0.0", "10.0.0.5", "::"):
        r = run_pyhelpers(["config", "check"], {**toolkit_env, "SHOPSIM_HOST": host})
        assert r.returncode == 1, (host, r.stdout + r.stderr)
        assert f"SHOPSIM_HOST={host!r}" in r.stderr and "SHOPSIM_EXPOSE_TO_NETWORK=1" in r.stderr, r.stderr
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert run_pyhelpers(["config", "check"], {**toolkit_env, "SHOPSIM_HOST": host}).returncode == 0, host
    exposed = run_pyhelpers(["config", "check"], {**toolkit_env, "SHOPSIM_HOST": "0.0.0.0",
                                                  "SHOPSIM_EXPOSE_TO_NETWORK": "1"})
    assert exposed.returncode == 0, exposed.stderr


def test_secrets_are_masked_and_left_out_of_export(toolkit_env, tmp_path):
    (tmp_path / ".env").write_text("WANDB_API_KEY=wk-SECRET-123\nMY_TOKEN=tok-SECRET-456\nSECRET_VARS=ODD\nODD=odd-SECRET\n")
    runner = CliRunner()
    shown = runner.invoke(main, ["config", "show"])
    assert shown.exit_code == 0, shown.output
    shown_json = runner.invoke(main, ["config", "show", "--json"])
    exported = runner.invoke(main, ["config", "export"])
    for out in (shown.output, shown_json.output, exported.output):
        for value in ("wk-SECRET-123", "tok-SECRET-456", "odd-SECRET"):
            assert value not in out
    assert json.loads(shown_json.output)["values"]["WANDB_API_KEY"] == "***"
    with_secrets = runner.invoke(main, ["config", "export", "--with-secrets"])
    assert "export WANDB_API_KEY=wk-SECRET-123" in with_secrets.output


def test_export_gives_bash_only_what_bash_reads(toolkit_env, tmp_path):
    """A knob on the way to the slime command line is no variable of bash's: it reaches the Python
    that builds the command line (`run loop`) in what `config export` read from the files once and
    hands on (SHOPSIMRL_CONFIG), which no process reads again."""
    (tmp_path / ".env").write_text("ROLLOUT_MAX_CONTEXT_LEN=12345\nHTTPS_PROXY=http://127.0.0.1:3128\n")
    out = CliRunner().invoke(main, ["config", "export"])
    assert out.exit_code == 0, out.output
    exported = dict(line.removeprefix("export ").split("=", 1) for line in out.output.splitlines())
    assert "ROLLOUT_MAX_CONTEXT_LEN" not in exported and "TP_SIZE" not in exported
    for kept in ("RUN_DIR", "SAVE_DIR", "WANDB_DIR", "MODEL_ARGS_SCRIPT", "CONDA_ROOT", "HTTPS_PROXY"):
        assert kept in exported, kept
    files = json.loads(shlex.split(exported[handed.HANDED_VAR])[0])
    assert files["layered"]["ROLLOUT_MAX_CONTEXT_LEN"] == "12345" and files["layered"]["TP_SIZE"] == "2"
    cfg = load.load()
    env = cfg.process_env()  # what `run loop` hands its children: every value, as bash's export did
    assert env["ROLLOUT_MAX_CONTEXT_LEN"] == "12345" and env["RUN_DIR"] == str(cfg.run_dir)


def test_export_is_evaluable_by_bash(toolkit_env):
    import subprocess

    env = {**toolkit_env, "SGLANG_LAUNCHER": "python3 -m sglang.launch_server --x 'a b'"}
    script = f'eval "$({ROOT}/.venv/bin/python -m pyhelpers config export)"; printf "%s|%s" "$SGLANG_LAUNCHER" "$RUN_DIR"'
    r = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=True)
    launcher, run_dir = r.stdout.split("|")
    assert launcher == "python3 -m sglang.launch_server --x 'a b'"
    assert run_dir.endswith("/runs/qwen35-4b-train-100")


def test_readme_knob_table_matches_defaults():
    runner = CliRunner()
    table = runner.invoke(main, ["config", "docs"]).output.strip()
    readme = (ROOT / "README.md").read_text()
    start, end = "<!-- knobs:start -->", "<!-- knobs:end -->"
    assert start in readme and end in readme, "README.md lacks the knob markers"
    committed = readme.split(start, 1)[1].split(end, 1)[0].strip()
    assert committed == table, "README knob table is stale: run `make readme-knobs`"
    assert "| `STOP_GRACE` | `20` | `float >= 0` |" in committed  # each knob's type and range


def test_a_malformed_dotenv_line_is_an_error_naming_the_file_and_line(toolkit_env, tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text('NUM_GPUS=2\nTP_SIZE=1\nDASHSCOPE_API_KEY="sk-SECRET-unterminated\nROUNDS=3\n')
    r = run_pyhelpers(["config", "check"], toolkit_env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{env_file}:3:" in r.stderr and "DASHSCOPE_API_KEY" in r.stderr
    assert "sk-SECRET" not in r.stderr + r.stdout
    assert "python-dotenv could not parse" not in r.stderr  # the library's warning names no file


def test_a_lowercase_knob_in_dotenv_is_refused_like_a_typo(toolkit_env, tmp_path):
    (tmp_path / ".env").write_text("num_gpus=2\nTP_SZIE=1\n")
    r = run_pyhelpers(["config", "check"], toolkit_env)
    assert r.returncode == 1, r.stderr
    assert "num_gpus" in r.stderr and "did you mean NUM_GPUS?" in r.stderr
    assert "did you mean TP_SIZE?" in r.stderr


def test_a_typo_on_the_make_command_line_is_refused_too(toolkit_env):
    """`make train ROUDNS=3` (the README's `make KNOB=value`) passed ROUDNS to nobody; the
    Makefile's own variables (ROUND, SERVICE, PROFILE...) are not typos."""
    import subprocess

    env = {k: v for k, v in toolkit_env.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    typo = subprocess.run(["make", "check", "ROUDNS=3"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert typo.returncode != 0, typo.stdout + typo.stderr
    assert "error: ROUDNS on the make command line is not a knob; did you mean ROUNDS?" in typo.stderr, typo.stderr
    for fine in ("ROUNDS=3", "ROUND=1", "SERVICE=slime", "PROFILE=rehearse", "ROUDNS=3 EXTRA_VARS=ROUDNS"):
        r = subprocess.run(["make", "check", *fine.split()], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and "config ok" in r.stdout, (fine, r.stderr)


def test_a_configuration_handed_on_is_what_a_resolution_gives_without_a_secret(toolkit_env, tmp_path, monkeypatch):
    """`config export` reads env/defaults.env and .env once per start and hands what they hold on
    (SHOPSIMRL_CONFIG, issue 43): a process given it reads no file but .env for a secret, and gets
    the values, sources and secrets a reading of its own would give, its own environment applied
    (the analyst model's address a rehearsal exports later, a knob a service's env drops). The
    handed text holds no secret."""
    import os

    (tmp_path / ".env").write_text("WANDB_API_KEY=wk-SECRET-123\nROUNDS=7\nHTTPS_PROXY=http://127.0.0.1:3128\n"
                                   "NOTE=${WANDB_API_KEY}\n")
    cfg, text = load.start()
    assert "wk-SECRET-123" not in text and cfg.ROUNDS == 7
    monkeypatch.setattr(handed, "read_files", lambda *a: (_ for _ in ()).throw(AssertionError("read the files again")))
    for environ in ({**os.environ}, {**os.environ, "ROUNDS": "9", "ANALYST_BASE_URL": "http://127.0.0.1:9/v1"},
                    {**os.environ, "WANDB_API_KEY": "wk-other"}, {k: v for k, v in os.environ.items() if k != "RUNS_DIR"}):
        got = load.load({**environ, handed.HANDED_VAR: text})
        monkeypatch.undo()
        want = load.load(environ)
        monkeypatch.setattr(handed, "read_files", lambda *a: (_ for _ in ()).throw(AssertionError("read the files again")))
        assert (got.values, got.sources, got.undeclared, got.env_file, got.make_vars) == (
            want.values, want.sources, want.undeclared, want.env_file, want.make_vars)
    assert got.WANDB_API_KEY == "wk-SECRET-123" and got.public()["WANDB_API_KEY"] == "***"
