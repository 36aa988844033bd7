"""The ShopSimulator server's command line: SHOPSIM_LAUNCHER, or the project's own launcher
(pyhelpers/shopsim/launcher.py), with the pool size, port, host and seed of the configuration."""

from __future__ import annotations

import shlex

from pyhelpers.config.load import Config


def shopsim(cfg: Config) -> list[str]:
    """ShopSimulator through a launcher that fixes pool size, port, host, seed and reset retries
    before the envs are built (M6): SHOPSIM_LAUNCHER, or the project's own launcher."""
    # A launcher of the user's own reads the retries from its environment (launch/services.py);
    # the project's takes them on its command line.
    launcher = shlex.split(cfg.SHOPSIM_LAUNCHER) if cfg.SHOPSIM_LAUNCHER else [
        "python3", str(cfg.root / "pyhelpers" / "shopsim" / "launcher.py"), "--shopsim-dir", str(cfg.SHOPSIM_DIR),
        "--reset-retries", str(cfg.SHOPSIM_RESET_RETRIES), "--reset-delay", f"{cfg.SHOPSIM_RESET_DELAY:g}"]
    return [*launcher, "--host", cfg.SHOPSIM_HOST, "--port", str(cfg.SHOPSIM_PORT),
            "--slots", str(cfg.SHOPSIM_SLOTS), "--seed", str(cfg.SHOPSIM_SEED)]
