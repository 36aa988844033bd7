"""Who gets which secret (pyhelpers/launch/secret_env.py): nothing the driver starts inherits one;
a user of a key gets that key at spawn; slime's W&B loggers find theirs in a 0600 netrc file.
The whole rehearsal's processes: tests/test_rehearsal.py test_a_secret_reaches_only_the_processes_that_use_it."""

from __future__ import annotations

import json
import netrc
import os
import stat

from pyhelpers.config import load
from pyhelpers.launch import secret_env, slime_args

WANDB, DASH = "wk-SECRET-71", "sk-SECRET-72"


def _cfg(tmp_path, extra: str = ""):
    (tmp_path / ".env").write_text(f"WANDB_API_KEY={WANDB}\nDASHSCOPE_API_KEY={DASH}\nSECRET_VARS=ODD\nODD=odd-SECRET\n"
                                   + extra)
    return load.load()


def test_the_driver_gives_its_children_no_secret(toolkit_env, tmp_path):
    cfg = _cfg(tmp_path)
    assert not {WANDB, DASH, "odd-SECRET"} & set(cfg.process_env().values())
    assert {WANDB, DASH, "odd-SECRET"} <= set(cfg.process_env(secrets=True).values())
    shell = {"PATH": "/bin", "WANDB_API_KEY": WANDB, "HF_TOKEN": "hf-SECRET", "ODD": "odd-SECRET",
             "RAY_AUTH_TOKEN": "ray-SECRET", "WANDB_MODE": "offline"}
    secret_env.drop_all(cfg, shell)
    assert shell == {"PATH": "/bin", "WANDB_MODE": "offline"}


def test_a_key_reaches_its_users_alone(toolkit_env, tmp_path):
    cfg = _cfg(tmp_path)
    environ = {"PATH": "/bin", "MY_TOKEN": "t0k", "DASHSCOPE_API_KEY": "from-the-shell"}
    analyst = secret_env.for_user(cfg, "analyst", environ)
    assert analyst == {"PATH": "/bin", "DASHSCOPE_API_KEY": DASH, "WANDB_API_KEY": WANDB}
    assert secret_env.for_user(cfg, "wandb-log", environ) == {"PATH": "/bin", "WANDB_API_KEY": WANDB}


def test_slime_finds_the_wandb_key_in_a_0600_netrc_named_by_its_runtime_env(toolkit_env, tmp_path):
    cfg = _cfg(tmp_path)
    entry = secret_env.job_netrc(cfg, cfg.run_dir)
    path = cfg.run_dir / "ray" / "job-netrc"
    assert entry == {"NETRC": str(path)}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert netrc.netrc(str(path)).authenticators("api.wandb.ai")[2] == WANDB  # as wandb reads it
    shown = json.dumps(slime_args.runtime_env(cfg, entry))  # what Ray stores and shows
    assert str(path) in shown and WANDB not in shown
    secret_env.remove_job_netrc(cfg.run_dir)
    assert not path.exists()


def test_the_job_netrc_names_the_wandb_host_and_is_absent_without_a_key(toolkit_env, tmp_path):
    cfg = _cfg(tmp_path, "WANDB_BASE_URL=https://wandb.example.org:8443\n")
    path = secret_env.job_netrc(cfg, cfg.run_dir)["NETRC"]
    assert netrc.netrc(path).authenticators("wandb.example.org:8443")[2] == WANDB
    disabled = load.load({**os.environ, "WANDB_MODE": "disabled"})
    assert secret_env.job_netrc(disabled, disabled.run_dir) == {}
    assert not (disabled.run_dir / "ray" / "job-netrc").exists()  # the earlier one is gone too
    (tmp_path / ".env").write_text("")
    assert secret_env.job_netrc(load.load(), cfg.run_dir) == {}
