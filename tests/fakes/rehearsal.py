#!/usr/bin/env python3
"""The rehearsal's world and configuration: `make rehearse` runs the real toolkit on stand-ins.

    eval "$(.venv/bin/python tests/fakes/rehearsal.py env)"

builds (once; rebuilt when this file or a fixture changes) a world of stand-ins under
RUNS_DIR/.rehearsal/world and prints the `export` lines that point the toolkit at it:

- a conda stand-in root (etc/profile.d/conda.sh of tests/fakes/conda) whose `slime` env runs the
  toolkit's own python and ray (they have what the stand-ins import), with the project's cuDNN
  activate.d hook installed as `make install-hooks` would, and a `shopsim` env;
- the fake slime checkout (tests/fakes/slime_stub: train.py, tools/, scripts/models/) as SLIME_DIR;
- the pack_api stand-in as SHOPSIM_DIR, so the project's own ShopSimulator launcher starts it;
- a base model: the test tokenizer + config + fake weights + fake_policy.json (HF_MODEL) and its
  torch_dist "release" (TORCH_DIST_MODEL); task files made by `pyhelpers data build`;
- the fake SGLang server as SGLANG_LAUNCHER.

Knobs fall in three classes. Stand-ins (programs, models, data) are always overridden: a rehearsal
never touches the real stack. Scale (ROUNDS, batch sizes, RUN_NAME, TRAIN_SAVE, timeouts ...) gets
small rehearsal values unless given on the command line / in the environment, so `make rehearse
ROUNDS=3` works. Ports are the user's: those set in .env (or on the command line) are kept, so two
clones with their own ports in .env rehearse side by side and a preflight's "set SHOPSIM_PORT to a
free port" works when followed in .env; only ports left at their defaults get the rehearsal's own
(not the real run's, which may be running). The rest of the user's .env applies as in a real run,
and `make rehearse` names each .env value it replaced (explain()). The user's own values are
checked first, as `make check` checks them (bin/lib.sh check_your_config), even those replaced
here. Keys: the user's .env keys are used when present (they only reach local stand-ins: W&B runs
offline, the analyst model is the fake on loopback); otherwise obvious fake keys are exported.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

FAKES = Path(__file__).resolve().parent
ROOT = FAKES.parents[1]
sys.path[:0] = [str(FAKES), str(ROOT / "tests"), str(ROOT)]

WORLD_VERSION = 3  # bump when the world's layout changes
N_TASKS, N_VAL = 48, 24
BASE_SUCCESS = 0.45
# Every skill the fake analyst derives says this; showing one lifts success (a planted effect the
# gate can find). The fake analyst: tests/fakes/openai_server.py derived_proposals().
PLANTED_TEXT, PLANTED_DELTA = "Check every required option before buying", 0.2
SKILL_MARKER = r"\[(sk-[0-9a-f]{12})\]"
FAKE_KEYS = {"WANDB_API_KEY": "rehearsal-fake-wandb-key", "DASHSCOPE_API_KEY": "rehearsal-fake-dashscope-key"}

# Scale and place: rehearsal values unless set in the environment.
SCALE = {
    "RUN_NAME": "rehearsal", "ROUNDS": "2", "STEPS_PER_ROUND": "2",
    "OVER_SAMPLING_GROUPS": "4", "ROLLOUT_GROUPS": "4", "SAMPLES_PER_GROUP": "4", "GLOBAL_BATCH_SIZE": "8",
    "MAX_TURNS": "8", "ROLLOUT_MAX_CONTEXT_LEN": "32000", "ROLLOUT_MAX_RESPONSE_LEN": "256",
    "SKILL_TOKEN_BUDGET": "512", "SHOPSIM_SLOTS": "48", "SHOPSIM_EPISODE_CONCURRENCY": "16",
    "EVAL_CONCURRENCY": "16", "GATE_PAIRS": "12", "GATE_ARM_EPISODES": "4", "GATE_MAX_SKILLS": "4",
    "SHOPSIM_START_TIMEOUT": "60", "SGLANG_START_TIMEOUT": "60", "JOB_START_TIMEOUT": "180",
    "SHOPSIM_RESET_RETRIES": "3", "SHOPSIM_RESET_DELAY": "0.2", "STOP_GRACE": "3", "READY_BACKOFF_MAX": "0.5",
    # One record per analyst request: batches then do not depend on when the analyst polls, so a
    # killed and resumed rehearsal yields the same candidates as an uninterrupted one.
    "ANALYST_BATCH_SIZE": "1", "ANALYST_MAX_RPM": "100000", "ANALYST_POLL_INTERVAL": "0.2",
    "ANALYST_DRAIN_TIMEOUT": "60", "ANALYST_TIMEOUT": "10", "ANALYST_MAX_CALLS": "400", "DISK_MARGIN_GB": "1",
    "WANDB_MODE": "offline", "BASELINE_VAL": "0",
}
# Ports: the user's when set in .env or the environment; else these, not the real run's defaults
# (a real run may be using those). RAY_PORT takes the nine ports above it too.
PORTS = {"SHOPSIM_PORT": "25700", "EVAL_PORT": "31000", "RAY_PORT": "26380", "RAY_DASHBOARD_PORT": "28265"}
DEFAULTS = "env/defaults.env"  # Config.sources' name for a knob nobody set


def _stamp() -> str:
    h = hashlib.sha256(str(WORLD_VERSION).encode())
    for f in (Path(__file__), FAKES / "shop_fixture.py", FAKES / "megatron_layout.py", ROOT / "tests" /
              "support" / "tokenizer.py", ROOT / "env" / "activate.d" / "cudnn_ldpath.sh"):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n# Rehearsal conda stand-in (tests/fakes/rehearsal.py).\n" + body + "\n")
    path.chmod(0o755)


def _conda(root: Path) -> None:
    (root / "etc" / "profile.d").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FAKES / "conda" / "etc" / "profile.d" / "conda.sh", root / "etc" / "profile.d" / "conda.sh")
    for env in ("slime", "shopsim"):
        (root / "envs" / env / "conda-meta").mkdir(parents=True, exist_ok=True)
        (root / "envs" / env / "conda-meta" / "history").write_text("# rehearsal stand-in env\n")
        for name in ("python3", "python"):
            _script(root / "envs" / env / "bin" / name,
                    'exec "${SHOPSIMRL_FAKE_PYTHON:?set by bin/rehearse}" "$@"')
    _script(root / "envs" / "slime" / "bin" / "ray", 'exec "$(dirname "${SHOPSIMRL_FAKE_PYTHON:?}")/ray" "$@"')
    for kind in ("activate.d", "deactivate.d"):
        hook = root / "envs" / "slime" / "etc" / "conda" / kind
        hook.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "env" / kind / "cudnn_ldpath.sh", hook / "cudnn_ldpath.sh")


def _models(models: Path, fixture: dict) -> None:
    from megatron_layout import write_hf_base, write_release
    from support.tokenizer import CONFIG, build_tokenizer

    origin = build_tokenizer(models / "tokenizer")
    # Qwen3.5-4B's config as slime's job accepts it with the stand-in model flags (make doctor's
    # model-config check compares them as slime does).
    (origin / "config.json").write_text(json.dumps({**CONFIG, "fake": True}) + "\n")
    policy = json.loads(Path(fixture["policy"]).read_text(encoding="utf-8"))
    policy.update(marker_regex=SKILL_MARKER, base_success=BASE_SUCCESS,
                  effects=[{"text": PLANTED_TEXT, "delta": PLANTED_DELTA}])
    (origin / "fake_policy.json").write_text(json.dumps(policy, ensure_ascii=False, indent=1), encoding="utf-8")
    write_hf_base(models / "Qwen3.5-4B", origin)  # language + visual weights, as Qwen3.5-4B's index lists them
    shutil.rmtree(origin)
    write_release(models / "Qwen3.5-4B_torch_dist")


def build(world: Path) -> Path:
    """Build the world into `world` (atomically: a temp dir renamed into place), under a lock:
    two rehearsals starting at once (two test workers) must not build it twice, nor replace it
    under each other."""
    world.parent.mkdir(parents=True, exist_ok=True)
    with open(world.parent / f".{world.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(world)


def _build(world: Path) -> Path:
    from shop_fixture import write_shop_fixture

    stamp = world / ".stamp"
    if stamp.is_file() and stamp.read_text().strip() == _stamp():
        return world
    tmp = world.with_name(world.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    fx = write_shop_fixture(tmp / "shop", n_tasks=N_TASKS, n_eval=N_VAL, seed=3)
    _models(tmp / "models", fx)
    subprocess.run([sys.executable, "-m", "pyhelpers", "data", "build", "--source", str(fx["eval_file"]),
                    "--source", str(fx["train_file"]), "--server-file", str(fx["server_file"]),
                    "--out-dir", str(tmp / "data")], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    _conda(tmp / "conda")
    (tmp / "Megatron-LM").mkdir()
    (tmp / ".stamp").write_text(_stamp() + "\n")
    shutil.rmtree(world, ignore_errors=True)
    world.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(world)
    return world


def exports(environ: dict[str, str]) -> dict[str, str]:
    """The rehearsal's environment: stand-ins always, scale unless given, fake keys if none."""
    from pyhelpers.config import load

    runs = load.load(environ).path("RUNS_DIR")
    base = runs / ".rehearsal"
    # Tests share one world between their rehearsals (it is read-only once built).
    world = build(Path(environ.get("SHOPSIMRL_REHEARSAL_WORLD") or base / "world"))
    slime = FAKES / "slime_stub"
    venv_py = Path(sys.executable)
    out = {
        "DOCTOR_PROFILE": "rehearse",
        "SHOPSIMRL_FAKE_PYTHON": str(venv_py),
        "CONDA_ROOT": str(world / "conda"), "SLIME_ENV": "slime", "SHOPSIM_ENV": "shopsim",
        "SLIME_DIR": str(slime), "MEGATRON_DIR": str(world / "Megatron-LM"),
        "SHOPSIM_DIR": str(FAKES / "shopsim_checkout"), "SHOPSIM_LAUNCHER": "", "SHOPSIM_HOST": "127.0.0.1",
        "MODEL_ARGS_SCRIPT": str(slime / "scripts" / "models" / "qwen3.5-4B.sh"),
        "SLIME_TRAIN": str(slime / "train.py"),
        "CONVERT_TO_HF": str(slime / "tools" / "convert_torch_dist_to_hf.py"),
        "CONVERT_TO_TORCH_DIST": str(slime / "tools" / "convert_hf_to_torch_dist.py"),
        "SGLANG_LAUNCHER": f"{shlex.quote(str(venv_py))} {shlex.quote(str(FAKES / 'fake_sglang.py'))}",
        "MODELS_DIR": str(world / "models"), "HF_MODEL": str(world / "models" / "Qwen3.5-4B"),
        "TORCH_DIST_MODEL": str(world / "models" / "Qwen3.5-4B_torch_dist"),
        "DATA_DIR": str(world / "data"), "TRAIN_TASKS": str(world / "data" / "train.jsonl"),
        "VAL_TASKS": str(world / "data" / "val.jsonl"), "SEED_BANK": "",
        "FAKE_SHOPSIM_DIR": str(FAKES), "FAKE_SHOPSIM_TASKS": str(world / "shop" / "items_eval_train.json"),
        "FAKE_PACK_API_RECORD": str(base / "pack_api.json"),
        "REHEARSAL_DIR": str(base),
        # A rehearsal is reproducible: the same bank after kills and resumes as without them
        # (the stand-in slime judges over-sampled groups in submission order; README there).
        "FAKE_SLIME_ORDERED": environ.get("FAKE_SLIME_ORDERED", "1"),
        # No idle Python workers prestarted per declared CPU when the first driver registers: the
        # stand-in job never uses them (tests/fakes/README.md, "The rehearsal's Ray"). Its ray start
        # and raylet inherit this; a real run keeps Ray's default.
        "RAY_prestart_worker_first_driver": "0",
    }
    scale = {**SCALE, "TRAIN_SAVE": str(base / "train_save")}
    out.update({k: v for k, v in scale.items() if k not in environ})
    yours = load.load(environ)
    out.update({k: v for k, v in PORTS.items() if yours.sources.get(k) == DEFAULTS})
    # A rehearsal's W&B runs never join the real run's group, and it tells nobody's webhook
    # unless asked (REHEARSAL_NOTIFY=1 keeps NOTIFY_WEBHOOK: a way to try the webhook itself).
    out["WANDB_GROUP"] = f"rehearsal-{environ.get('RUN_NAME') or SCALE['RUN_NAME']}"
    if environ.get("REHEARSAL_NOTIFY") != "1":
        out["NOTIFY_WEBHOOK"] = ""
    cfg = load.load({**environ, **out})
    out.update({k: v for k, v in FAKE_KEYS.items() if not cfg.get(k)})
    return out


# What `make rehearse` says when it starts: which of the user's settings stand-ins replace, and why.
REPLACED = (
    ("SEED_BANK, TRAIN_TASKS, VAL_TASKS", "stand-in task files built from the stand-in ShopSimulator's catalogue "
     "(your tasks name products it does not have) and an empty first bank; yours were checked above"),
    ("HF_MODEL, TORCH_DIST_MODEL, MODELS_DIR, DATA_DIR", "a stand-in tokenizer and fake weights"),
    ("CONDA_ROOT, SLIME_DIR, MEGATRON_DIR, SHOPSIM_DIR, SGLANG_LAUNCHER, SHOPSIM_LAUNCHER and the converters",
     "stand-ins of slime, SGLang and ShopSimulator that run on the CPU"),
)


def explain(environ: dict[str, str], out: dict[str, str]) -> list[str]:
    """The lines `make rehearse` prints before it starts (stderr); `out`: exports(environ)."""
    from pyhelpers.config import load
    from pyhelpers.loop.console import stamp

    yours = load.load(environ)
    knobs = load.read_knobs()
    replaced = [k for k, v in out.items() if k in knobs and yours.sources.get(k) == str(yours.env_file)
                and yours[k] != v and k not in yours.secret_names]
    small = ", ".join(k for k in SCALE if yours.sources.get(k) == DEFAULTS)
    ports = ", ".join(f"{k}={out.get(k, yours[k])}" for k in PORTS)
    whose = [k for k in PORTS if yours.sources.get(k) != DEFAULTS]
    lines = [f"replaces {what}: {why}" for what, why in REPLACED]
    if replaced:
        lines.append(f"replaces your {', '.join(f'{k}={yours[k]} with {out[k]}' for k in replaced)} (from "
                     f"{yours.env_file}; to keep one, give it on the command line: make rehearse "
                     f"{replaced[0]}={yours[replaced[0]]})")
    lines += [f"small values for {small} (give any on the command line: make rehearse ROUNDS=3)",
              f"ports {ports} ("
              + (f"yours: {', '.join(whose)}; " if whose else "")
              + ("the others are the rehearsal's own, not the real run's defaults: set them in .env to choose"
                 if len(whose) < len(PORTS) else "as in your configuration") + ")",
              "W&B group rehearsal-<RUN_NAME>; no notifications unless REHEARSAL_NOTIFY=1"]
    return [stamp("rehearse", line) for line in lines]


def main(argv: list[str]) -> int:
    if argv[:1] != ["env"] or argv[1:] not in ([], ["--explain"]):
        print("usage: rehearsal.py env [--explain]", file=sys.stderr)
        return 2
    out = exports(dict(os.environ))
    for name, value in out.items():
        print(f"export {name}={shlex.quote(value)}")
    if argv[1:] == ["--explain"]:
        print("\n".join(explain(dict(os.environ), out)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
