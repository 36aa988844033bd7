"""The driver's terminal: its own lines in one format, everything else in its log.

The loop process imports transformers, wandb and Ray's client, which print banners and warnings
on stdout/stderr ("PyTorch was not found", "W&B syncing is set to offline", ...). `take_over`
points file descriptors 1 and 2 at logs/driver.log, so whatever a library (or C code) writes goes
there; the terminal keeps only what `say` writes, as `HH:MM:SS service  message`, also appended
to driver.log. bin/train hands the loop the terminal itself (not its tee pipe), so the loop can
tell a terminal from a file.

On a terminal `status` keeps one line updating in place (carriage return + ESC[K, erased before
each `say` and drawn again after): plain ANSI, not tqdm or rich -- neither is in the venv, the line
is one string, and a second renderer would fight with the lines `say` prints. Not on a terminal
(nohup, CI, a pipe) `status` prints nothing: the per-step lines are the progress there.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path


def stamp(service: str, message: str, now: float | None = None) -> str:
    """The toolkit's log-line format (bin/lib.sh `log` writes the same)."""
    return f"{time.strftime('%H:%M:%S', time.localtime(now))} {service:<8} {message}"


class Console:
    def __init__(self, term_fd: int, log_fd: int | None, service: str = "driver", rewrite=None):
        self.term, self.log, self.service = term_fd, log_fd, service
        self.rewrite = rewrite or (lambda text: text)  # run.hints: a rehearsal's commands
        self.tty = os.isatty(term_fd)
        self._status = ""
        self._lock = threading.Lock()

    @classmethod
    def take_over(cls, log_path: Path, service: str = "driver", rewrite=None) -> Console:
        """Keep the current stderr as the terminal; send fds 1 and 2 (libraries, C code) to log_path."""
        term = os.dup(2)
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        return cls(term, log, service=service, rewrite=rewrite)

    def _write(self, fd: int, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(fd, data):]

    def say(self, text: str) -> None:
        """One or more lines, each stamped, to the terminal and the log ("" says nothing)."""
        if not text:
            return
        lines = "".join(stamp(self.service, line) + "\n" for line in self.rewrite(str(text)).splitlines() or [""])
        with self._lock:
            if self.log is not None:
                self._write(self.log, lines)
            if self.tty and self._status:
                lines = "\r\033[K" + lines + self._fit(self._status)
            self._write(self.term, lines)

    def status(self, text: str) -> None:
        """The updating line (a terminal only); "" erases it."""
        if not self.tty:
            return
        with self._lock:
            self._status = self.rewrite(text)
            self._write(self.term, "\r\033[K" + self._fit(self._status))

    def _fit(self, text: str) -> str:
        width = shutil.get_terminal_size((120, 24)).columns
        return text if len(text) < width else text[:max(0, width - 2)] + "…"

    def stream(self, on_line=None) -> ProgressStream:
        return ProgressStream(self, on_line)


class ProgressStream:
    """A file-like for evaluate's Progress: its in-place redraws become the updating line, its
    plain lines (not a terminal) become stamped lines; on_line sees every line drawn."""

    def __init__(self, console: Console, on_line=None):
        self.console, self.on_line = console, on_line
        self._last = ""

    def isatty(self) -> bool:
        return self.console.tty

    def write(self, text: str) -> int:
        for part in text.replace("\033[K", "").split("\n"):
            line = part.rsplit("\r", 1)[-1].strip()
            if not line:
                continue
            self._last = line
            if self.on_line:
                self.on_line(line)
            if "\r" in part or (self.console.tty and not text.endswith("\n")):
                self.console.status(line)
            else:
                self.console.say(line)
        if text == "\n" and self.console.tty and self._last:  # Progress.close(): keep the last line
            self.console.status("")
            self.console.say(self._last)
        return len(text)

    def flush(self) -> None:
        pass
