"""Self-healing: is a failed stage worth restarting, and when.

`classify()` reads the failure against RULES, one table: the error's own text first, then the tail
of the failing process's log, where the rule matching last wins (the fatal error ends a log).
`Supervisor.decide()` adds the limits: at most MAX_RESTARTS restarts per driver run and
MAX_RESTARTS_PER_STAGE per stage of a round, exponential backoff from RESTART_BACKOFF (doubling, at
most RESTART_BACKOFF_MAX seconds), and the same failure at the same step twice is permanent (a
crash that repeats deterministically would only burn GPU hours). A user's `make stop` is final:
the loop never restarts after it.

Restarting means what `make resume` does: stop the job and every service, wait, then continue from
the artifacts (the next stage is derived again; a checkpoint is never deleted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pyhelpers.config.load import Config
from pyhelpers.errors import ToolkitError

TRANSIENT, PERMANENT = "transient", "permanent"

# (cause, kind, pattern, what it means) -- matched case-insensitively against the error text and
# the failing process's log tail. Order matters: permanent causes first.
RULES: tuple[tuple[str, str, str, str], ...] = (
    ("config", PERMANENT, r"configuration error|is not one of|not a whole number|must be (at least|0 or 1|below)",
     "a configuration error: fix the knob named above"),
    ("disk-short", PERMANENT, r"not enough disk space", "TRAIN_SAVE's disk is too full for the next save or export"),
    ("flag", PERMANENT, r"unknown flag|unrecognized arguments|not in the toolkit's checked flag list|"
                        r"ValueError: --[a-z]", "slime (or SGLang) rejected its arguments"),
    ("placement", PERMANENT, r"did not start training within", "the job never got its GPUs (JOB_START_TIMEOUT)"),
    ("missing-file", PERMANENT, r"FileNotFoundError|No such file or directory|does not exist|is missing",
     "a file or directory the run needs is missing"),
    ("nccl", TRANSIENT, r"NCCL error|Watchdog caught collective operation timeout|DistBackendError|ProcessGroupNCCL",
     "an NCCL error or timeout between the GPUs"),
    ("cuda-oom", TRANSIENT, r"CUDA out of memory|OutOfMemoryError",
     "out of GPU memory (a restart may get past it; if it repeats at the same step, see docs/oom_qwen35_4b.md)"),
    # The head's Ray lost (its GCS, raylet or dashboard killed, e.g. by the OOM killer): the toolkit's own
    # words (launch/ray_lost.py), a GCS that no longer answers (ray 2.60 _raylet.so, what a call to it
    # raises) or hangs (launch/cluster.py probe's timeout), a job that the head's Ray no longer knows.
    # Before `node-lost`, `engine` and `node`, which would match some of it: the restart must start the
    # head's Ray again.
    ("ray-lost", TRANSIENT, r"the head's Ray is lost|Timed out while waiting for GCS|Failed to connect to GCS|"
                            r"GCS server is dead|GCS may have been killed|Ray did not answer `|Ray knows no job",
     "the head's Ray died (its GCS, raylet or dashboard killed): the restart starts it again"),
    # A worker node gone (its raylet killed, the machine lost): Ray's GCS declares it dead after its
    # health check fails, and every actor or task on it fails with these (ray 2.60 _raylet.so, gcs_server).
    # Before `engine` and `node`, which would also match: the restart must wait for the node to rejoin.
    ("node-lost", TRANSIENT, r"its node has died|node it was running on is dead|node was terminated unexpectedly|"
                             r"NodeDiedError|Node is dead because the health check failed|missing too many heartbeats",
     "a worker node left the cluster (raylet killed, machine lost, network cut): the restart waits JOIN_TIMEOUT for it to rejoin"),
    ("engine", TRANSIENT, r"RayActorError|ActorDiedError|ActorUnavailableError|RaySystemError|GetTimeoutError|"
                          r"SGLang engine (died|crashed)|sglang\S* (died|crashed|exited)",
     "an SGLang engine or a Ray actor died"),
    ("shopsim", TRANSIENT, r"ShopSimulator (died|did not answer)|ShopSimError|TransportError",
     "ShopSimulator failed"),
    ("node", TRANSIENT, r"Connection (reset|refused)|Ray's job API|cannot reach Ray|node .* (died|dead)|"
                        r"heartbeat|Broken pipe|Segmentation fault|exit code -?(9|137)\b",
     "a process or the node hiccupped (killed, connection lost)"),
)


@dataclass(frozen=True)
class Failure:
    stage: str
    round: int | None
    step: int | None        # the training step in progress (train), else None
    cause: str              # a RULES cause, or "unknown"
    kind: str               # transient | permanent
    meaning: str
    excerpt: str            # the lines that matched (or the error's first line)

    @property
    def key(self) -> tuple:
        return self.stage, self.round, self.step, self.cause


def _failure(stage, round_, step, rule, line) -> Failure:
    cause, kind, _, meaning = rule
    return Failure(stage, round_, step=step, cause=cause, kind=kind, meaning=meaning, excerpt=line.strip()[:300])


def classify(stage: str, round_: int | None, step: int | None, message: str, log_text: str = "") -> Failure:
    """The toolkit's own error message is read first, rule by rule (permanent causes first); if no
    rule matches it, the failing process's log is read for the rule that matches LAST in it -- the
    fatal error ends a log, earlier lines may hold harmless warnings."""
    for rule in RULES:
        m = re.search(rule[2], message, flags=re.IGNORECASE)
        if m:
            return _failure(stage, round_, step=step, rule=rule, line=next(ln for ln in message.splitlines() if m.group(0) in ln))
    best = None
    for rule in RULES:
        for m in re.finditer(rule[2], log_text, flags=re.IGNORECASE):
            if best is None or m.end() > best[1].end():
                best = (rule, m)
    if best:
        rule, m = best
        line = log_text[log_text.rfind("\n", 0, m.start()) + 1:].split("\n", 1)[0]
        return _failure(stage, round_, step=step, rule=rule, line=line)
    first = next((ln for ln in message.splitlines() if ln.strip()), "")
    return Failure(stage, round_, step=step, cause="unknown", kind=PERMANENT,
                   meaning="not recognised as transient (see the restart rules in README.md)", excerpt=first.strip()[:300])


def node_lost(f: Failure, which: str) -> Failure:
    """f, recast as `node-lost`: the head's node list shows `which` worker(s) gone (loop.py asks it)."""
    rule = next(rule for rule in RULES if rule[0] == "node-lost")
    return Failure(f.stage, f.round, step=f.step, cause="node-lost", kind=rule[1], meaning=rule[3],
                   excerpt=f"{which}; the job's last words: {f.excerpt}"[:300])


def refused_workers(text: str, addrs: list[str]) -> list[str]:
    """The workers (NODE_ADDRs) whose Ray the job's own calls found refusing connections, in gRPC's
    words as ray 2.60 raises them ("ipv4:ADDR:PORT: Failed to connect to remote host: Connection
    refused", an ActorUnavailableError): the worker's raylet died under the job before Ray's health
    check declared its node dead, so the head still lists the node ALIVE and nothing else names it."""
    return [f"{a} lost (the job's calls to its Ray were refused)" for a in dict.fromkeys(addrs)
            if re.search(rf"ipv4:{re.escape(a)}:\d+: Failed to connect to remote host: Connection refused", text)]


def classify_exception(stage: str, round_: int | None, *, step: int | None, exc: BaseException,
                       log_text: str = "") -> Failure:
    """A stage's exception: a ToolkitError by its message and the failing process's log (RULES);
    any other exception is a bug in the toolkit (permanent)."""
    if not isinstance(exc, ToolkitError):
        return Failure(stage, round_, step=step, cause="bug", kind=PERMANENT,
                       meaning="an error inside the toolkit, not the stack: report it with the driver's log",
                       excerpt=f"{type(exc).__name__}: {exc}"[:300])
    return classify(stage, round_, step=step, message=exc.what, log_text=f"{exc.where}\n{log_text}")


@dataclass
class Decision:
    restart: bool
    reason: str
    wait_s: float = 0.0


@dataclass
class Supervisor:
    max_restarts: int
    max_per_stage: int
    backoff: float
    backoff_max: float
    seen: list[Failure] = field(default_factory=list)

    @classmethod
    def from_config(cls, cfg: Config) -> Supervisor:
        return cls(cfg.MAX_RESTARTS, cfg.MAX_RESTARTS_PER_STAGE, backoff=cfg.RESTART_BACKOFF,
                   backoff_max=cfg.RESTART_BACKOFF_MAX)

    def decide(self, f: Failure) -> Decision:
        where = f"{f.stage} of round {f.round}" + (f" at step {f.step}" if f.step is not None else "")
        if f.kind == PERMANENT:
            return Decision(False, f"{where} failed: {f.meaning} ({f.cause}): {f.excerpt}")
        if any(prev.key == f.key for prev in self.seen):
            return Decision(False, f"{where} failed the same way twice ({f.cause}: {f.meaning}): {f.excerpt}; "
                                   "a repeating failure is not transient")
        same_stage = sum(1 for prev in self.seen if (prev.stage, prev.round) == (f.stage, f.round))
        if len(self.seen) >= self.max_restarts:
            return Decision(False, f"{where} failed ({f.cause}) after {len(self.seen)} restart(s) of this run "
                                   f"(MAX_RESTARTS={self.max_restarts}): {f.excerpt}")
        if same_stage >= self.max_per_stage:
            return Decision(False, f"{where} failed ({f.cause}) after {same_stage} restart(s) of this stage "
                                   f"(MAX_RESTARTS_PER_STAGE={self.max_per_stage}): {f.excerpt}")
        self.seen.append(f)
        wait = min(self.backoff_max, self.backoff * 2 ** (len(self.seen) - 1))
        return Decision(True, f"{where} failed: {f.meaning} ({f.cause}): {f.excerpt}", wait)
