"""Notifications: a short message to a webhook when the run starts, finishes a round, restarts,
warns (disk), and ends -- so a 3 a.m. failure reaches a phone (issue: self-healing runs).

NOTIFY_WEBHOOK (a secret by the naming rule: it is a bearer credential; never printed or written)
receives a POST per message, in NOTIFY_FORMAT:

| format   | body                                                                  |
|----------|-----------------------------------------------------------------------|
| generic  | {"source": "shopsimrl", "event", "run", "text", ...fields}            |
| feishu   | Feishu / Lark custom bot: {"msg_type": "text", "content": {"text"}}   |
| dingtalk | DingTalk robot: {"msgtype": "text", "text": {"content"}}               |
| wecom    | WeCom (企业微信) group robot: {"msgtype": "text", "text": {"content"}}    |
| slack    | Slack incoming webhook: {"text"}                                      |

With NOTIFY_SECRET set, Feishu and DingTalk requests are signed as those bots' "signature"
security setting requires (HMAC-SHA256 of "<timestamp>\\n<secret>"). Every text starts with
"ShopSimRL" (bots with a keyword filter can use it).

Posting never affects the run: messages go through a queue to one background thread, each POST
has NOTIFY_TIMEOUT seconds, failures are logged and dropped, and `close()` waits at most
NOTIFY_TIMEOUT for what is queued. Without NOTIFY_WEBHOOK nothing is sent.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import queue
import threading
import time
import urllib.parse
from collections.abc import Callable

from pyhelpers.config.load import Config

FORMATS = ("generic", "feishu", "dingtalk", "wecom", "slack")


def _sign(secret: str, timestamp: str, digest_of_key: bool) -> str:
    text = f"{timestamp}\n{secret}".encode()
    # DingTalk: HMAC(key=secret, msg=text); Feishu: HMAC(key=text, msg=b"").
    mac = hmac.new(secret.encode(), text, hashlib.sha256) if digest_of_key else hmac.new(text, b"", hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()


def request(fmt: str, url: str, event: str, run: str, text: str, fields: dict, secret: str = "",
            now: Callable[[], float] = time.time) -> tuple[str, dict]:
    """(url, JSON body) of one message in `fmt` (pure, for tests)."""
    text = f"ShopSimRL [{run}] {text}"
    if fmt == "generic":
        return url, {"source": "shopsimrl", "event": event, "run": run, "text": text, **fields}
    if fmt == "slack":
        return url, {"text": text}
    if fmt == "feishu":
        body: dict = {"msg_type": "text", "content": {"text": text}}
        if secret:
            ts = str(int(now()))
            body.update(timestamp=ts, sign=_sign(secret, ts, digest_of_key=False))
        return url, body
    if fmt in ("dingtalk", "wecom"):
        if fmt == "dingtalk" and secret:
            ts = str(int(now() * 1000))
            sep = "&" if "?" in url else "?"
            url = f"{url}{sep}timestamp={ts}&sign={urllib.parse.quote_plus(_sign(secret, ts, digest_of_key=True))}"
        return url, {"msgtype": "text", "text": {"content": text}}
    raise ValueError(f"NOTIFY_FORMAT={fmt!r} is not one of {', '.join(FORMATS)}")


class Notifier:
    def __init__(self, url: str, fmt: str, run: str, timeout: float, secret: str = "",
                 log: Callable[[str], None] = lambda s: None):
        self.url, self.fmt, self.run, self.timeout, self.secret, self.log = url, fmt, run, timeout, secret, log
        self.sent: list[str] = []
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None

    @classmethod
    def from_config(cls, cfg: Config, log: Callable[[str], None] = lambda s: None) -> Notifier:
        return cls(cfg.NOTIFY_WEBHOOK, cfg.NOTIFY_FORMAT or "generic", run=cfg.run_name,
                   timeout=cfg.NOTIFY_TIMEOUT, secret=cfg.NOTIFY_SECRET, log=log)

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    def send(self, event: str, text: str, **fields) -> None:
        """Queue one message; returns at once."""
        if not self.enabled:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, daemon=True, name="notify")
            self._thread.start()
        self._q.put((event, text, fields))

    def close(self) -> None:
        """Give queued messages at most NOTIFY_TIMEOUT seconds more, then leave them."""
        if self._thread is None:
            return
        self._q.put(None)
        self._thread.join(timeout=self.timeout + 1)

    def _work(self) -> None:
        import requests  # heavy: requests (~0.15 s), only when a webhook is set

        http = requests.Session()
        while True:
            item = self._q.get()
            if item is None:
                return
            event, text, fields = item
            try:
                url, body = request(self.fmt, self.url, event=event, run=self.run, text=text, fields=fields, secret=self.secret)
                r = http.post(url, json=body, timeout=self.timeout)
                if r.status_code >= 400:
                    self.log(f"notification '{event}' refused: HTTP {r.status_code} (check NOTIFY_WEBHOOK/NOTIFY_FORMAT)")
                else:
                    self.sent.append(event)
            except Exception as exc:  # noqa: BLE001 - a notification must never affect the run
                self.log(f"notification '{event}' not sent: {type(exc).__name__} (the run goes on)")
