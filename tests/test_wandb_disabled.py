"""WANDB_MODE=disabled starts no W&B logger anywhere: `make plan` lists none (overview/plan.py), the
rounds start none (stages/eval_session.py), and the run's end starts none (launch/services.py)."""

from __future__ import annotations

from pyhelpers.config import load
from pyhelpers.launch import services
from pyhelpers.run import layout


def test_the_runs_last_wandb_logging_starts_nothing_when_wandb_is_disabled(toolkit_env, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    cfg = load.load()
    lay = layout.from_config(cfg)
    lay.logs.mkdir(parents=True)
    lay.pids.mkdir(parents=True)
    assert services.log_wandb(cfg, lay) == []
    assert not (lay.logs / "wandb-log.log").exists(), (lay.logs / "wandb-log.log").read_text()[-2000:]
