"""Test support for the rollout plugin: real fake servers, a slime-like args object, tasks.

`Stack` starts, as real processes in their own sessions on loopback ports they pick themselves
(port 0, the URL read back from their first stderr line): tests/fakes/fake_shopsim.py on the shop
fixture, tests/fakes/fake_sglang.py (the engine; `sampling` is its --fake-sampling: "episode" for
a training engine whose groups can be all-equal) on the test tokenizer, and
tests/fakes/fake_router.py in front of it (slime's router, with abort and slow-request
injection). `stack.args(...)` is what slime's parser would give the plugin: slime's own argument
names plus every `shopsimrl_*` key `setattr`ed from the plugin YAML written by
`write_plugin_yaml`, exactly as `--custom-config-path` does. tests/fakes/slime_stub is put first
on sys.path by `use_slime_stub()`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

import httpx
import yaml
from conftest import FAKES, ROOT
from fakes.procs import free_port

STUB = FAKES / "slime_stub"


# The plugin knobs only the one-job mode reads (rollout/in_job_eval.py; settings.for_rollout): any valid
# values, STEPS_PER_ROUND above every rollout id these tests play, so each stays in the YAML's round.
EVAL_KNOBS = dict(steps_per_round=1000, shopsim_start_timeout=30.0, eval_concurrency=8, eval_episode_retries=1,
                  eval_max_infra_share=0.05, gate_pairs=16, gate_arm_episodes=4, gate_seed=1, gate_max_skills=8,
                  gate_failed_share=0.7, gate_alpha=0.1, gate_max_rounds=3, analyst_drain_timeout=60.0,
                  bank_wait_timeout=60.0)


def use_slime_stub() -> None:
    if str(STUB) not in sys.path:
        sys.path.insert(0, str(STUB))


def fresh_slime_singletons() -> None:
    """slime builds GenerateState once per process, from the first args it sees (its stand-in does
    the same). One slime process trains one run; a test process plays many, each with its own
    args and stack, so every test starts without the previous test's singleton."""
    from slime.utils.misc import SingletonMeta

    SingletonMeta._instances.clear()


def _start(argv: list[str], env: dict, log: Path) -> tuple[subprocess.Popen, str]:
    fh = open(log, "w+")
    proc = subprocess.Popen([sys.executable, *argv], env=env, stdout=fh, stderr=fh, start_new_session=True)
    deadline = time.monotonic() + 300  # a bound on a hang: a loaded machine starts it late
    while time.monotonic() < deadline:
        text = log.read_text()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", text)
        if m:
            return proc, f"http://127.0.0.1:{m.group(1)}"
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    _end(proc)  # it must not come up after the test gave up on it
    raise RuntimeError(f"{argv[0]} did not start: {log.read_text()[-2000:]}")


def _end(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


# The stacks started and not closed yet: a test that fails before its own try/finally closes one
# (a failing st.args(...), say) has it closed by tests/conftest.py at its end, not left running.
OPEN: list[Stack] = []


class Stack:
    def __init__(self, tmp: Path, *, slots: int = 12, fixture: dict, tokenizer: Path, error_rate: float = 0.0,
                 slow_share: float = 0.0, slow_s: float = 30.0, reset_retries: int = 3, reset_delay: float = 0.1,
                 seed: int = 7, slow_after_abort: bool = False, engine_latency_ms: float = 0.0,
                 router_fail_first: int = 0, sampling: str = "task"):
        self.tmp, self.fixture, self.tokenizer = Path(tmp), fixture, Path(tokenizer)
        self.procs: list[subprocess.Popen] = []
        env = {**os.environ, "SHOPSIM_ENV_MAX_NUM": str(slots), "SHOPSIM_RESET_RETRIES": str(reset_retries),
               "SHOPSIM_RESET_DELAY": str(reset_delay)}
        try:  # a failed start leaves none of the parts already started running
            p, self.shopsim_url = _start([str(FAKES / "fake_shopsim.py"), "--host", "127.0.0.1", "--port", "0",
                                          "--seed", str(seed), "--tasks", str(fixture["server_file"]),
                                          "--inject-error-rate", str(error_rate)], env, self.tmp / "shopsim.log")
            self.procs.append(p)
            p, self.engine_url = _start([str(FAKES / "fake_sglang.py"), "--model-path", str(tokenizer),
                                         "--host", "127.0.0.1", "--port", str(free_port()), "--context-length",
                                         "32768", "--fake-policy", str(fixture["policy"]), "--latency-ms",
                                         str(engine_latency_ms), "--fake-sampling", sampling],
                                        env, self.tmp / "sglang.log")
            self.procs.append(p)
            p, self.router_url = _start([str(FAKES / "fake_router.py"), "--host", "127.0.0.1", "--port", "0",
                                         "--worker", self.engine_url, "--slow-share", str(slow_share),
                                         "--slow-s", str(slow_s), "--seed", str(seed),
                                         "--fail-first", str(router_fail_first),
                                         *(["--slow-after-abort"] if slow_after_abort else [])], env,
                                        self.tmp / "router.log")
            self.procs.append(p)
        except BaseException:
            self.close()
            raise
        self.slots = slots
        OPEN.append(self)

    def close(self) -> None:
        if self in OPEN:
            OPEN.remove(self)
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)

    def slot_state(self) -> dict:
        return httpx.get(self.shopsim_url + "/debug/slots", timeout=10).json()

    def router_counts(self) -> dict:
        return httpx.get(self.router_url + "/debug/counts", timeout=10).json()

    def write_tasks(self, path: Path) -> list[dict]:
        lines = [{"task_id": f"t{t['idx']:04d}", "shopsim_idx": t["idx"], "split": "train",
                  "instruction": t["instruction"], "messages": [{"role": "user", "content": t["instruction"]}]}
                 for t in self.fixture["tasks"]]
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
        return lines

    def args(self, round_dir: Path, *, concurrency: int = 8, yaml_extra: dict | None = None, **slime) -> Namespace:
        """slime's args for the plugin: YAML written by write_plugin_yaml, then setattr'd key by key."""
        from pyhelpers.rollout import flags
        from pyhelpers.rollout.settings import write_plugin_yaml

        round_dir = Path(round_dir)
        round_dir.mkdir(parents=True, exist_ok=True)
        tasks = round_dir / "tasks.jsonl"
        self.write_tasks(tasks)
        values = dict(round=0, round_dir=str(round_dir), bank_path=str(slime.pop("bank_path", "")),
                      tasks_path=str(tasks), shopsim_url=self.shopsim_url, shopsim_slots=self.slots,
                      shopsim_episode_concurrency=concurrency, max_turns=8, rollout_max_context_len=4096,
                      rollout_max_response_len=256, reward="strict", retry_trains=0, skill_token_budget=256, draw_limit_factor=4,
                      **EVAL_KNOBS,
                      tokenizer_path=str(self.tokenizer), policy_model="fake-policy",
                      shopsim_timeout_s=10.0, shopsim_reset_timeout_s=15.0, generate_timeout_s=10.0,
                      episode_timeout_s=60.0, retry_drain_timeout_s=20.0)
        values.update(yaml_extra or {})
        write_plugin_yaml(round_dir / "slime.yaml", **values)
        host, port = self.router_url.removeprefix("http://").split(":")
        args = Namespace(
            sglang_router_ip=host, sglang_router_port=int(port), hf_checkpoint=str(self.tokenizer),
            rollout_max_response_len=256, rollout_max_context_len=4096, rollout_temperature=1.0,
            rollout_top_p=1.0, rollout_top_k=-1, rollout_stop=None, rollout_stop_token_ids=None,
            rollout_skip_special_tokens=False, sglang_server_concurrency=512, reward_key=None,
            custom_generate_function_path="pyhelpers.rollout.generate.generate",
            rollout_function_path="pyhelpers.rollout.rollout.generate_rollout",
            dynamic_sampling_filter_path=flags.DYNAMIC_FILTER, custom_reward_post_process_path=flags.REWARD_POST_PROCESS,
            advantage_estimator="grpo", rewards_normalization=True, grpo_std_normalization=True,
            prompt_data=str(tasks), input_key=flags.INPUT_KEY, label_key=flags.LABEL_KEY, metadata_key="metadata",
            rollout_shuffle=False, rollout_seed=42, n_samples_per_prompt=4, rollout_batch_size=2,
            over_sampling_batch_size=4, custom_config_path=str(round_dir / "slime.yaml"))
        for k, v in slime.items():
            setattr(args, k, v)
        for k, v in (yaml.safe_load((round_dir / "slime.yaml").read_text()) or {}).items():
            setattr(args, k, v)  # what slime does with --custom-config-path
        return args


def sampling_params(args: Namespace) -> dict:
    """What slime's GenerateState passes to generate (copied per sample)."""
    return dict(temperature=args.rollout_temperature, top_p=args.rollout_top_p, top_k=args.rollout_top_k,
                max_new_tokens=args.rollout_max_response_len, stop=args.rollout_stop,
                stop_token_ids=args.rollout_stop_token_ids, skip_special_tokens=args.rollout_skip_special_tokens,
                no_stop_trim=True, spaces_between_special_tokens=False)


def assert_aligned(sample) -> None:
    n = sample.response_length
    assert n >= 1
    assert len(sample.loss_mask) == n and len(sample.rollout_log_probs) == n, sample.metadata
    assert len(sample.tokens) > n
    assert isinstance(sample.reward, float)


__all__ = ["ROOT", "Stack", "assert_aligned", "sampling_params", "use_slime_stub"]
