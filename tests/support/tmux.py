"""A terminal for tests: a command in a detached tmux pane (its own server socket under tmp),
read back with capture-pane, typed into with send-keys. What a user sees, TTY included."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT


class Pane:
    def __init__(self, tmp: Path, command: str, env: dict, width: int = 200, height: int = 50):
        if not shutil.which("tmux"):
            pytest.fail("tmux is missing: `make setup` installs it (env/system-packages.txt)")
        self.sock, self.env = str(Path(tmp) / "tmux.sock"), {**env, "TERM": "xterm-256color"}
        self._tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height),
                   "-c", str(ROOT), command)
        self._tmux("set-option", "-t", "t", "history-limit", "20000")
        # Keep the pane (and what it shows) after its command ends: Ctrl-C ends the shell too.
        self._tmux("set-option", "-t", "t", "remain-on-exit", "on")

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.sock, *args], env=self.env, cwd=ROOT, check=True, text=True,
                              capture_output=True, timeout=30).stdout

    def text(self) -> str:
        """Everything the pane shows and has scrolled off (wrapped lines joined)."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "t")

    def screen(self) -> str:
        """What the pane shows now."""
        return self._tmux("capture-pane", "-p", "-J", "-t", "t")

    def ended(self) -> bool:
        """The pane's command has ended."""
        return self._tmux("display-message", "-p", "-t", "t", "#{pane_dead}").strip() == "1"

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def wait_for(self, pattern: str, timeout: float = 240, screen: bool = False, unless: str | None = None) -> re.Match:
        """The first match of pattern; fails at once when `unless` shows up (the command ended)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.screen() if screen else self.text(), flags=re.M)
            if m:
                return m
            if unless and re.search(unless, self.text(), flags=re.M):
                break
            time.sleep(0.1)
        raise AssertionError(f"the pane never showed {pattern!r}:\n{self.text()[-4000:]}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], env=self.env, capture_output=True, timeout=30)
