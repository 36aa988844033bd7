"""The analyst's log lines: to stderr, with the key redacted as a last line of defence."""

from __future__ import annotations

import logging
import sys


class Redact(logging.Filter):
    """No log line may carry the key, whatever produced it."""

    def __init__(self, secret: str):
        super().__init__()
        self.secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.secret and self.secret in text:
            record.msg, record.args = text.replace(self.secret, "***"), None
        return True


def setup(secret: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s analyst %(levelname)s %(message)s"))
    handler.addFilter(Redact(secret))
    logger = logging.getLogger("pyhelpers.analyst")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
