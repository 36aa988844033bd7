#!/usr/bin/env python3
"""Stand-in for slime's train.py (v0.3.1, 624b824) inside a real (CPU) Ray job, for rehearsals.

Submitted by the training loop exactly as the real one: `python3 train.py ${MODEL_ARGS[@]} <flags>`
as a Ray job. What it does, in slime's order (slime 624b824 train.py, slime/ray/rollout.py,
slime/backends/megatron_utils/checkpoint.py):

1. Flags: every name must be in the pinned flag list (env/flags/slime_train_flags.txt) — the real
   parser ignores unknown names silently; the stand-in exits 2,
   so a toolkit bug shows up in a rehearsal. `--custom-config-path` YAML keys are set on args.
2. Load: with --load holding a tracker, continue at its iteration + 1 (the data-source counters
   from rollout/global_dataset_state_dict_<it>.pt); a checkpoint saved without optimizer state
   needs --no-load-optim (Megatron fails otherwise). Without one, weights come from --ref-load
   (its tracker must say "release").
3. Placement: a PACK placement group of actor_num_nodes x actor_num_gpus_per_node {"GPU": 1}
   bundles on the job's Ray cluster; like slime it waits forever, logging "Waiting for placement
   group" (the toolkit applies its own deadline).
4. Engines: one fake SGLang engine (tests/fakes/fake_sglang.py, policy = the loaded weights'
   fake_policy.json) behind the fake router, as slime's colocated engines + router; stopped on exit.
5. The RolloutManager Ray actor (num_cpus=1, as slime/ray/placement_group.py:230-237) holds the data
   source and runs the --rollout-function-path function (the project's real rollout plugin around
   slime's default loop, tests/fakes/slime_stub/slime): the plugin lives in the actor's process and
   dies with it when the driver exits (Ray kills an exiting owner's actors). Per rollout id in
   [start, --num-rollout): RolloutManager.generate (set_current_rollout_id, the function, with the
   data source; then the samples become train data as slime's RolloutManager makes them --
   slime.ray.train_data: the reward post-processing, --custom-reward-post-process-path included,
   and the GRPO advantages); under --colocate the engines' memory is released after it --
   flush_cache, then release_memory_occupation, which fails when a request is still in flight --
   and resumed before the next; every sample is checked as slime's trainer would (token/mask/logprob lengths,
   a float reward); W&B logs rollout/* (with the function's metrics) on rollout/step and train/*
   on train/step when --use-wandb.
6. Save when (rollout_id + 1) % --save-interval == 0 or at the last rollout (slime's
   should_run_periodic_action with --num-rollout; --num-epoch and its per-epoch saves are refused), in slime's order
   (train.py:71-80): iter_XXXXXXX/ and then the tracker (tests/fakes/megatron_layout.py), --save-hf
   (HF weights without the visual tower, as slime's saver), then the data source's state.
7. Evaluation, in slime's order (train.py:35-36, 50-51, 85-91): with --eval-interval, after each
   rollout's save and weight sync, RolloutManager.eval(rollout_id) when `(rollout_id + 1) %
   --eval-interval == 0` (slime does not force it at the last rollout), before rollout 0 unless
   --skip-eval-before-train, and once alone with --num-rollout 0. It calls --eval-function-path
   (default: the rollout function, loaded at the manager's start) through call_rollout_fn(...,
   evaluation=True) and logs eval/<key> as the mean of each key's rewards (an empty list fails
   as in slime); slime's checks of the eval flags come first (resolve_eval, eval_log).

Sampling: the engine draws every episode on its own (fake_sglang --fake-sampling episode), as
temperature sampling does, so a group can be all-equal and slime's dynamic filter can drop it. The
draw is keyed by slime's per-member sampling_seed (rollout_seed + k), which slime sends only under
deterministic inference (--sglang-enable-deterministic-inference, default off in slime): the stand-in
turns it on by default so that a replayed step (stop, resume) plays exactly as the first time --
tests compare those runs. Without seeds the fake draws in arrival order (tests/fakes/README.md).

Test-only environment: FAKE_SLIME_CRASH_AT=<rollout id> (with FAKE_SLIME_CRASH_KIND nccl | oom |
flag, and FAKE_SLIME_CRASH_ONCE=<marker file>: crash only while the marker is absent, then create
it) exits 1 after printing the failure's real signature -- with FAKE_SLIME_CRASH_AFTER_S=<s>, <s> s
into that rollout while the actor plays it; FAKE_SLIME_KILL_BEFORE_DATA_STATE=<id> exits 137
between a save's tracker and its data state; FAKE_SLIME_HOLD_BEFORE=<id>:<file> waits before
rollout <id> until <file> exists (a test's gate: training held mid-run, however slow the test's own
steps); FAKE_SLIME_STEP_DELAY=<s> sleeps per
step; FAKE_SLIME_START_DELAY=<s> sleeps once placed, before the engines start (Megatron's init and
checkpoint load), FAKE_SLIME_SAVE_DELAY=<s> inside each save before its tracker is written,
FAKE_SLIME_SAVE_HF_DELAY=<s> before its --save-hf write, FAKE_SLIME_EXIT_DELAY=<s> after the engines
stopped, before the driver exits (teardown) -- the four for bench/round_gpu_idle.py;
FAKE_SLIME_EXTRA_GPUS=<n> asks for n more GPUs than the flags say (a placement that never
comes); FAKE_SLIME_HOLD_AT=<rollout id>[,<rollout id>...] with FAKE_SLIME_HOLD_GATE=<file> holds the
job after each of those steps until <file>-<rollout id> exists (maybe_hold); FAKE_SLIME_ROLLOUT_NODE=worker (or worker-then-head) pins
the RolloutManager to a node (see rollout_manager_options).

Across nodes (--actor-num-nodes > 1): slime's placement of the ranks, each rank's and the
RolloutManager's view of SLIME_HOST_IP, the socket interfaces and proxies, checked (place_ranks,
check_seen); the ranks live to the job's end and are called every step, so a lost node fails the job;
the engines and router start in the RolloutManager on its node (tests/fakes/README.md).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAKES = HERE.parent
sys.path.insert(0, str(FAKES))  # megatron_layout, modelled_wait
sys.path.insert(0, str(HERE))  # the slime stand-in package
FLAGS_FILE = FAKES.parents[1] / "env" / "flags" / "slime_train_flags.txt"

INTS = ("actor_num_nodes", "actor_num_gpus_per_node", "num_gpus_per_node", "rollout_num_gpus_per_engine",
        "tensor_model_parallel_size", "save_interval", "num_rollout", "rollout_batch_size",
        "n_samples_per_prompt", "over_sampling_batch_size", "global_batch_size", "max_tokens_per_gpu",
        "rollout_max_response_len", "rollout_max_context_len", "sglang_context_length", "rollout_seed",
        "start_rollout_id", "eval_interval")
FLOATS = ("rollout_temperature", "lr")
CRASHES = {
    "nccl": "torch.distributed.DistBackendError: [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
    "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.37 GiB. GPU 1 has a total "
           "capacity of 79.33 GiB of which 1.20 GiB is free.",
    "flag": "ValueError: --rollout-batch-size must be divisible by --n-samples-per-prompt",
}
_children: list[subprocess.Popen] = []


def log(msg: str) -> None:
    print(f"fake slime: {msg}", flush=True)


def slime_perf_line(source: str, rollout_id: int, perf: dict) -> str:
    """slime's own `perf <id>:` line, as its logger formats it (slime/observability/logging_utils.py:21):
    source is train_metric_utils.py:401 after a rollout's training (the Megatron main rank,
    actor.py:564) or rollout_metrics.py:268 after its generation (the RolloutManager)."""
    return f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {source} - perf {rollout_id}: {perf}"


def parse(argv: list[str]) -> Namespace:
    known = {line for line in FLAGS_FILE.read_text().splitlines() if line.startswith("--")}
    values: dict[str, object] = {}
    i = 0
    while i < len(argv):
        flag = argv[i]
        if not flag.startswith("--"):
            sys.exit(f"fake slime: stray argument {flag!r} (every value follows its flag)")
        if flag not in known:
            print(f"fake slime: unknown flag {flag} (real slime ignores it silently; the toolkit's flag list "
                  "should have refused it)", file=sys.stderr)
            sys.exit(2)
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        vals = argv[i + 1:j]
        values[flag[2:].replace("-", "_")] = True if not vals else vals[0] if len(vals) == 1 else vals
        i = j
    for k in INTS:
        if k in values:
            values[k] = int(values[k])
    for k in FLOATS:
        if k in values:
            values[k] = float(values[k])
    defaults = dict(rollout_top_p=1.0, rollout_top_k=-1, rollout_stop=None, rollout_stop_token_ids=None,
                    rollout_skip_special_tokens=False, sglang_server_concurrency=512, rollout_seed=42,
                    metadata_key="metadata", input_key="input", label_key=None, rollout_shuffle=False,
                    apply_chat_template=False, advantage_estimator="grpo", custom_reward_post_process_path=None,
                    sglang_enable_deterministic_inference=True,  # slime: False (module doc)
                    over_sampling_batch_size=None, save_hf=None, use_wandb=False, load=None,
                    no_load_optim=False, no_save_optim=False, start_rollout_id=None, colocate=False,
                    rollout_global_dataset=True, eval_interval=None, skip_eval_before_train=False,
                    eval_function_path=None, eval_prompt_data=None, eval_config=None, debug_train_only=False,
                    custom_eval_rollout_log_function_path=None, log_passrate=False,
                    wandb_always_use_train_step=False)
    args = Namespace(**{**defaults, **values})
    # slime/utils/arguments.py:1993-2005: one of the two sets the rollout count. With --num-epoch
    # slime also saves at every pass over the data (num_rollout_per_epoch, slime/ray/
    # placement_group.py:239-243, utils/misc.py:127-128), which this stand-in does not model.
    if getattr(args, "num_rollout", None) is None:
        if getattr(args, "num_epoch", None) is None:
            sys.exit("fake slime: AssertionError: num_epoch is not set, but num_rollout is not set, please set "
                     "--num-rollout or --num-epoch")
        print("fake slime: --num-epoch is not modelled (slime then also saves at every pass over the data, "
              "slime/utils/misc.py:127-128); the toolkit passes --num-rollout", file=sys.stderr)
        sys.exit(2)
    # store_false flags of slime's parser (slime/utils/arguments.py:1004-1015)
    args.rewards_normalization = not values.get("disable_rewards_normalization", False)
    args.grpo_std_normalization = not values.get("disable_grpo_std_normalization", False)
    if getattr(args, "custom_config_path", None):
        import yaml

        for k, v in (yaml.safe_load(Path(args.custom_config_path).read_text()) or {}).items():
            setattr(args, k, v)  # what slime does with --custom-config-path
    resolve_eval(args)
    return args


def resolve_eval(args: Namespace) -> None:
    """slime's checks of its evaluation flags, in its words (slime/utils/arguments.py): the eval
    datasets from --eval-prompt-data as name/path pairs, one value read as `aime`'s path (1747-1754);
    --eval-interval refused without them (1840-1841) even when the eval function plays its own
    tasks; --eval-function-path defaulting to --rollout-function-path (1968-1969). --eval-config
    (an OmegaConf file), a custom eval log function and pass rates are not modelled: refused."""
    for name in ("eval_config", "custom_eval_rollout_log_function_path", "log_passrate"):
        if getattr(args, name):
            print(f"fake slime: --{name.replace('_', '-')} is not modelled by the stand-in (slime/utils/"
                  "arguments.py:1731-1746, observability/rollout_metrics.py:224-245); the toolkit passes none",
                  file=sys.stderr)
            sys.exit(2)
    values = args.eval_prompt_data
    values = [] if values is None else [values] if isinstance(values, str) else list(values)
    if len(values) == 1:
        values = ["aime", values[0]]
    if len(values) % 2:
        sys.exit("fake slime: ValueError: eval prompt data must be provided as name/path pairs.")
    args.eval_datasets = [{"name": values[i], "path": values[i + 1]} for i in range(0, len(values), 2)]
    args.eval_prompt_data = values or None
    if args.eval_interval is not None and not args.eval_datasets:
        sys.exit("fake slime: AssertionError: Evaluation datasets must be configured when eval_interval is set.")
    if args.eval_function_path is None:
        args.eval_function_path = args.rollout_function_path


def eval_log(rollout_id: int, args: Namespace, data: dict, extra_metrics: dict | None) -> dict:
    """What slime logs of an evaluation (observability/rollout_metrics.py:223-253): the function's
    metrics, then per dataset key the mean of its rewards -- divided by their count, so an empty
    list raises ZeroDivisionError in the RolloutManager as it does in slime -- and the truncated
    ratio when given; logged on eval/step, the rollout id (metric_utils.py:120-123). Per-sample
    metrics (a key's `samples`) are not modelled: refused."""
    log_dict = dict(extra_metrics or {})
    for key in data:
        rewards = data[key]["rewards"]
        log_dict[f"eval/{key}"] = sum(rewards) / len(rewards)
        if data[key].get("samples") is not None:
            raise NotImplementedError("fake slime: eval metrics from samples (compute_metrics_from_samples, "
                                      "rollout_metrics.py:233-234) are not modelled")
        if "truncated" in data[key]:
            truncated = data[key]["truncated"]
            log_dict[f"eval/{key}-truncated_ratio"] = sum(truncated) / len(truncated)
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] rollout_metrics.py:247 - eval {rollout_id}: {log_dict}",
          file=sys.stderr, flush=True)
    log_dict["eval/step"] = (rollout_id * args.rollout_batch_size * args.n_samples_per_prompt // args.global_batch_size
                             if args.wandb_always_use_train_step else rollout_id)
    return log_dict


def load_start(args: Namespace) -> int:
    """The first rollout id, after checking --load / --ref-load as Megatron would."""
    from megatron_layout import OPTIM_SHARD

    if args.load and (Path(args.load) / "latest_checkpointed_iteration.txt").is_file():
        text = (Path(args.load) / "latest_checkpointed_iteration.txt").read_text().strip()
        if text.isdigit():
            it = int(text)
            ckpt = Path(args.load) / f"iter_{it:07d}"
            if not (ckpt / ".metadata").is_file():
                sys.exit(f"fake slime: CheckpointingException: {ckpt} has no .metadata (incomplete save)")
            if not (ckpt / OPTIM_SHARD).is_file() and not args.no_load_optim:
                sys.exit(f"fake slime: KeyError: optimizer state missing in {ckpt} (saved with --no-save-optim; "
                         "load it with --no-load-optim)")
            log(f"loaded iteration {it} from {args.load}")
            return it + 1 if args.start_rollout_id is None else args.start_rollout_id
    ref = Path(args.ref_load or "")
    if (ref / "latest_checkpointed_iteration.txt").read_text().strip() != "release" or not (ref / "release").is_dir():
        sys.exit(f"fake slime: --ref-load {ref} is not a converted torch_dist model (no release/)")
    log(f"no checkpoint in --load; initial weights from --ref-load {ref}")
    return args.start_rollout_id or 0


def hold_before(rollout_id: int) -> None:
    """Test-only: FAKE_SLIME_HOLD_BEFORE=<id>:<file> waits before rollout <id> until <file> exists."""
    at, _, gate = os.environ.get("FAKE_SLIME_HOLD_BEFORE", "").partition(":")
    if at and int(at) == rollout_id:
        log(f"holding before rollout {rollout_id} until {gate} exists (FAKE_SLIME_HOLD_BEFORE)")
        while not Path(gate).exists():
            time.sleep(0.1)


def place(args: Namespace):
    import ray
    from ray.util.placement_group import placement_group

    ray.init(address="auto", logging_level="WARNING")
    gpus = args.actor_num_nodes * args.actor_num_gpus_per_node + int(os.environ.get("FAKE_SLIME_EXTRA_GPUS", "0"))
    pg = placement_group([{"GPU": 1, "CPU": 0}] * gpus, strategy="PACK")
    while not pg.wait(timeout_seconds=1):
        log(f"Waiting for placement group of {gpus} GPUs to be ready ({ray.available_resources().get('GPU', 0):g} "
            "GPUs free)")
        time.sleep(4)
    log(f"placement group of {gpus} GPUs ready")
    return pg


# --- Across nodes (actor_num_nodes > 1) ------------------------------------------------------
# slime 624b824: an InfoActor per bundle reports (node IP, GPU id) (slime/ray/placement_group.py:15-18,
# 69-82), bundles are sorted by node IP then GPU id (:21-39, 84-88), and rank r's training actor goes
# to the r-th sorted bundle (slime/ray/actor_group.py:111-122) with the environment of that node's
# raylet plus slime's runtime env (actor_group.py:64-71, 108-110: no address, no interface). Each
# rank here reports what it saw; the checks below fail where a real run would misroute or hang.

def _iface_addr(name: str) -> str | None:
    """The IPv4 address of interface `name` in this process's network namespace (SIOCGIFADDR)."""
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(raw[20:24])


PROXY_VARS = tuple(v for n in ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy") for v in (n, n.upper()))


def seen_here() -> dict:
    """What a slime process on this node reads: its node's IP as Ray knows it, SLIME_HOST_IP (slime/
    utils/http_utils.py:42-46), the socket interfaces NCCL and Gloo read, and any proxy variable."""
    import ray

    env = os.environ
    nccl = env.get("NCCL_SOCKET_IFNAME", "")
    return {"node_ip": ray.util.get_node_ip_address(), "node_id": ray.get_runtime_context().get_node_id(),
            "SLIME_HOST_IP": env.get("SLIME_HOST_IP", ""), "NCCL_SOCKET_IFNAME": nccl,
            "GLOO_SOCKET_IFNAME": env.get("GLOO_SOCKET_IFNAME", ""),
            "nccl_iface_addr": _iface_addr(nccl.lstrip("=")) if nccl else None,
            "gloo_iface_addr": _iface_addr(env["GLOO_SOCKET_IFNAME"]) if env.get("GLOO_SOCKET_IFNAME") else None,
            "proxies": sorted(k for k in PROXY_VARS if env.get(k))}


def check_seen(who: str, seen: dict) -> None:
    """Stricter than slime, which would start and then misroute or hang: every value per node right."""
    ip = seen["node_ip"]
    if seen["SLIME_HOST_IP"] != ip:
        sys.exit(f"fake slime: {who} on node {ip} sees SLIME_HOST_IP={seen['SLIME_HOST_IP']!r}: slime's router and "
                 "engines there would advertise another address (slime/utils/http_utils.py:42-46)")
    for var, addr in (("NCCL_SOCKET_IFNAME", seen["nccl_iface_addr"]), ("GLOO_SOCKET_IFNAME", seen["gloo_iface_addr"])):
        if not seen[var] or addr != ip:
            sys.exit(f"fake slime: {who} on node {ip} sees {var}={seen[var]!r} (address {addr}): NCCL/Gloo there "
                     f"would pick another NIC than the one carrying {ip}")
    if seen["proxies"]:
        sys.exit(f"fake slime: {who} on node {ip} sees {', '.join(seen['proxies'])}: the SGLang router would send "
                 "its calls to the engines through that proxy")


class InfoActor:
    def get_ip_and_gpu_id(self):
        import ray

        return ray.util.get_node_ip_address(), ray.get_gpu_ids()[0]


class TrainActor:
    """A training rank's stand-in: no Megatron, only what it would see on its node. It lives for the
    whole job, as slime's MegatronTrainRayActor does, and is called every step (train, then the
    weight update: slime train.py:69, 85 -> ray/actor_group.py:131-149, 162-169), so a rank on a lost
    node fails the job at its next step (Ray: "The actor died because its node has died")."""

    def seen(self) -> dict:
        return seen_here()

    def train(self, rollout_id: int) -> int:
        return rollout_id

    def update_weights(self) -> None:
        return None

    def save_model(self, rollout_id: int) -> int:
        # slime's save is every rank's (train.py:76 -> ray/actor_group.py:151-153, a ray.get over all
        # ranks' save_model): a rank on a lost node fails the save, and the job, as there
        return rollout_id


def _sort_key(info):
    _, ip, gpu = info
    return list(map(int, ip.split("."))), int(gpu)


def place_ranks(args: Namespace, pg) -> list:
    """slime's placement across nodes; each rank's view, checked and logged. Returns the rank
    actors, which the job holds to its end (slime/ray/actor_group.py:115-129)."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    n = args.actor_num_nodes * args.actor_num_gpus_per_node
    infos = [ray.remote(num_gpus=1, num_cpus=0)(InfoActor).options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg, placement_group_bundle_index=i)).remote() for i in range(n)]
    got = ray.get([a.get_ip_and_gpu_id.remote() for a in infos])
    for a in infos:
        ray.kill(a)
    order = [i for i, _, _ in sorted(((i, ip, gpu) for i, (ip, gpu) in enumerate(got)), key=_sort_key)]
    per_node: dict[str, int] = {}
    for ip, _ in got:
        per_node[ip] = per_node.get(ip, 0) + 1
    if len(per_node) != args.actor_num_nodes or set(per_node.values()) != {args.actor_num_gpus_per_node}:
        sys.exit(f"fake slime: placement put {per_node} GPU bundles per node; --actor-num-nodes "
                 f"{args.actor_num_nodes} x --actor-num-gpus-per-node {args.actor_num_gpus_per_node} expected")
    if args.num_gpus_per_node != args.actor_num_gpus_per_node:  # slime/ray/rollout.py:843, 853: engines per node
        sys.exit(f"fake slime: --num-gpus-per-node {args.num_gpus_per_node} but {args.actor_num_gpus_per_node} GPUs "
                 "per node: slime would lay the rollout engines out on the wrong nodes")
    actor = ray.remote(num_gpus=0.4, num_cpus=0)(TrainActor)
    ranks = [actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg, placement_group_bundle_index=order[r])).remote() for r in range(n)]
    seen = ray.get([a.seen.remote() for a in ranks])
    for r, s in enumerate(seen):
        log(f"rank {r} on {s['node_ip']}: SLIME_HOST_IP={s['SLIME_HOST_IP']} NCCL_SOCKET_IFNAME={s['NCCL_SOCKET_IFNAME']} "
            f"GLOO_SOCKET_IFNAME={s['GLOO_SOCKET_IFNAME']} proxies={','.join(s['proxies']) or 'none'}")
        check_seen(f"rank {r}", s)
    return ranks


def rollout_manager_options(args: Namespace, start: int) -> dict:
    """slime creates the RolloutManager with num_cpus=1 and no scheduling strategy (slime/ray/
    placement_group.py:230-237): Ray may put it on any node. Test-only pins, so that a rehearsal of
    two nodes always exercises one path: FAKE_SLIME_ROLLOUT_NODE=worker pins it to a worker (the
    plugin plays away from ShopSimulator's node); =worker-then-head pins a job that starts at rollout
    0 to a worker and a job resumed from a checkpoint to the head, so that a worker lost then holds
    only training ranks."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    opts = {"num_cpus": 1, "num_gpus": 0}
    pin = os.environ.get("FAKE_SLIME_ROLLOUT_NODE", "")
    if pin == "worker-then-head":
        pin = "worker" if start == 0 else "head"
    if pin in ("worker", "head"):
        nodes = [n["NodeID"] for n in ray.nodes()
                 if n["Alive"] and ("node:__internal_head__" in n["Resources"]) == (pin == "head")]
        if not nodes:
            sys.exit(f"fake slime: FAKE_SLIME_ROLLOUT_NODE pins the RolloutManager to a {pin} but the cluster has none")
        opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(nodes[0], soft=False)
    return opts


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In a child: end when the process that started it ends (a Ray actor is SIGKILLed at job end)."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _serve(argv: list[str], host: str = "127.0.0.1") -> str:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, *argv, "--host", host, "--port", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    _children.append(proc)
    url = f"http://{host}:{port}"
    import urllib.request

    for _ in range(400):
        if proc.poll() is not None:
            sys.exit(f"fake slime: engine {argv[0]} exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            return url
        except OSError:
            time.sleep(0.05)
    sys.exit(f"fake slime: engine {argv[0]} did not answer /health")


def start_engines(args: Namespace, iteration: int | None, host: str = "127.0.0.1") -> None:
    import tempfile

    from megatron_layout import learned_policy

    spec_file = Path(args.hf_checkpoint) / "fake_policy.json"
    spec = json.loads(spec_file.read_text(encoding="utf-8")) if spec_file.is_file() else {}
    # The engine reads its policy once, before it answers /health: the scratch goes as soon as it
    # answers, so a stub killed later (the fault tests SIGKILL it) leaves nothing in the temp dir.
    scratch = Path(tempfile.mkdtemp(prefix="fake-slime-"))
    try:
        policy = scratch / "policy.json"
        policy.write_text(json.dumps(learned_policy(spec, iteration), ensure_ascii=False), encoding="utf-8")
        engine = _serve([str(FAKES / "fake_sglang.py"), "--model-path", args.hf_checkpoint, "--tp-size", "1",
                         "--context-length", str(args.sglang_context_length), "--fake-policy", str(policy),
                         "--fake-sampling", "episode"], host)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    router = _serve([str(FAKES / "fake_router.py"), "--worker", engine], host)
    args.sglang_router_ip, port = router.removeprefix("http://").split(":")
    args.sglang_router_port = int(port)


def stop_engines(*_):
    for p in _children:
        if p.poll() is None:
            p.terminate()
    for p in _children:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()


def check_samples(groups: list, n: int) -> list:
    samples = [s for g in groups for s in g]
    for s in samples:
        k = s.response_length
        if not (len(s.loss_mask) == k == len(s.rollout_log_probs) and len(s.tokens) > k >= 1):
            sys.exit(f"fake slime: sample {s.index}: response_length {k}, loss_mask {len(s.loss_mask)}, "
                     f"rollout_log_probs {len(s.rollout_log_probs)}, tokens {len(s.tokens)} do not line up")
        if not isinstance(s.reward, float):
            sys.exit(f"fake slime: sample {s.index} has no float reward")
    if any(len(g) != n for g in groups):
        sys.exit("fake slime: a group does not hold --n-samples-per-prompt samples")
    return samples


def maybe_crash(rollout_id: int) -> None:
    at = os.environ.get("FAKE_SLIME_CRASH_AT")
    if at is None or int(at) != rollout_id:
        return
    once = os.environ.get("FAKE_SLIME_CRASH_ONCE")
    if once and Path(once).exists():
        return
    if once:
        Path(once).write_text(f"crashed at rollout {rollout_id}\n")
    print(CRASHES[os.environ.get("FAKE_SLIME_CRASH_KIND", "nccl")], file=sys.stderr, flush=True)
    os._exit(1)


def wandb_key(who: str) -> None:
    """Where wandb finds its API key in this process, said in the job's log (never the key): slime
    passes none (no --wandb-key), so wandb.init looks in WANDB_API_KEY, then in the netrc file that
    NETRC names, else ~/.netrc, for the host of WANDB_BASE_URL (wandb 0.31.0
    sdk/lib/wbauth/authenticate.py:171-200, wbnetrc.py:194-216). Each process of slime that logs
    to W&B does: train.py (init_tracking), the RolloutManager and the Megatron actors
    (init_tracking(primary=False): slime/ray/rollout.py:402, backends/megatron_utils/actor.py:83).
    Online without a key, wandb.init fails -- so does the stand-in, before logging anything."""
    import netrc
    from urllib.parse import urlsplit

    if os.environ.get("WANDB_API_KEY"):
        found = "WANDB_API_KEY in its environment"
    else:
        path = Path(os.environ.get("NETRC") or "~/.netrc").expanduser()
        host = urlsplit(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").netloc
        try:
            entry = netrc.netrc(str(path)).authenticators(host) if path.is_file() else None
        except (OSError, netrc.NetrcParseError):
            entry = None
        found = (f"the netrc file {'NETRC names' if os.environ.get('NETRC') else '~/.netrc'} (machine {host})"
                 if entry and entry[2] else None)
    if found is None and os.environ.get("WANDB_MODE") != "offline":
        print("wandb.errors.errors.UsageError: No API key configured. Use `wandb login` to log in.",
              file=sys.stderr, flush=True)
        os._exit(1)
    log(f"W&B key of {who}: {found or 'none (offline: none needed)'}")


def wandb_run(args: Namespace):
    if not args.use_wandb:
        return None
    import wandb

    wandb_key("train.py")

    config = {k: v for k, v in sorted(vars(args).items()) if isinstance(v, (str, int, float, bool, type(None)))}
    run = wandb.init(project=args.wandb_project, group=args.wandb_group, name=args.wandb_group,
                     dir=args.wandb_dir, job_type="train", config=config)
    run.define_metric("rollout/step")
    run.define_metric("rollout/*", step_metric="rollout/step")
    run.define_metric("train/step")
    run.define_metric("train/*", step_metric="train/step")
    run.define_metric("eval/step")  # slime/observability/wandb_utils.py:174-175
    run.define_metric("eval/*", step_metric="eval/step")
    return run


class RolloutManager:
    """slime's RolloutManager (slime/ray/rollout.py:366-551), a Ray actor with num_cpus=1
    (slime/ray/placement_group.py:230-237): the data source and the rollout function live in it,
    so the plugin runs in this actor's process, not in the driver -- killed by Ray when the job's
    driver exits. Under --colocate it releases the engines' memory after creation and after every
    rollout, and resumes it before the next (train.py:32-33,55-56,83-88)."""

    def __init__(self, args: Namespace, engines_from: int | None = None):
        sys.path.insert(0, str(HERE))  # as in the driver: the slime stand-in package
        from slime.backends.sglang_utils.sglang_engine import SGLangEngine
        from slime.rollout.data_source import RolloutDataSourceWithBuffer
        from slime.utils.misc import load_function

        if args.actor_num_nodes > 1:
            # Across nodes the router starts here, on this actor's node, at get_host_info()[1] --
            # SLIME_HOST_IP first (slime/ray/rollout.py:926, 939; http_utils.py:42-46) -- and the
            # plugin reaches it there: the engines of this stand-in start beside it.
            self.seen = seen_here()
            log(f"RolloutManager on {self.seen['node_ip']}: SLIME_HOST_IP={self.seen['SLIME_HOST_IP']} "
                f"proxies={','.join(self.seen['proxies']) or 'none'}")
            check_seen("the RolloutManager", self.seen)
            # this file as a module of the actor's process: its engine list is the actor's own (the
            # driver's, pickled with this class by value, holds the driver's processes)
            import importlib.util

            spec = importlib.util.spec_from_file_location("fake_slime_train", HERE / "train.py")
            here = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(here)
            here.start_engines(args, engines_from, host=self.seen["SLIME_HOST_IP"])
            self._engines = here  # kept: its processes die with this actor (PR_SET_PDEATHSIG)
        self.args = args
        self.data_source = RolloutDataSourceWithBuffer(args)
        self.generate_rollout = load_function(args.rollout_function_path)
        self.eval_generate_rollout = load_function(args.eval_function_path)  # slime/ray/rollout.py:387
        self.engine = SGLangEngine(f"http://{args.sglang_router_ip}:{args.sglang_router_port}")
        if args.colocate:
            self.engine.release_memory_occupation()
        if args.use_wandb:  # slime/ray/rollout.py:402: init_tracking(args, primary=False)
            wandb_key("the RolloutManager")

    def load(self, rollout_id: int) -> None:
        self.data_source.load(rollout_id)

    def save(self, rollout_id: int) -> None:
        self.data_source.save(rollout_id)

    def generate(self, rollout_id: int):
        from slime.ray.train_data import advantages, convert_samples_to_train_data
        from slime.rollout.base_types import call_rollout_fn
        from slime.rollout.sample_hooks import set_current_rollout_id

        set_current_rollout_id(rollout_id)
        out = call_rollout_fn(self.generate_rollout, self.args, rollout_id, self.data_source, evaluation=False)
        # slime/ray/rollout.py:510: the samples become train data in this actor (rewards
        # post-processed, removed samples' loss masks zeroed); the advantage follows on the actor side.
        advantages(self.args, convert_samples_to_train_data(self.args, [s for g in out.samples for s in g]))
        # printed in this actor, so Ray forwards it to the driver's log with its "(RolloutManager pid=..)"
        print(slime_perf_line("rollout_metrics.py:268", rollout_id, {"perf/rollout_time": 0.0}), file=sys.stderr,
              flush=True)
        return out.samples, out.metrics

    def eval(self, rollout_id: int) -> dict | None:
        """slime/ray/rollout.py:513-526: nothing under --debug-train-only; else the eval function
        through call_rollout_fn(..., evaluation=True), its result logged as slime logs it (eval_log,
        returned for the driver's W&B run: this stand-in logs from its driver)."""
        from slime.rollout.base_types import call_rollout_fn
        from slime.rollout.sample_hooks import set_current_rollout_id

        if self.args.debug_train_only:
            return None
        set_current_rollout_id(rollout_id)
        out = call_rollout_fn(self.eval_generate_rollout, self.args, rollout_id, self.data_source, evaluation=True)
        return eval_log(rollout_id, self.args, out.data, out.metrics)

    def node(self) -> str:
        return seen_here()["node_ip"]

    def sync_weights(self, rollout_id: int) -> None:
        """The weight sync's effect on the engines (train.py:85, actor.update_weights): from now on
        they answer with the policy learned through `rollout_id`, as the HF export of that iteration
        does (megatron_layout.learned_policy). The stand-in pushes it as a policy file through
        /update_weights_from_disk (slime's colocated sync passes tensors: not modelled)."""
        import shutil
        import tempfile
        import urllib.request

        if str(FAKES) not in sys.path:  # (this actor's process: the driver's path is not its own)
            sys.path.insert(0, str(FAKES))
        from megatron_layout import learned_policy

        spec_file = Path(self.args.hf_checkpoint) / "fake_policy.json"
        if not spec_file.is_file():
            return
        scratch = Path(tempfile.mkdtemp(prefix="fake-slime-sync-"))
        try:
            spec = learned_policy(json.loads(spec_file.read_text(encoding="utf-8")), rollout_id)
            (scratch / "fake_policy.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
            req = urllib.request.Request(self.engine.url + "/update_weights_from_disk", method="POST",
                                         data=json.dumps({"model_path": str(scratch)}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as resp:
                if not json.loads(resp.read()).get("success"):
                    raise RuntimeError(f"fake slime: the weight sync after rollout {rollout_id} failed")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def offload(self) -> None:
        self.engine.release_memory_occupation()

    def onload(self) -> None:
        self.engine.resume_memory_occupation()


def maybe_crash_mid_step(rollout_id: int, pending) -> None:
    """FAKE_SLIME_CRASH_AFTER_S=<s> (with FAKE_SLIME_CRASH_AT=<rollout id>): the driver dies <s> s
    into that rollout while the actor is still playing it (an NCCL watchdog on another rank)."""
    import ray

    after = os.environ.get("FAKE_SLIME_CRASH_AFTER_S")
    if not after:
        return
    done, _ = ray.wait([pending], timeout=float(after))
    if not done:
        maybe_crash(rollout_id)


def maybe_hold(rollout_id: int) -> None:
    """FAKE_SLIME_HOLD_AT=<rollout id>[,<rollout id>...] with FAKE_SLIME_HOLD_GATE=<file> (test-only):
    once one of those steps' training is done, write <file>-<rollout id>.held and wait until
    <file>-<rollout id> exists -- a test does what it means to do to the running job there (kill a
    process of the cluster), then creates that file; a later job finds it and goes on. Several steps:
    several faults played in one run, each at its own step."""
    base = os.environ.get("FAKE_SLIME_HOLD_GATE")
    ids = os.environ.get("FAKE_SLIME_HOLD_AT", "").split(",")
    gate = f"{base}-{rollout_id}"
    if str(rollout_id) not in ids or not base or Path(gate).exists():
        return
    Path(gate + ".held").write_text(f"held after rollout {rollout_id} (pid {os.getpid()})\n")
    log(f"held after rollout {rollout_id} until {gate} exists")
    while not Path(gate).exists():
        time.sleep(0.05)


def eval_only(args: Namespace) -> bool:
    """slime train.py:35-36: with --num-rollout 0 and an eval interval, one evaluation and no training."""
    return args.num_rollout == 0 and args.eval_interval is not None


def eval_before_train(args: Namespace, rollout_id: int) -> bool:
    """slime train.py:50-51: an evaluation of the loaded weights before rollout 0 only (a resumed job,
    starting later, never plays it), unless --skip-eval-before-train."""
    return args.eval_interval is not None and rollout_id == 0 and not args.skip_eval_before_train


def main(argv: list[str]) -> int:
    import ray
    from megatron_layout import write_checkpoint, write_hf_export
    from modelled_wait import wait, wait_knob
    from slime.utils.misc import should_run_periodic_action

    args = parse(argv)
    args.fake_ordered = os.environ.get("FAKE_SLIME_ORDERED") == "1"  # see slime/rollout/sglang_rollout.py
    # Until placement: once `ray.init` (in place) runs, Ray's own SIGTERM handler replaces this
    # one, as in real slime: a stopped job then sees SystemExit(15) raised in the driver.
    signal.signal(signal.SIGTERM, lambda *_: (stop_engines(), os._exit(143)))
    start = load_start(args)
    pg = place(args)
    wait_knob("FAKE_SLIME_START_DELAY")
    ranks = []  # across nodes: the training ranks, held to the job's end
    if args.actor_num_nodes > 1:
        ranks = place_ranks(args, pg)  # the engines start inside the RolloutManager, on its node
    else:
        start_engines(args, start - 1 if start > 0 else None)
    manager = ray.remote(RolloutManager).options(**rollout_manager_options(args, start)).remote(
        args, start - 1 if start > 0 else None)
    if args.actor_num_nodes > 1:
        log(f"RolloutManager placed on {ray.get(manager.node.remote())}")
    if start > 0:
        ray.get(manager.load.remote(start - 1))  # slime/ray/placement_group.py:221-222
    if args.colocate:
        ray.get(manager.onload.remote())
    run = wandb_run(args)
    updates = args.rollout_batch_size * args.n_samples_per_prompt // args.global_batch_size
    delay = float(os.environ.get("FAKE_SLIME_STEP_DELAY", "0") or 0)

    def evaluate(rollout_id: int) -> None:  # rollout_manager.eval; slime logs eval/* from the manager
        logged = ray.get(manager.eval.remote(rollout_id))
        if logged is not None and run is not None:
            run.log(logged)

    try:
        if eval_only(args):
            evaluate(0)
        for rollout_id in range(start, args.num_rollout):
            if eval_before_train(args, rollout_id):
                evaluate(rollout_id)
            hold_before(rollout_id)
            if not os.environ.get("FAKE_SLIME_CRASH_AFTER_S"):
                maybe_crash(rollout_id)
            pending = manager.generate.remote(rollout_id)
            maybe_crash_mid_step(rollout_id, pending)
            groups, metrics = ray.get(pending)
            if args.colocate:
                ray.get(manager.offload.remote())
            samples = check_samples(groups, args.n_samples_per_prompt)
            ray.get([a.train.remote(rollout_id) for a in ranks])  # slime train.py:69
            rewards = [float(s.reward) for s in samples]
            if run is not None:
                run.log({"rollout/step": rollout_id, "rollout/raw_reward": sum(rewards) / len(rewards),
                         "rollout/response_len/mean": sum(s.response_length for s in samples) / len(samples),
                         **(metrics or {})})
                for k in range(updates):
                    run.log({"train/step": rollout_id * updates + k, "train/loss": 1.0 / (2 + rollout_id + k),
                             "train/grad_norm": 0.5 + 0.01 * k})
            log(f"rollout {rollout_id}: {len(samples)} samples, mean reward {sum(rewards) / len(rewards):.3f}")
            wait("FAKE_SLIME_STEP_DELAY", delay)  # the step's training
            # The main rank's line once the rollout's training is over (actor.py:564), which Ray
            # forwards from the Megatron actor: this stand-in trains in the driver, so it writes
            # the forwarded form itself.
            print(f"(MegatronTrainRayActor pid={os.getpid()}) "
                  + slime_perf_line("train_metric_utils.py:401", rollout_id, {"perf/actor_train_time": delay}),
                  flush=True)
            maybe_hold(rollout_id)
            if should_run_periodic_action(rollout_id, args.save_interval, None, args.num_rollout):
                # slime's order (train.py:71-80): the Megatron save, its tracker last
                # (megatron_layout.write_checkpoint), then --save-hf (actor.py:589-590), then the
                # data source's state (RolloutManager.save). FAKE_SLIME_KILL_BEFORE_DATA_STATE=<id>
                # (test-only) dies in between, as a stop at that moment would.
                ray.get([a.save_model.remote(rollout_id) for a in ranks])  # every rank saves its shard
                wait_knob("FAKE_SLIME_SAVE_DELAY")  # the save's writes, before its tracker
                write_checkpoint(Path(args.save), rollout_id, optim=not args.no_save_optim, state=False)
                if args.save_hf:
                    wait_knob("FAKE_SLIME_SAVE_HF_DELAY")  # the GPUs' HF write
                    write_hf_export(Path(args.save_hf.format(rollout_id=rollout_id)), Path(args.hf_checkpoint),
                                    rollout_id)
                if os.environ.get("FAKE_SLIME_KILL_BEFORE_DATA_STATE") == str(rollout_id):
                    print(f"fake slime: killed after saving iteration {rollout_id}, before its data state",
                          file=sys.stderr, flush=True)
                    os._exit(137)
                ray.get(manager.save.remote(rollout_id))
                log(f"saved iteration {rollout_id} to {args.save}")
            if args.colocate:
                ray.get(manager.onload.remote())
            ray.get([a.update_weights.remote() for a in ranks])  # slime train.py:85
            ray.get(manager.sync_weights.remote(rollout_id))  # ...whose effect: the engines' new policy
            if should_run_periodic_action(rollout_id, args.eval_interval):  # train.py:90-91: after the sync
                evaluate(rollout_id)
    finally:
        stop_engines()
        if run is not None:
            run.finish()
    wait_knob("FAKE_SLIME_EXIT_DELAY")
    log(f"done: rollouts {start}..{args.num_rollout - 1}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
