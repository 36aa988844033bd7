"""Every knob of env/defaults.env as a typed, read-only attribute of the resolved Config.

GENERATED from env/defaults.env by `make readme-knobs` (pyhelpers/config/generate.py): do not
edit; change the knob's lines in env/defaults.env and regenerate. Each value is converted once,
on first read, by the Config's converters (pyhelpers/config/load.py), which name the knob and
its fix when a value does not convert; `make check` has validated every value before a run
starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


class Knobs:
    """The knobs, by section. Config (load.py) supplies the raw values and the converters."""

    def _raw(self, name: str) -> str:
        raise NotImplementedError

    def _int(self, name: str) -> int:
        raise NotImplementedError

    def _float(self, name: str) -> float:
        raise NotImplementedError

    def _flag(self, name: str) -> bool:
        raise NotImplementedError

    def _path(self, name: str) -> Path:
        raise NotImplementedError

    def _path_or_none(self, name: str) -> Path | None:
        raise NotImplementedError

    # --- Run ---

    @cached_property
    def RUN_NAME(self) -> str:
        """Name of the run: its state lives in RUNS_DIR/<RUN_NAME>, its weights in
        TRAIN_SAVE/<RUN_NAME>. Empty = WANDB_GROUP. Letters, digits, '.', '_' and '-' only. (name or
        empty; default: (empty))
        """
        return self._raw("RUN_NAME")

    @cached_property
    def ROUNDS(self) -> int:
        """Outer rounds of one run (M8). Each round = STEPS_PER_ROUND RL steps, then val, gate, inject.
        (int >= 1; default: 5)
        """
        return self._int("ROUNDS")

    @cached_property
    def STEPS_PER_ROUND(self) -> int:
        """slime RL steps (rollouts) per round (M9). Also slime's --save-interval. (int >= 1; default:
        20)
        """
        return self._int("STEPS_PER_ROUND")

    @cached_property
    def ONE_JOB(self) -> bool:
        """1: one slime job trains every round and evaluates each inside the job, on its own engines,
        through the plugin's eval hook; the HF export converts on the CPU meanwhile
        (docs/one-job-mode.md). Needs SAVE_HF=0. 0: the earlier order, a job per round, then an eval
        server on the round's export. (flag 0|1; default: 1)
        """
        return self._flag("ONE_JOB")

    @cached_property
    def BANK_WAIT_TIMEOUT(self) -> float:
        """One-job mode: seconds a round's first rollout waits for the bank inject writes after the
        previous round's evaluation (the job holds its GPUs meanwhile; docs/one-job-mode.md). (float
        >= 0; default: 600)
        """
        return self._float("BANK_WAIT_TIMEOUT")

    @cached_property
    def RUNS_DIR(self) -> Path:
        """Run-state directory (relative paths are relative to the project). Must not be on
        SYSTEM_DISK. (path; default: runs)
        """
        return self._path("RUNS_DIR")

    # --- GPUs and parallelism ---

    @cached_property
    def NUM_GPUS(self) -> int:
        """GPUs the run uses: the first NUM_GPUS ids (CUDA_VISIBLE_DEVICES=0..NUM_GPUS-1) (M1). (int >=
        1; default: 4)
        """
        return self._int("NUM_GPUS")

    @cached_property
    def TP_SIZE(self) -> int:
        """Megatron tensor-parallel size for training; NUM_GPUS must be divisible by it (M7, M15). (int
        >= 1; default: 2)
        """
        return self._int("TP_SIZE")

    @cached_property
    def GPU_MEMORY_GB(self) -> float:
        """Memory of one training GPU, GiB as nvidia-smi reports it (MiB / 1024); A800 80GB = 80. Used
        by `pyhelpers plan memory` (docs/oom_qwen35_4b.md). (float > 0; default: 80)
        """
        return self._float("GPU_MEMORY_GB")

    @cached_property
    def MEMORY_WARN_FRACTION(self) -> float:
        """`plan memory` warns when its per-GPU peak estimate exceeds this fraction of GPU_MEMORY_GB
        (0..1]. (float (0, 1]; default: 0.9)
        """
        return self._float("MEMORY_WARN_FRACTION")

    # --- Batch (M10) ---

    @cached_property
    def OVER_SAMPLING_GROUPS(self) -> int:
        """Groups (prompts) submitted per step before dynamic-sampling filtering
        (--over-sampling-batch-size). (int >= 1; default: 32)
        """
        return self._int("OVER_SAMPLING_GROUPS")

    @cached_property
    def ROLLOUT_GROUPS(self) -> int:
        """Groups kept per step after filtering (--rollout-batch-size). (int >= 1; default: 16)"""
        return self._int("ROLLOUT_GROUPS")

    @cached_property
    def DRAW_LIMIT_FACTOR(self) -> int:
        """A step draws at most DRAW_LIMIT_FACTOR x ROLLOUT_GROUPS groups; past that, groups with equal
        rewards are kept instead of drawing more (docs/training.md, "Dynamic sampling"). At least
        OVER_SAMPLING_GROUPS / ROLLOUT_GROUPS. (int >= 1; default: 4)
        """
        return self._int("DRAW_LIMIT_FACTOR")

    @cached_property
    def SAMPLES_PER_GROUP(self) -> int:
        """Episodes per group (--n-samples-per-prompt). (int >= 1; default: 8)"""
        return self._int("SAMPLES_PER_GROUP")

    @cached_property
    def GLOBAL_BATCH_SIZE(self) -> int:
        """Episodes per optimizer update (--global-batch-size); ROLLOUT_GROUPS*SAMPLES_PER_GROUP must
        be a multiple. (int >= 1; default: 64)
        """
        return self._int("GLOBAL_BATCH_SIZE")

    # --- Lengths (M15) ---

    @cached_property
    def MAX_TOKENS_PER_GPU(self) -> int:
        """Training packing budget per GPU, tokens (--max-tokens-per-gpu). (int >= 1; default: 16384)"""
        return self._int("MAX_TOKENS_PER_GPU")

    @cached_property
    def ROLLOUT_MAX_CONTEXT_LEN(self) -> int:
        """One episode's total token cap (prompt + all turns), tokens. (int >= 1; default: 24576)"""
        return self._int("ROLLOUT_MAX_CONTEXT_LEN")

    @cached_property
    def ROLLOUT_MAX_RESPONSE_LEN(self) -> int:
        """One turn's generation cap, tokens (max_new_tokens); shared by training and that round's
        val/gate. (int >= 1; default: 4096)
        """
        return self._int("ROLLOUT_MAX_RESPONSE_LEN")

    @cached_property
    def MAX_TURNS(self) -> int:
        """Turns per episode before it is cut (ShopSimulator itself ends an episode after 42 messages).
        (int >= 1; default: 20)
        """
        return self._int("MAX_TURNS")

    # --- Rollouts and reward ---

    @cached_property
    def REWARD(self) -> str:
        """Training reward: strict (r_type·r_att·r_option·r_price) | loose (env reward) | success (all
        four parts = 1). (choice strict|loose|success; default: strict)
        """
        return self._raw("REWARD")

    @cached_property
    def RETRY_TRAINS(self) -> int:
        """Full-skill retries as training samples (off-policy; docs/skillbank.md): only 0 is supported,
        where retries go to the analyst only (1 is refused until the plugin supports it). (int [0,
        0]; default: 0)
        """
        return self._int("RETRY_TRAINS")

    @cached_property
    def SKILL_TOKEN_BUDGET(self) -> int:
        """Token budget of the skills block in a prompt. (int >= 1; default: 1024)"""
        return self._int("SKILL_TOKEN_BUDGET")

    @cached_property
    def SEED_BANK(self) -> Path | None:
        """Bank the first round starts from (a skillbank.json); empty = an empty bank. (path or empty;
        default: (empty))
        """
        return self._path_or_none("SEED_BANK")

    # --- ShopSimulator (M6) ---

    @cached_property
    def SHOPSIM_HOST(self) -> str:
        """Address the simulator binds: loopback (upstream binds 0.0.0.0; the launcher changes it). Any
        other address is refused unless SHOPSIM_EXPOSE_TO_NETWORK=1. (host; default: 127.0.0.1)
        """
        return self._raw("SHOPSIM_HOST")

    @cached_property
    def SHOPSIM_EXPOSE_TO_NETWORK(self) -> bool:
        """1 = let SHOPSIM_HOST be a non-loopback address on purpose. ShopSimulator has no
        authentication: anyone who reaches that address can create, reset and step its environments
        and read its tasks. (flag 0|1; default: 0)
        """
        return self._flag("SHOPSIM_EXPOSE_TO_NETWORK")

    @cached_property
    def SHOPSIM_PORT(self) -> int:
        """Port of the simulator's HTTP API (upstream hard-codes 5000; the launcher changes it). (int
        [1024, 65535]; default: 5700)
        """
        return self._int("SHOPSIM_PORT")

    @cached_property
    def SHOPSIM_SLOTS(self) -> int:
        """Environment slots in the simulator's pool (SHOPSIM_ENV_MAX_NUM). (int >= 1; default: 48)"""
        return self._int("SHOPSIM_SLOTS")

    @cached_property
    def SHOPSIM_EPISODE_CONCURRENCY(self) -> int:
        """Training episodes in flight; the spare slots (SHOPSIM_SLOTS minus this) serve full-skill
        retries. (int >= 1; default: 32)
        """
        return self._int("SHOPSIM_EPISODE_CONCURRENCY")

    @cached_property
    def SHOPSIM_SEED(self) -> int:
        """Fixed seed of prices and price limits: upstream re-randomises them at each start and draws
        each slot's own in turn; the launcher gives every slot the same world from this seed, so
        rounds and tasks stay comparable. (int [0, 4294967295]; default: 20260101)
        """
        return self._int("SHOPSIM_SEED")

    @cached_property
    def SHOPSIM_START_TIMEOUT(self) -> float:
        """Seconds to wait for the simulator to answer its no-slot probe after start (it builds every
        env first). (float > 0; default: 900)
        """
        return self._float("SHOPSIM_START_TIMEOUT")

    @cached_property
    def SHOPSIM_MAX_RESTARTS(self) -> int:
        """Restarts of a simulator that dies during a round before the round fails. (int >= 0; default:
        3)
        """
        return self._int("SHOPSIM_MAX_RESTARTS")

    @cached_property
    def SHOPSIM_RESET_RETRIES(self) -> int:
        """Times a reset waits for a free slot before answering "no slot" (pack_api's MAX_RETRIES).
        (int >= 0; default: 5)
        """
        return self._int("SHOPSIM_RESET_RETRIES")

    @cached_property
    def SHOPSIM_RESET_DELAY(self) -> float:
        """Seconds between those waits (pack_api's RETRY_DELAY_SECONDS); eval and training clients wait
        retries x delay + 30 s for a reset (training at least 90 s). (float >= 0; default: 5.0)
        """
        return self._float("SHOPSIM_RESET_DELAY")

    # --- Evaluation (M9, M13) ---

    @cached_property
    def EVAL_CONCURRENCY(self) -> int:
        """Episodes in flight during val and gate. (int >= 1; default: 32)"""
        return self._int("EVAL_CONCURRENCY")

    @cached_property
    def EVAL_PORT(self) -> int:
        """Port of the SGLang eval server (TP=1, DP=NUM_GPUS), bound to 127.0.0.1. (int [1024, 65535];
        default: 30000)
        """
        return self._int("EVAL_PORT")

    @cached_property
    def SGLANG_START_TIMEOUT(self) -> float:
        """Seconds to wait for the eval server's /health after start. (float > 0; default: 900)"""
        return self._float("SGLANG_START_TIMEOUT")

    @cached_property
    def BASELINE_VAL(self) -> bool:
        """1 = run the base model's bare val before round 0, as the baseline for later rounds. (flag
        0|1; default: 0)
        """
        return self._flag("BASELINE_VAL")

    @cached_property
    def EVAL_EPISODE_RETRIES(self) -> int:
        """Infra-error retries of one eval episode (ShopSimulator or server failures, never policy
        failures). (int >= 0; default: 3)
        """
        return self._int("EVAL_EPISODE_RETRIES")

    @cached_property
    def EVAL_MAX_INFRA_SHARE(self) -> float:
        """Largest share of a val/gate run's episodes that may end in infra errors (after retries);
        above it no summary is written and the stage fails (rerun with --resume: those episodes are
        played again). (float [0, 1]; default: 0.05)
        """
        return self._float("EVAL_MAX_INFRA_SHARE")

    # --- Gate (skillbank.md) ---

    @cached_property
    def GATE_PAIRS(self) -> int:
        """Foldover pairs (mask + complement) played per round. 256 detects about +-12 points at 80%
        power with 8 skills (docs/gate.md budget table); 64 detects only about +-25. (int >= 1;
        default: 256)
        """
        return self._int("GATE_PAIRS")

    @cached_property
    def GATE_ARM_EPISODES(self) -> int:
        """Episodes in each of the all-off and all-on arms (the additivity check). (int >= 0; default:
        32)
        """
        return self._int("GATE_ARM_EPISODES")

    @cached_property
    def GATE_SEED(self) -> int:
        """Seed of the random masks (recorded in the gate summary). (int [0, 4294967295]; default:
        1234)
        """
        return self._int("GATE_SEED")

    @cached_property
    def GATE_MAX_SKILLS(self) -> int:
        """Most skills tested in one round's gate. (int >= 1; default: 8)"""
        return self._int("GATE_MAX_SKILLS")

    @cached_property
    def GATE_FAILED_SHARE(self) -> float:
        """Share of the gate's task pool drawn from tasks the bare val failed (0..1). (float (0, 1);
        default: 0.7)
        """
        return self._float("GATE_FAILED_SHARE")

    @cached_property
    def GATE_ALPHA(self) -> float:
        """Family-wise error rate of the accept/reject decisions. (float (0, 1); default: 0.1)"""
        return self._float("GATE_ALPHA")

    @cached_property
    def GATE_MAX_ROUNDS(self) -> int:
        """Rounds a skill may stay under test before it is retired. (int >= 1; default: 3)"""
        return self._int("GATE_MAX_ROUNDS")

    @cached_property
    def BANK_MAX_ACTIVE(self) -> int:
        """Most active skills in a bank. (int >= 1; default: 24)"""
        return self._int("BANK_MAX_ACTIVE")

    @cached_property
    def SKILL_DUP_JACCARD(self) -> float:
        """Compile's near-duplicate threshold: word unigram+bigram Jaccard (0..1) at or above which a
        new skill is merged into an existing one (docs/skillbank.md says why 0.7). (float (0, 1];
        default: 0.7)
        """
        return self._float("SKILL_DUP_JACCARD")

    @cached_property
    def SKILL_MAX_TOKENS(self) -> int:
        """Longest skill line compile admits, tokens; longer proposals are recorded as rejected. (int
        >= 1; default: 160)
        """
        return self._int("SKILL_MAX_TOKENS")

    # --- Failure Analyst (M11) ---

    @cached_property
    def ANALYST_ENABLED(self) -> bool:
        """1 = run the analyst sidecar during training (needs DASHSCOPE_API_KEY in .env). (flag 0|1;
        default: 1)
        """
        return self._flag("ANALYST_ENABLED")

    @cached_property
    def ANALYST_BASE_URL(self) -> str:
        """OpenAI-compatible endpoint of the analyst model (Alibaba Cloud Bailian / DashScope). (url;
        default: https://dashscope.aliyuncs.com/compatible-mode/v1)
        """
        return self._raw("ANALYST_BASE_URL")

    @cached_property
    def ANALYST_MODEL(self) -> str:
        """Model name at that endpoint. (text; default: qwen-plus)"""
        return self._raw("ANALYST_MODEL")

    @cached_property
    def ANALYST_BATCH_SIZE(self) -> int:
        """Spool records per analyst request. (int >= 1; default: 8)"""
        return self._int("ANALYST_BATCH_SIZE")

    @cached_property
    def ANALYST_CONCURRENCY(self) -> int:
        """Analyst requests in flight at once, still started at most ANALYST_MAX_RPM a minute: the
        round's end waits for the drain (compile needs it) while the GPUs idle; one at a time falls
        behind when a step's failures take longer to analyse than the step takes. (int >= 1;
        default: 4)
        """
        return self._int("ANALYST_CONCURRENCY")

    @cached_property
    def ANALYST_MAX_RPM(self) -> float:
        """Spend cap: analyst requests per minute. (float > 0; default: 30)"""
        return self._float("ANALYST_MAX_RPM")

    @cached_property
    def ANALYST_MAX_CALLS(self) -> int:
        """Spend cap: analyst requests per round. (int >= 0; default: 200)"""
        return self._int("ANALYST_MAX_CALLS")

    @cached_property
    def ANALYST_TIMEOUT(self) -> float:
        """Seconds one request may take. (float > 0; default: 120)"""
        return self._float("ANALYST_TIMEOUT")

    @cached_property
    def ANALYST_DRAIN_TIMEOUT(self) -> float:
        """Seconds the analyst may spend on pending records at the end of a round. (float >= 0;
        default: 600)
        """
        return self._float("ANALYST_DRAIN_TIMEOUT")

    @cached_property
    def JIT_CACHE_ON_DATA_DISK(self) -> bool:
        """1: every GPU process of the run (slime's Megatron and engines, the eval server) keeps its
        compile/JIT caches (Triton, TorchInductor, FlashInfer, DeepGEMM, CUDA's) in
        TRAIN_SAVE/<RUN_NAME>/jit-cache on the data disk, so later starts reuse the kernels instead
        of compiling them on the GPUs again (also after a fresh container, or a migration to the
        same GPU and driver), and the small system disk does not fill with them; 0: each program's
        default under ~ or /tmp. (flag 0|1; default: 1)
        """
        return self._flag("JIT_CACHE_ON_DATA_DISK")

    @cached_property
    def VAL_BESIDE_COMPILE(self) -> bool:
        """1: the eval server starts and bare val plays while compile waits for the analyst's drain;
        the gate follows once compiled.json exists, so the GPUs play val instead of idling through
        the drain. 0: compile first, then evaluate. (flag 0|1; default: 1)
        """
        return self._flag("VAL_BESIDE_COMPILE")

    @cached_property
    def ANALYST_POLL_INTERVAL(self) -> float:
        """Seconds between scans of the round's spool/ while training runs (a decimal, so tests can go
        below 1). (float > 0; default: 10.0)
        """
        return self._float("ANALYST_POLL_INTERVAL")

    @cached_property
    def ANALYST_RETRIES(self) -> int:
        """Retries of one analyst request after a 429, 5xx, timeout or dropped connection. (int >= 0;
        default: 5)
        """
        return self._int("ANALYST_RETRIES")

    @cached_property
    def ANALYST_BACKOFF(self) -> float:
        """Retry wait, seconds: the first waits between half this and this (jitter), doubling per
        retry; a Retry-After header is the minimum. (float >= 0; default: 2.0)
        """
        return self._float("ANALYST_BACKOFF")

    @cached_property
    def ANALYST_BACKOFF_MAX(self) -> float:
        """Longest retry wait of our own backoff, seconds (a longer Retry-After is still honoured).
        (float >= 0; default: 60.0)
        """
        return self._float("ANALYST_BACKOFF_MAX")

    # --- Weights & Biases (M13, M17) ---

    @cached_property
    def WANDB_PROJECT(self) -> str:
        """W&B project of every run of this toolkit. (name; default: shopsim-rl)"""
        return self._raw("WANDB_PROJECT")

    @cached_property
    def WANDB_GROUP(self) -> str:
        """W&B group shared by slime, val, gate and analyst runs (M13). (name; default:
        qwen35-4b-train-100)
        """
        return self._raw("WANDB_GROUP")

    @cached_property
    def WANDB_MODE(self) -> str:
        """online | offline | disabled. offline needs no key; upload later with `make wandb-sync`.
        (choice online|offline|disabled; default: online)
        """
        return self._raw("WANDB_MODE")

    # --- Disks (M2, M3) ---

    @cached_property
    def SYSTEM_DISK(self) -> Path:
        """Mount point whose device must never hold weights or checkpoints (the ~8 GB conda system
        disk). (path; default: /)
        """
        return self._path("SYSTEM_DISK")

    @cached_property
    def DATA_DISK(self) -> Path:
        """Data disk root (AutoDL: /root/autodl-tmp). (path; default: /root/autodl-tmp)"""
        return self._path("DATA_DISK")

    @cached_property
    def TRAIN_SAVE(self) -> Path:
        """Megatron checkpoints and HF exports; TRAIN_SAVE/<RUN_NAME>. Must be on the data disk. (path;
        default: ${DATA_DISK}/train_save)
        """
        return self._path("TRAIN_SAVE")

    @cached_property
    def MODELS_DIR(self) -> Path:
        """Base models (HF and torch_dist). (path; default: ${DATA_DISK}/models)"""
        return self._path("MODELS_DIR")

    @cached_property
    def SAVE_OPTIM(self) -> bool:
        """1 = save optimizer state too (exact resume; ~59 GB per checkpoint). 0 = weights only (~8.4
        GB). (flag 0|1; default: 0)
        """
        return self._flag("SAVE_OPTIM")

    @cached_property
    def SAVE_HF(self) -> bool:
        """1 = slime also writes HF weights from the GPUs at its final save (--save-hf). For Qwen3.5
        that export lacks the visual tower and mtp.* (Megatron never holds them): the export stage
        completes it from HF_MODEL by hard links (same file system), checks every weight name and
        shape against HF_MODEL and flips `hf` without the converter; when anything differs it says
        why and converts. The save inside the job takes longer by one 8.4 GB write (not measured on
        GPUs here), so 0 stays the default. 0 = the CPU converter (CONVERT_TO_HF) exports after
        training. (flag 0|1; default: 0)
        """
        return self._flag("SAVE_HF")

    @cached_property
    def DISK_MARGIN_GB(self) -> float:
        """Free space kept in reserve on TRAIN_SAVE's disk beyond the computed peak, GB. (float >= 0;
        default: 4)
        """
        return self._float("DISK_MARGIN_GB")

    @cached_property
    def DISK_WATCH_INTERVAL(self) -> float:
        """Seconds between free-space checks while a round trains: below what the round's final save
        needs (checkpoint + DISK_MARGIN_GB), make status and a notification warn (Megatron saves
        inside the job, so the guard itself acts only at stage boundaries). (float > 0; default:
        60.0)
        """
        return self._float("DISK_WATCH_INTERVAL")

    # --- Migration (make migrate-pack / make migrate-machine) ---

    @cached_property
    def MIGRATE_DATA(self) -> bool:
        """1 = the pack carries DATA_DIR (the task files, M19); 0 = rebuild them on the new machine.
        (flag 0|1; default: 1)
        """
        return self._flag("MIGRATE_DATA")

    @cached_property
    def MIGRATE_MODELS(self) -> bool:
        """1 = the pack carries HF_MODEL and TORCH_DIST_MODEL too (~17 GB); 0 = the new machine has
        them (or downloads the HF weights and runs make convert-base). (flag 0|1; default: 0)
        """
        return self._flag("MIGRATE_MODELS")

    @cached_property
    def MIGRATE_BWLIMIT(self) -> int:
        """rsync bandwidth limit of make migrate-machine, KB/s (0 = none). (int >= 0; default: 0)"""
        return self._int("MIGRATE_BWLIMIT")

    # --- Model and data ---

    @cached_property
    def HF_MODEL(self) -> Path:
        """HF weights of the base policy (tokenizer, config, safetensors). (path; default:
        ${MODELS_DIR}/Qwen3.5-4B)
        """
        return self._path("HF_MODEL")

    @cached_property
    def TORCH_DIST_MODEL(self) -> Path:
        """The same model converted to Megatron torch_dist (slime --ref-load / first --load). (path;
        default: ${MODELS_DIR}/Qwen3.5-4B_torch_dist)
        """
        return self._path("TORCH_DIST_MODEL")

    @cached_property
    def DATA_DIR(self) -> Path:
        """Task files (JSONL, one task per line; `pyhelpers data build` makes them) (M19). (path;
        default: data)
        """
        return self._path("DATA_DIR")

    @cached_property
    def TRAIN_TASKS(self) -> Path:
        """Training tasks (JSONL). (path; default: ${DATA_DIR}/train.jsonl)"""
        return self._path("TRAIN_TASKS")

    @cached_property
    def VAL_TASKS(self) -> Path:
        """Validation tasks (JSONL), disjoint from training by task id. (path; default:
        ${DATA_DIR}/val.jsonl)
        """
        return self._path("VAL_TASKS")

    # --- External programs (point these at your own install; tests point them at stand-ins) ---

    @cached_property
    def CONDA_ROOT(self) -> Path:
        """Conda install whose etc/profile.d/conda.sh is sourced (M4). (path; default:
        /root/miniconda3)
        """
        return self._path("CONDA_ROOT")

    @cached_property
    def SLIME_ENV(self) -> str:
        """Conda env of training (slime, Megatron, SGLang); never modified by the toolkit (M5). (name;
        default: slime)
        """
        return self._raw("SLIME_ENV")

    @cached_property
    def SHOPSIM_ENV(self) -> str:
        """Conda env of ShopSimulator (M6). (name; default: shopsim)"""
        return self._raw("SHOPSIM_ENV")

    @cached_property
    def SLIME_DIR(self) -> Path:
        """slime checkout. (path; default: /root/slime)"""
        return self._path("SLIME_DIR")

    @cached_property
    def MEGATRON_DIR(self) -> Path:
        """Megatron-LM checkout (on the job's PYTHONPATH; the pip megatron-core lacks
        megatron.training). (path; default: /root/Megatron-LM)
        """
        return self._path("MEGATRON_DIR")

    @cached_property
    def SHOPSIM_DIR(self) -> Path:
        """ShopSimulator checkout (holds shop_env/shop_env/pack_api.py). (path; default:
        /root/ShopSimulator)
        """
        return self._path("SHOPSIM_DIR")

    @cached_property
    def MODEL_ARGS_SCRIPT(self) -> Path:
        """slime's model-args script for Qwen3.5-4B. (path; default:
        ${SLIME_DIR}/scripts/models/qwen3.5-4B.sh)
        """
        return self._path("MODEL_ARGS_SCRIPT")

    @cached_property
    def SLIME_TRAIN(self) -> Path:
        """slime's training entry point, run inside the Ray job. (path; default: ${SLIME_DIR}/train.py)"""
        return self._path("SLIME_TRAIN")

    @cached_property
    def CONVERT_TO_HF(self) -> Path:
        """torch_dist -> HF converter (runs on the CPU). (path; default:
        ${SLIME_DIR}/tools/convert_torch_dist_to_hf.py)
        """
        return self._path("CONVERT_TO_HF")

    @cached_property
    def CONVERT_TO_TORCH_DIST(self) -> Path:
        """HF -> torch_dist converter (needs the GPUs; `make convert-base`). (path; default:
        ${SLIME_DIR}/tools/convert_hf_to_torch_dist.py)
        """
        return self._path("CONVERT_TO_TORCH_DIST")

    @cached_property
    def SGLANG_LAUNCHER(self) -> str:
        """Command that starts an SGLang server (flags are appended). (command; default: python3 -m
        sglang.launch_server)
        """
        return self._raw("SGLANG_LAUNCHER")

    @cached_property
    def SHOPSIM_LAUNCHER(self) -> str:
        """Command that starts ShopSimulator with the pool size, port, host and seed above (empty = the
        project's). (command or empty; default: (empty))
        """
        return self._raw("SHOPSIM_LAUNCHER")

    @cached_property
    def NVIDIA_SMI(self) -> str:
        """nvidia-smi used by `make doctor` (GPU count, model, compute capability) and for
        NCCL_NVLS_ENABLE (topo -m). (command; default: nvidia-smi)
        """
        return self._raw("NVIDIA_SMI")

    @cached_property
    def CUOBJDUMP(self) -> str:
        """cuobjdump used by `make doctor` (which sm_XX TE and apex were built for). (command; default:
        cuobjdump)
        """
        return self._raw("CUOBJDUMP")

    # --- Doctor ---

    @cached_property
    def DOCTOR_PROFILE(self) -> str:
        """Checks `make doctor` runs: full (a GPU machine) | rehearse (a CPU machine: conda, versions,
        cuDNN, the flags against the installed parsers, GPUs, architecture and system disk become
        SKIP). `make doctor PROFILE=rehearse` picks it too. (choice full|rehearse; default: full)
        """
        return self._raw("DOCTOR_PROFILE")

    @cached_property
    def DOCTOR_SKIP(self) -> str:
        """Checks to report as SKIP, comma-separated names as printed by `make doctor` (e.g.
        arch,cudnn). (names or empty; default: (empty))
        """
        return self._raw("DOCTOR_SKIP")

    @cached_property
    def SLIME_LOCK(self) -> Path:
        """Version lock the slime env is checked against (M5; format described in the file). (path;
        default: env/slime.lock)
        """
        return self._path("SLIME_LOCK")

    # --- Ray ---

    @cached_property
    def RAY_TEMP_DIR(self) -> Path | None:
        """Ray's temp dir; Unix sockets go under it, so keep it short. Empty = /tmp/ray-<hash of the
        run>. (path or empty; default: (empty))
        """
        return self._path_or_none("RAY_TEMP_DIR")

    @cached_property
    def RAY_PORT(self) -> int:
        """Ray's GCS port and the first of its ten ports, all on 127.0.0.1: +1 client server, +2
        raylet, +3 object manager, +4/+5 dashboard agent HTTP/gRPC, +6 runtime-env agent, +7 metrics
        export, +8/+9 autoscaler/dashboard metrics (workers: kernel-chosen ports). A second run on
        this machine needs its own block of ten. (int [1024, 65526]; default: 6380)
        """
        return self._int("RAY_PORT")

    @cached_property
    def RAY_DASHBOARD_PORT(self) -> int:
        """Ray dashboard / job-API port, on 127.0.0.1; every call needs the run's token
        (runs/<RUN>/ray/auth-token; CVE-2023-48022). (int [1024, 65535]; default: 8265)
        """
        return self._int("RAY_DASHBOARD_PORT")

    @cached_property
    def JOB_START_TIMEOUT(self) -> float:
        """Seconds the slime job may take to start training (slime waits forever when GPUs are short).
        (float > 0; default: 1800)
        """
        return self._float("JOB_START_TIMEOUT")

    @cached_property
    def RAY_START_TIMEOUT(self) -> float:
        """Seconds the Ray head may take to answer on its dashboard and job agent after `ray start`
        (about 3 s here); the first job submission may wait as long again for the job agent. Also
        how long `ray start` (head and workers) waits for its new node to register, where Ray's own
        wait is 30 s. (float > 0; default: 120)
        """
        return self._float("RAY_START_TIMEOUT")

    @cached_property
    def RAY_UNREACHABLE_TIMEOUT(self) -> float:
        """Seconds the job API on the head may go unanswered while a job runs (or waits for its GPUs)
        before the head's Ray counts as lost (`ray-lost`: restarted, the run resumes from its last
        checkpoint); a head whose `ray start` ended or whose GCS port is closed counts at once.
        (float > 0; default: 120)
        """
        return self._float("RAY_UNREACHABLE_TIMEOUT")

    # --- Nodes (docs/multinode.md) ---

    @cached_property
    def NNODES(self) -> int:
        """Machines the run spans, each with NUM_GPUS GPUs: 1 = this machine only. Above 1 this machine
        is the head (`make train`) and NNODES-1 workers join it (`make join`), all sharing
        TRAIN_SAVE and RUNS_DIR. (int >= 1; default: 1)
        """
        return self._int("NNODES")

    @cached_property
    def NODE_ADDR(self) -> str:
        """This node's IP address on the network between the nodes (an address of this machine, not
        loopback). Ray's listeners bind it and 127.0.0.1 only. Required when NNODES > 1. (host or
        empty; default: (empty))
        """
        return self._raw("NODE_ADDR")

    @cached_property
    def HEAD_ADDR(self) -> str:
        """The head's NODE_ADDR: where `make join` on a worker finds the run's Ray head. (host or
        empty; default: (empty))
        """
        return self._raw("HEAD_ADDR")

    @cached_property
    def NET_IFACE(self) -> str:
        """The network interface that carries NODE_ADDR (`ip addr` lists them, e.g. eth0 or ib0): NCCL
        and Gloo use it (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME). Required when NNODES > 1. (name or
        empty; default: (empty))
        """
        return self._raw("NET_IFACE")

    @cached_property
    def RAY_TOKEN_FILE(self) -> Path | None:
        """A worker's copy of the head's runs/<RUN>/ray/auth-token (mode 0600), when its RUNS_DIR is
        not the head's; empty = the run dir's own token (RUNS_DIR shared). A path: the token never
        goes on a command line. (path or empty; default: (empty))
        """
        return self._path_or_none("RAY_TOKEN_FILE")

    @cached_property
    def JOIN_TIMEOUT(self) -> float:
        """Seconds the head waits for the NNODES-1 workers to join before it refuses, naming what is
        missing (and a resume, for a lost worker to rejoin). (float > 0; default: 600)
        """
        return self._float("JOIN_TIMEOUT")

    # --- Processes ---

    @cached_property
    def STOP_GRACE(self) -> float:
        """Seconds between TERM and KILL when a process group is stopped. (float >= 0; default: 20)"""
        return self._float("STOP_GRACE")

    @cached_property
    def READY_BACKOFF_MAX(self) -> float:
        """Longest pause between readiness probes, seconds (probes back off from 0.1 s to this). (float
        > 0; default: 5.0)
        """
        return self._float("READY_BACKOFF_MAX")

    # --- Self-healing and notifications ---

    @cached_property
    def MAX_RESTARTS(self) -> int:
        """Automatic restarts after a transient failure (NCCL, an engine or ShopSimulator dying, a node
        hiccup; the rules: README.md), per driver run. 0 = never restart. (int >= 0; default: 5)
        """
        return self._int("MAX_RESTARTS")

    @cached_property
    def MAX_RESTARTS_PER_STAGE(self) -> int:
        """Automatic restarts of one stage of one round. (int >= 0; default: 3)"""
        return self._int("MAX_RESTARTS_PER_STAGE")

    @cached_property
    def RESTART_BACKOFF(self) -> float:
        """Seconds before the first restart; doubles for each later one. (float >= 0; default: 30.0)"""
        return self._float("RESTART_BACKOFF")

    @cached_property
    def RESTART_BACKOFF_MAX(self) -> float:
        """Longest wait before a restart, seconds. (float >= 0; default: 600.0)"""
        return self._float("RESTART_BACKOFF_MAX")

    @cached_property
    def NOTIFY_FORMAT(self) -> str:
        """Body format of the notification webhook: generic / feishu / dingtalk / wecom / slack.
        (choice generic|feishu|dingtalk|wecom|slack; default: generic)
        """
        return self._raw("NOTIFY_FORMAT")

    @cached_property
    def NOTIFY_TIMEOUT(self) -> float:
        """Seconds one notification may take; a failing or hanging webhook never affects the run.
        (float > 0; default: 10.0)
        """
        return self._float("NOTIFY_TIMEOUT")

    # --- Secrets (set these in .env, never on a command line) ---

    @cached_property
    def WANDB_API_KEY(self) -> str:
        """W&B API key (or use WANDB_MODE=offline, or ~/.netrc from `wandb login`). (text or empty;
        default: (empty))
        """
        return self._raw("WANDB_API_KEY")

    @cached_property
    def DASHSCOPE_API_KEY(self) -> str:
        """Alibaba Cloud Bailian key for the Failure Analyst. (text or empty; default: (empty))"""
        return self._raw("DASHSCOPE_API_KEY")

    @cached_property
    def NOTIFY_WEBHOOK(self) -> str:
        """Webhook URL that receives run start, round done, restart, disk warning and end messages
        (format NOTIFY_FORMAT); empty = no notifications. It is a credential: keep it in .env. (url
        or empty; default: (empty))
        """
        return self._raw("NOTIFY_WEBHOOK")

    @cached_property
    def NOTIFY_SECRET(self) -> str:
        """Signing secret of a Feishu/Lark or DingTalk bot with "signature" security (optional). (text
        or empty; default: (empty))
        """
        return self._raw("NOTIFY_SECRET")

    @cached_property
    def SECRET_VARS(self) -> str:
        """Extra variable names to treat as secrets, comma-separated (names ending in _KEY, _TOKEN,
        _SECRET, _PASSWORD or _WEBHOOK always are). (names or empty; default: (empty))
        """
        return self._raw("SECRET_VARS")

    # --- Your own variables ---

    @cached_property
    def EXTRA_VARS(self) -> str:
        """Names in .env that are not knobs on purpose, comma-separated (say, a variable of your own
        that a hook reads). A .env name a typo away from a knob's (ROUDNS for ROUNDS) is refused
        unless listed here; names far from every knob (HTTPS_PROXY) need no listing. (names or
        empty; default: (empty))
        """
        return self._raw("EXTRA_VARS")


@dataclass(frozen=True)
class PluginKnobs:
    """The knobs the rollout plugin reads as themselves (`plugin` on their `#:` line): the fields
    PluginSettings (rollout/settings.py) inherits, each the YAML key shopsimrl_<field>. No default:
    the driver writes every one from the resolved Config."""

    steps_per_round: int  # STEPS_PER_ROUND
    bank_wait_timeout: float  # BANK_WAIT_TIMEOUT
    draw_limit_factor: int  # DRAW_LIMIT_FACTOR
    rollout_max_context_len: int  # ROLLOUT_MAX_CONTEXT_LEN
    rollout_max_response_len: int  # ROLLOUT_MAX_RESPONSE_LEN
    max_turns: int  # MAX_TURNS
    reward: str  # REWARD
    retry_trains: int  # RETRY_TRAINS
    skill_token_budget: int  # SKILL_TOKEN_BUDGET
    shopsim_slots: int  # SHOPSIM_SLOTS
    shopsim_episode_concurrency: int  # SHOPSIM_EPISODE_CONCURRENCY
    shopsim_start_timeout: float  # SHOPSIM_START_TIMEOUT
    eval_concurrency: int  # EVAL_CONCURRENCY
    eval_episode_retries: int  # EVAL_EPISODE_RETRIES
    eval_max_infra_share: float  # EVAL_MAX_INFRA_SHARE
    gate_pairs: int  # GATE_PAIRS
    gate_arm_episodes: int  # GATE_ARM_EPISODES
    gate_seed: int  # GATE_SEED
    gate_max_skills: int  # GATE_MAX_SKILLS
    gate_failed_share: float  # GATE_FAILED_SHARE
    gate_alpha: float  # GATE_ALPHA
    gate_max_rounds: int  # GATE_MAX_ROUNDS
    analyst_drain_timeout: float  # ANALYST_DRAIN_TIMEOUT


# The declarations themselves, as this generator parsed them, and the digest of the file it read:
# read_knobs (declarations.py) takes them from here while env/defaults.env still has that digest, so the
# processes of a run do not parse the file again (an edited file is parsed: digests differ).
SOURCE_SHA256 = 'd092424490209c1763d9afc6297d108fb5afc6aadcb996fa44511900560b407b'
# (name, default, doc, section, the type of the `#:` line or None, its facts, the menu's brief)
DECLARED: tuple[tuple[str, str, str, str, str | None, tuple[str, ...], str], ...] = (
    ('RUN_NAME', '', "Name of the run: its state lives in RUNS_DIR/<RUN_NAME>, its weights in TRAIN_SAVE/<RUN_NAME>. Empty = WANDB_GROUP. Letters, digits, '.', '_' and '-' only.", 'Run', 'name or empty', ('bash', 'fixed'), 'Name of the run: its state lives in RUNS_DIR/<RUN_NAME>, its weights in TRAIN_SAVE/<RUN_NAME>.'),
    ('ROUNDS', '5', 'Outer rounds of one run (M8). Each round = STEPS_PER_ROUND RL steps, then val, gate, inject.', 'Run', 'int >= 1', ('bash',), 'Outer rounds of one run (M8). Each round = STEPS_PER_ROUND RL steps, then val, gate, inject.'),
    ('STEPS_PER_ROUND', '20', "slime RL steps (rollouts) per round (M9). Also slime's --save-interval.", 'Run', 'int >= 1', ('bash', 'fixed', 'plugin'), "slime RL steps (rollouts) per round (M9). Also slime's --save-interval."),
    ('ONE_JOB', '1', "1: one slime job trains every round and evaluates each inside the job, on its own engines, through the plugin's eval hook; the HF export converts on the CPU meanwhile (docs/one-job-mode.md). Needs SAVE_HF=0. 0: the earlier order, a job per round, then an eval server on the round's export.", 'Run', 'flag 0|1', (), "1: one slime job trains every round and evaluates each inside the job, on its own engines, through the plugin's eval hook; the HF export converts on the CPU meanwhile (docs/one-job-mode.md). Needs SAVE_HF=0. 0: the earlier order, a job per round, then an eval server on the round's export."),
    ('BANK_WAIT_TIMEOUT', '600', "One-job mode: seconds a round's first rollout waits for the bank inject writes after the previous round's evaluation (the job holds its GPUs meanwhile; docs/one-job-mode.md).", 'Run', 'float >= 0', ('plugin',), "One-job mode: seconds a round's first rollout waits for the bank inject writes after the previous round's evaluation (the job holds its GPUs meanwhile; docs/one-job-mode.md)."),
    ('RUNS_DIR', 'runs', 'Run-state directory (relative paths are relative to the project). Must not be on SYSTEM_DISK.', 'Run', 'path', ('machine',), 'Run-state directory (relative paths are relative to the project). Must not be on SYSTEM_DISK.'),
    ('NUM_GPUS', '4', 'GPUs the run uses: the first NUM_GPUS ids (CUDA_VISIBLE_DEVICES=0..NUM_GPUS-1) (M1).', 'GPUs and parallelism', 'int >= 1', (), 'GPUs the run uses: the first NUM_GPUS ids (CUDA_VISIBLE_DEVICES=0..NUM_GPUS-1) (M1).'),
    ('TP_SIZE', '2', 'Megatron tensor-parallel size for training; NUM_GPUS must be divisible by it (M7, M15).', 'GPUs and parallelism', 'int >= 1', ('fixed',), 'Megatron tensor-parallel size for training; NUM_GPUS must be divisible by it (M7, M15).'),
    ('GPU_MEMORY_GB', '80', 'Memory of one training GPU, GiB as nvidia-smi reports it (MiB / 1024); A800 80GB = 80. Used by `pyhelpers plan memory` (docs/oom_qwen35_4b.md).', 'GPUs and parallelism', 'float > 0', (), 'Memory of one training GPU, GiB as nvidia-smi reports it (MiB / 1024); A800 80GB = 80.'),
    ('MEMORY_WARN_FRACTION', '0.9', '`plan memory` warns when its per-GPU peak estimate exceeds this fraction of GPU_MEMORY_GB (0..1].', 'GPUs and parallelism', 'float (0, 1]', (), '`plan memory` warns when its per-GPU peak estimate exceeds this fraction of GPU_MEMORY_GB (0..1].'),
    ('OVER_SAMPLING_GROUPS', '32', 'Groups (prompts) submitted per step before dynamic-sampling filtering (--over-sampling-batch-size).', 'Batch (M10)', 'int >= 1', ('fixed',), 'Groups (prompts) submitted per step before dynamic-sampling filtering (--over-sampling-batch-size).'),
    ('ROLLOUT_GROUPS', '16', 'Groups kept per step after filtering (--rollout-batch-size).', 'Batch (M10)', 'int >= 1', ('fixed',), 'Groups kept per step after filtering (--rollout-batch-size).'),
    ('DRAW_LIMIT_FACTOR', '4', 'A step draws at most DRAW_LIMIT_FACTOR x ROLLOUT_GROUPS groups; past that, groups with equal rewards are kept instead of drawing more (docs/training.md, "Dynamic sampling"). At least OVER_SAMPLING_GROUPS / ROLLOUT_GROUPS.', 'Batch (M10)', 'int >= 1', ('plugin',), 'A step draws at most DRAW_LIMIT_FACTOR x ROLLOUT_GROUPS groups; past that, groups with equal rewards are kept instead of drawing more (docs/training.md, "Dynamic sampling"). At least OVER_SAMPLING_GROUPS / ROLLOUT_GROUPS.'),
    ('SAMPLES_PER_GROUP', '8', 'Episodes per group (--n-samples-per-prompt).', 'Batch (M10)', 'int >= 1', ('fixed',), 'Episodes per group (--n-samples-per-prompt).'),
    ('GLOBAL_BATCH_SIZE', '64', 'Episodes per optimizer update (--global-batch-size); ROLLOUT_GROUPS*SAMPLES_PER_GROUP must be a multiple.', 'Batch (M10)', 'int >= 1', ('fixed',), 'Episodes per optimizer update (--global-batch-size); ROLLOUT_GROUPS*SAMPLES_PER_GROUP must be a multiple.'),
    ('MAX_TOKENS_PER_GPU', '16384', 'Training packing budget per GPU, tokens (--max-tokens-per-gpu).', 'Lengths (M15)', 'int >= 1', (), 'Training packing budget per GPU, tokens (--max-tokens-per-gpu).'),
    ('ROLLOUT_MAX_CONTEXT_LEN', '24576', "One episode's total token cap (prompt + all turns), tokens.", 'Lengths (M15)', 'int >= 1', ('fixed', 'plugin'), "One episode's total token cap (prompt + all turns), tokens."),
    ('ROLLOUT_MAX_RESPONSE_LEN', '4096', "One turn's generation cap, tokens (max_new_tokens); shared by training and that round's val/gate.", 'Lengths (M15)', 'int >= 1', ('fixed', 'plugin'), "One turn's generation cap, tokens (max_new_tokens); shared by training and that round's val/gate."),
    ('MAX_TURNS', '20', 'Turns per episode before it is cut (ShopSimulator itself ends an episode after 42 messages).', 'Lengths (M15)', 'int >= 1', ('fixed', 'plugin'), 'Turns per episode before it is cut (ShopSimulator itself ends an episode after 42 messages).'),
    ('REWARD', 'strict', 'Training reward: strict (r_type·r_att·r_option·r_price) | loose (env reward) | success (all four parts = 1).', 'Rollouts and reward', 'choice strict|loose|success', ('fixed', 'plugin'), 'Training reward: strict (r_type·r_att·r_option·r_price) | loose (env reward) | success (all four parts = 1).'),
    ('RETRY_TRAINS', '0', 'Full-skill retries as training samples (off-policy; docs/skillbank.md): only 0 is supported, where retries go to the analyst only (1 is refused until the plugin supports it).', 'Rollouts and reward', 'int [0, 0]', ('fixed', 'plugin'), 'Full-skill retries as training samples (off-policy; docs/skillbank.md): only 0 is supported, where retries go to the analyst only (1 is refused until the plugin supports it).'),
    ('SKILL_TOKEN_BUDGET', '1024', 'Token budget of the skills block in a prompt.', 'Rollouts and reward', 'int >= 1', ('fixed', 'plugin'), 'Token budget of the skills block in a prompt.'),
    ('SEED_BANK', '', 'Bank the first round starts from (a skillbank.json); empty = an empty bank.', 'Rollouts and reward', 'path or empty', ('machine',), 'Bank the first round starts from (a skillbank.json); empty = an empty bank.'),
    ('SHOPSIM_HOST', '127.0.0.1', 'Address the simulator binds: loopback (upstream binds 0.0.0.0; the launcher changes it). Any other address is refused unless SHOPSIM_EXPOSE_TO_NETWORK=1.', 'ShopSimulator (M6)', 'host', ('machine',), 'Address the simulator binds: loopback (upstream binds 0.0.0.0; the launcher changes it). Any other address is refused unless SHOPSIM_EXPOSE_TO_NETWORK=1.'),
    ('SHOPSIM_EXPOSE_TO_NETWORK', '0', '1 = let SHOPSIM_HOST be a non-loopback address on purpose. ShopSimulator has no authentication: anyone who reaches that address can create, reset and step its environments and read its tasks.', 'ShopSimulator (M6)', 'flag 0|1', (), '1 = let SHOPSIM_HOST be a non-loopback address on purpose. ShopSimulator has no authentication:'),
    ('SHOPSIM_PORT', '5700', "Port of the simulator's HTTP API (upstream hard-codes 5000; the launcher changes it).", 'ShopSimulator (M6)', 'int [1024, 65535]', ('machine',), "Port of the simulator's HTTP API (upstream hard-codes 5000; the launcher changes it)."),
    ('SHOPSIM_SLOTS', '48', "Environment slots in the simulator's pool (SHOPSIM_ENV_MAX_NUM).", 'ShopSimulator (M6)', 'int >= 1', ('plugin',), "Environment slots in the simulator's pool (SHOPSIM_ENV_MAX_NUM)."),
    ('SHOPSIM_EPISODE_CONCURRENCY', '32', 'Training episodes in flight; the spare slots (SHOPSIM_SLOTS minus this) serve full-skill retries.', 'ShopSimulator (M6)', 'int >= 1', ('plugin',), 'Training episodes in flight; the spare slots (SHOPSIM_SLOTS minus this) serve full-skill retries.'),
    ('SHOPSIM_SEED', '20260101', "Fixed seed of prices and price limits: upstream re-randomises them at each start and draws each slot's own in turn; the launcher gives every slot the same world from this seed, so rounds and tasks stay comparable.", 'ShopSimulator (M6)', 'int [0, 4294967295]', ('fixed',), "Fixed seed of prices and price limits: upstream re-randomises them at each start and draws each slot's own in turn; the launcher gives every slot the same world from this seed, so rounds and tasks stay comparable."),
    ('SHOPSIM_START_TIMEOUT', '900', 'Seconds to wait for the simulator to answer its no-slot probe after start (it builds every env first).', 'ShopSimulator (M6)', 'float > 0', ('plugin',), 'Seconds to wait for the simulator to answer its no-slot probe after start (it builds every env first).'),
    ('SHOPSIM_MAX_RESTARTS', '3', 'Restarts of a simulator that dies during a round before the round fails.', 'ShopSimulator (M6)', 'int >= 0', (), 'Restarts of a simulator that dies during a round before the round fails.'),
    ('SHOPSIM_RESET_RETRIES', '5', 'Times a reset waits for a free slot before answering "no slot" (pack_api\'s MAX_RETRIES).', 'ShopSimulator (M6)', 'int >= 0', (), 'Times a reset waits for a free slot before answering "no slot" (pack_api\'s MAX_RETRIES).'),
    ('SHOPSIM_RESET_DELAY', '5.0', "Seconds between those waits (pack_api's RETRY_DELAY_SECONDS); eval and training clients wait retries x delay + 30 s for a reset (training at least 90 s).", 'ShopSimulator (M6)', 'float >= 0', (), "Seconds between those waits (pack_api's RETRY_DELAY_SECONDS); eval and training clients wait retries x delay + 30 s for a reset (training at least 90 s)."),
    ('EVAL_CONCURRENCY', '32', 'Episodes in flight during val and gate.', 'Evaluation (M9, M13)', 'int >= 1', ('plugin',), 'Episodes in flight during val and gate.'),
    ('EVAL_PORT', '30000', 'Port of the SGLang eval server (TP=1, DP=NUM_GPUS), bound to 127.0.0.1.', 'Evaluation (M9, M13)', 'int [1024, 65535]', ('machine',), 'Port of the SGLang eval server (TP=1, DP=NUM_GPUS), bound to 127.0.0.1.'),
    ('SGLANG_START_TIMEOUT', '900', "Seconds to wait for the eval server's /health after start.", 'Evaluation (M9, M13)', 'float > 0', (), "Seconds to wait for the eval server's /health after start."),
    ('BASELINE_VAL', '0', "1 = run the base model's bare val before round 0, as the baseline for later rounds.", 'Evaluation (M9, M13)', 'flag 0|1', (), "1 = run the base model's bare val before round 0, as the baseline for later rounds."),
    ('EVAL_EPISODE_RETRIES', '3', 'Infra-error retries of one eval episode (ShopSimulator or server failures, never policy failures).', 'Evaluation (M9, M13)', 'int >= 0', ('plugin',), 'Infra-error retries of one eval episode (ShopSimulator or server failures, never policy failures).'),
    ('EVAL_MAX_INFRA_SHARE', '0.05', "Largest share of a val/gate run's episodes that may end in infra errors (after retries); above it no summary is written and the stage fails (rerun with --resume: those episodes are played again).", 'Evaluation (M9, M13)', 'float [0, 1]', ('plugin',), "Largest share of a val/gate run's episodes that may end in infra errors (after retries); above it no summary is written and the stage fails (rerun with --resume: those episodes are played again)."),
    ('GATE_PAIRS', '256', 'Foldover pairs (mask + complement) played per round. 256 detects about +-12 points at 80% power with 8 skills (docs/gate.md budget table); 64 detects only about +-25.', 'Gate (skillbank.md)', 'int >= 1', ('plugin',), 'Foldover pairs (mask + complement) played per round. 256 detects about +-12 points at 80% power with 8 skills (docs/gate.md budget table); 64 detects only about +-25.'),
    ('GATE_ARM_EPISODES', '32', 'Episodes in each of the all-off and all-on arms (the additivity check).', 'Gate (skillbank.md)', 'int >= 0', ('plugin',), 'Episodes in each of the all-off and all-on arms (the additivity check).'),
    ('GATE_SEED', '1234', 'Seed of the random masks (recorded in the gate summary).', 'Gate (skillbank.md)', 'int [0, 4294967295]', ('fixed', 'plugin'), 'Seed of the random masks (recorded in the gate summary).'),
    ('GATE_MAX_SKILLS', '8', "Most skills tested in one round's gate.", 'Gate (skillbank.md)', 'int >= 1', ('plugin',), "Most skills tested in one round's gate."),
    ('GATE_FAILED_SHARE', '0.7', "Share of the gate's task pool drawn from tasks the bare val failed (0..1).", 'Gate (skillbank.md)', 'float (0, 1)', ('plugin',), "Share of the gate's task pool drawn from tasks the bare val failed (0..1)."),
    ('GATE_ALPHA', '0.1', 'Family-wise error rate of the accept/reject decisions.', 'Gate (skillbank.md)', 'float (0, 1)', ('plugin',), 'Family-wise error rate of the accept/reject decisions.'),
    ('GATE_MAX_ROUNDS', '3', 'Rounds a skill may stay under test before it is retired.', 'Gate (skillbank.md)', 'int >= 1', ('plugin',), 'Rounds a skill may stay under test before it is retired.'),
    ('BANK_MAX_ACTIVE', '24', 'Most active skills in a bank.', 'Gate (skillbank.md)', 'int >= 1', (), 'Most active skills in a bank.'),
    ('SKILL_DUP_JACCARD', '0.7', "Compile's near-duplicate threshold: word unigram+bigram Jaccard (0..1) at or above which a new skill is merged into an existing one (docs/skillbank.md says why 0.7).", 'Gate (skillbank.md)', 'float (0, 1]', (), "Compile's near-duplicate threshold: word unigram+bigram Jaccard (0..1) at or above which a new skill is merged into an existing one (docs/skillbank.md says why 0.7)."),
    ('SKILL_MAX_TOKENS', '160', 'Longest skill line compile admits, tokens; longer proposals are recorded as rejected.', 'Gate (skillbank.md)', 'int >= 1', (), 'Longest skill line compile admits, tokens; longer proposals are recorded as rejected.'),
    ('ANALYST_ENABLED', '1', '1 = run the analyst sidecar during training (needs DASHSCOPE_API_KEY in .env).', 'Failure Analyst (M11)', 'flag 0|1', (), '1 = run the analyst sidecar during training (needs DASHSCOPE_API_KEY in .env).'),
    ('ANALYST_BASE_URL', 'https://dashscope.aliyuncs.com/compatible-mode/v1', 'OpenAI-compatible endpoint of the analyst model (Alibaba Cloud Bailian / DashScope).', 'Failure Analyst (M11)', 'url', ('machine',), 'OpenAI-compatible endpoint of the analyst model (Alibaba Cloud Bailian / DashScope).'),
    ('ANALYST_MODEL', 'qwen-plus', 'Model name at that endpoint.', 'Failure Analyst (M11)', 'text', (), 'Model name at that endpoint.'),
    ('ANALYST_BATCH_SIZE', '8', 'Spool records per analyst request.', 'Failure Analyst (M11)', 'int >= 1', (), 'Spool records per analyst request.'),
    ('ANALYST_CONCURRENCY', '4', "Analyst requests in flight at once, still started at most ANALYST_MAX_RPM a minute: the round's end waits for the drain (compile needs it) while the GPUs idle; one at a time falls behind when a step's failures take longer to analyse than the step takes.", 'Failure Analyst (M11)', 'int >= 1', (), "Analyst requests in flight at once, still started at most ANALYST_MAX_RPM a minute: the round's end waits for the drain (compile needs it) while the GPUs idle; one at a time falls behind when a step's failures take longer to analyse than the step takes."),
    ('ANALYST_MAX_RPM', '30', 'Spend cap: analyst requests per minute.', 'Failure Analyst (M11)', 'float > 0', (), 'Spend cap: analyst requests per minute.'),
    ('ANALYST_MAX_CALLS', '200', 'Spend cap: analyst requests per round.', 'Failure Analyst (M11)', 'int >= 0', (), 'Spend cap: analyst requests per round.'),
    ('ANALYST_TIMEOUT', '120', 'Seconds one request may take.', 'Failure Analyst (M11)', 'float > 0', (), 'Seconds one request may take.'),
    ('ANALYST_DRAIN_TIMEOUT', '600', 'Seconds the analyst may spend on pending records at the end of a round.', 'Failure Analyst (M11)', 'float >= 0', ('plugin',), 'Seconds the analyst may spend on pending records at the end of a round.'),
    ('JIT_CACHE_ON_DATA_DISK', '1', "1: every GPU process of the run (slime's Megatron and engines, the eval server) keeps its compile/JIT caches (Triton, TorchInductor, FlashInfer, DeepGEMM, CUDA's) in TRAIN_SAVE/<RUN_NAME>/jit-cache on the data disk, so later starts reuse the kernels instead of compiling them on the GPUs again (also after a fresh container, or a migration to the same GPU and driver), and the small system disk does not fill with them; 0: each program's default under ~ or /tmp.", 'Failure Analyst (M11)', 'flag 0|1', ('machine',), "1: every GPU process of the run (slime's Megatron and engines, the eval server) keeps its compile/JIT caches (Triton, TorchInductor, FlashInfer, DeepGEMM, CUDA's) in TRAIN_SAVE/<RUN_NAME>/jit-cache on the data disk, so later starts reuse the kernels instead of compiling them on the GPUs again (also after a fresh container, or a migration to the same GPU and driver), and the small system disk does not fill with them; 0: each program's default under ~ or /tmp."),
    ('VAL_BESIDE_COMPILE', '1', "1: the eval server starts and bare val plays while compile waits for the analyst's drain; the gate follows once compiled.json exists, so the GPUs play val instead of idling through the drain. 0: compile first, then evaluate.", 'Failure Analyst (M11)', 'flag 0|1', (), "1: the eval server starts and bare val plays while compile waits for the analyst's drain; the gate follows once compiled.json exists, so the GPUs play val instead of idling through the drain. 0: compile first, then evaluate."),
    ('ANALYST_POLL_INTERVAL', '10.0', "Seconds between scans of the round's spool/ while training runs (a decimal, so tests can go below 1).", 'Failure Analyst (M11)', 'float > 0', (), "Seconds between scans of the round's spool/ while training runs (a decimal, so tests can go below 1)."),
    ('ANALYST_RETRIES', '5', 'Retries of one analyst request after a 429, 5xx, timeout or dropped connection.', 'Failure Analyst (M11)', 'int >= 0', (), 'Retries of one analyst request after a 429, 5xx, timeout or dropped connection.'),
    ('ANALYST_BACKOFF', '2.0', 'Retry wait, seconds: the first waits between half this and this (jitter), doubling per retry; a Retry-After header is the minimum.', 'Failure Analyst (M11)', 'float >= 0', (), 'Retry wait, seconds: the first waits between half this and this (jitter), doubling per retry; a Retry-After header is the minimum.'),
    ('ANALYST_BACKOFF_MAX', '60.0', 'Longest retry wait of our own backoff, seconds (a longer Retry-After is still honoured).', 'Failure Analyst (M11)', 'float >= 0', (), 'Longest retry wait of our own backoff, seconds (a longer Retry-After is still honoured).'),
    ('WANDB_PROJECT', 'shopsim-rl', 'W&B project of every run of this toolkit.', 'Weights & Biases (M13, M17)', 'name', (), 'W&B project of every run of this toolkit.'),
    ('WANDB_GROUP', 'qwen35-4b-train-100', 'W&B group shared by slime, val, gate and analyst runs (M13).', 'Weights & Biases (M13, M17)', 'name', (), 'W&B group shared by slime, val, gate and analyst runs (M13).'),
    ('WANDB_MODE', 'online', 'online | offline | disabled. offline needs no key; upload later with `make wandb-sync`.', 'Weights & Biases (M13, M17)', 'choice online|offline|disabled', (), 'online | offline | disabled. offline needs no key; upload later with `make wandb-sync`.'),
    ('SYSTEM_DISK', '/', 'Mount point whose device must never hold weights or checkpoints (the ~8 GB conda system disk).', 'Disks (M2, M3)', 'path', ('machine',), 'Mount point whose device must never hold weights or checkpoints (the ~8 GB conda system disk).'),
    ('DATA_DISK', '/root/autodl-tmp', 'Data disk root (AutoDL: /root/autodl-tmp).', 'Disks (M2, M3)', 'path', ('machine',), 'Data disk root (AutoDL: /root/autodl-tmp).'),
    ('TRAIN_SAVE', '${DATA_DISK}/train_save', 'Megatron checkpoints and HF exports; TRAIN_SAVE/<RUN_NAME>. Must be on the data disk.', 'Disks (M2, M3)', 'path', ('machine',), 'Megatron checkpoints and HF exports; TRAIN_SAVE/<RUN_NAME>. Must be on the data disk.'),
    ('MODELS_DIR', '${DATA_DISK}/models', 'Base models (HF and torch_dist).', 'Disks (M2, M3)', 'path', ('machine',), 'Base models (HF and torch_dist).'),
    ('SAVE_OPTIM', '0', '1 = save optimizer state too (exact resume; ~59 GB per checkpoint). 0 = weights only (~8.4 GB).', 'Disks (M2, M3)', 'flag 0|1', ('fixed',), '1 = save optimizer state too (exact resume; ~59 GB per checkpoint). 0 = weights only (~8.4 GB).'),
    ('SAVE_HF', '0', '1 = slime also writes HF weights from the GPUs at its final save (--save-hf). For Qwen3.5 that export lacks the visual tower and mtp.* (Megatron never holds them): the export stage completes it from HF_MODEL by hard links (same file system), checks every weight name and shape against HF_MODEL and flips `hf` without the converter; when anything differs it says why and converts. The save inside the job takes longer by one 8.4 GB write (not measured on GPUs here), so 0 stays the default. 0 = the CPU converter (CONVERT_TO_HF) exports after training.', 'Disks (M2, M3)', 'flag 0|1', (), '1 = slime also writes HF weights from the GPUs at its final save (--save-hf). For Qwen3.5 that export lacks the visual tower and mtp.* (Megatron never holds them): the export stage completes it from HF_MODEL by hard links (same file system), checks every weight name and shape against HF_MODEL and flips `hf` without the converter; when anything differs it says why and converts.'),
    ('DISK_MARGIN_GB', '4', "Free space kept in reserve on TRAIN_SAVE's disk beyond the computed peak, GB.", 'Disks (M2, M3)', 'float >= 0', (), "Free space kept in reserve on TRAIN_SAVE's disk beyond the computed peak, GB."),
    ('DISK_WATCH_INTERVAL', '60.0', "Seconds between free-space checks while a round trains: below what the round's final save needs (checkpoint + DISK_MARGIN_GB), make status and a notification warn (Megatron saves inside the job, so the guard itself acts only at stage boundaries).", 'Disks (M2, M3)', 'float > 0', (), "Seconds between free-space checks while a round trains: below what the round's final save needs (checkpoint + DISK_MARGIN_GB), make status and a notification warn (Megatron saves inside the job, so the guard itself acts only at stage boundaries)."),
    ('MIGRATE_DATA', '1', '1 = the pack carries DATA_DIR (the task files, M19); 0 = rebuild them on the new machine.', 'Migration (make migrate-pack / make migrate-machine)', 'flag 0|1', (), '1 = the pack carries DATA_DIR (the task files, M19); 0 = rebuild them on the new machine.'),
    ('MIGRATE_MODELS', '0', '1 = the pack carries HF_MODEL and TORCH_DIST_MODEL too (~17 GB); 0 = the new machine has them (or downloads the HF weights and runs make convert-base).', 'Migration (make migrate-pack / make migrate-machine)', 'flag 0|1', (), '1 = the pack carries HF_MODEL and TORCH_DIST_MODEL too (~17 GB); 0 = the new machine has them (or downloads the HF weights and runs make convert-base).'),
    ('MIGRATE_BWLIMIT', '0', 'rsync bandwidth limit of make migrate-machine, KB/s (0 = none).', 'Migration (make migrate-pack / make migrate-machine)', 'int >= 0', (), 'rsync bandwidth limit of make migrate-machine, KB/s (0 = none).'),
    ('HF_MODEL', '${MODELS_DIR}/Qwen3.5-4B', 'HF weights of the base policy (tokenizer, config, safetensors).', 'Model and data', 'path', ('machine',), 'HF weights of the base policy (tokenizer, config, safetensors).'),
    ('TORCH_DIST_MODEL', '${MODELS_DIR}/Qwen3.5-4B_torch_dist', 'The same model converted to Megatron torch_dist (slime --ref-load / first --load).', 'Model and data', 'path', ('machine',), 'The same model converted to Megatron torch_dist (slime --ref-load / first --load).'),
    ('DATA_DIR', 'data', 'Task files (JSONL, one task per line; `pyhelpers data build` makes them) (M19).', 'Model and data', 'path', ('machine',), 'Task files (JSONL, one task per line; `pyhelpers data build` makes them) (M19).'),
    ('TRAIN_TASKS', '${DATA_DIR}/train.jsonl', 'Training tasks (JSONL).', 'Model and data', 'path', ('machine',), 'Training tasks (JSONL).'),
    ('VAL_TASKS', '${DATA_DIR}/val.jsonl', 'Validation tasks (JSONL), disjoint from training by task id.', 'Model and data', 'path', ('machine',), 'Validation tasks (JSONL), disjoint from training by task id.'),
    ('CONDA_ROOT', '/root/miniconda3', 'Conda install whose etc/profile.d/conda.sh is sourced (M4).', 'External programs (point these at your own install; tests point them at stand-ins)', 'path', ('bash', 'machine'), 'Conda install whose etc/profile.d/conda.sh is sourced (M4).'),
    ('SLIME_ENV', 'slime', 'Conda env of training (slime, Megatron, SGLang); never modified by the toolkit (M5).', 'External programs (point these at your own install; tests point them at stand-ins)', 'name', ('bash',), 'Conda env of training (slime, Megatron, SGLang); never modified by the toolkit (M5).'),
    ('SHOPSIM_ENV', 'shopsim', 'Conda env of ShopSimulator (M6).', 'External programs (point these at your own install; tests point them at stand-ins)', 'name', (), 'Conda env of ShopSimulator (M6).'),
    ('SLIME_DIR', '/root/slime', 'slime checkout.', 'External programs (point these at your own install; tests point them at stand-ins)', 'path', ('machine',), 'slime checkout.'),
    ('MEGATRON_DIR', '/root/Megatron-LM', "Megatron-LM checkout (on the job's PYTHONPATH; the pip megatron-core lacks megatron.training).", 'External programs (point these at your own install; tests point them at stand-ins)', 'path', ('machine',), "Megatron-LM checkout (on the job's PYTHONPATH; the pip megatron-core lacks megatron.training)."),
    ('SHOPSIM_DIR', '/root/ShopSimulator', 'ShopSimulator checkout (holds shop_env/shop_env/pack_api.py).', 'External programs (point these at your own install; tests point them at stand-ins)', 'path', ('machine',), 'ShopSimulator checkout (holds shop_env/shop_env/pack_api.py).'),
    ('MODEL_ARGS_SCRIPT', '${SLIME_DIR}/scripts/models/qwen3.5-4B.sh', "slime's model-args script for Qwen3.5-4B.", 'External programs (point these at your own install; tests point them at stand-ins)', 'path', ('bash', 'machine'), "slime's model-args script for Qwen3.5-4B."),
    ('SLIME_TRAIN', '${SLIME_DIR}/train.py', "slime's training entry point, run inside the Ray job.", 'External programs (point these at your own install; tests point them at stand-ins)', 'path', ('machine',), "slime's training entry point, run inside the Ray job."),
    ('CONVERT_TO_HF', '${SLIME_DIR}/tools/convert_torch_dist_to_hf.py', 'torch_dist -> HF converter (runs on the CPU).', 'External programs (point these at your own install; tests point them at stand-ins)', 'path', ('machine',), 'torch_dist -> HF converter (runs on the CPU).'),
    ('CONVERT_TO_TORCH_DIST', '${SLIME_DIR}/tools/convert_hf_to_torch_dist.py', 'HF -> torch_dist converter (needs the GPUs; `make convert-base`).', 'External programs (point these at your own install; tests point them at stand-ins)', 'path', ('machine',), 'HF -> torch_dist converter (needs the GPUs; `make convert-base`).'),
    ('SGLANG_LAUNCHER', 'python3 -m sglang.launch_server', 'Command that starts an SGLang server (flags are appended).', 'External programs (point these at your own install; tests point them at stand-ins)', 'command', ('machine',), 'Command that starts an SGLang server (flags are appended).'),
    ('SHOPSIM_LAUNCHER', '', "Command that starts ShopSimulator with the pool size, port, host and seed above (empty = the project's).", 'External programs (point these at your own install; tests point them at stand-ins)', 'command or empty', ('machine',), "Command that starts ShopSimulator with the pool size, port, host and seed above (empty = the project's)."),
    ('NVIDIA_SMI', 'nvidia-smi', 'nvidia-smi used by `make doctor` (GPU count, model, compute capability) and for NCCL_NVLS_ENABLE (topo -m).', 'External programs (point these at your own install; tests point them at stand-ins)', 'command', ('machine',), 'nvidia-smi used by `make doctor` (GPU count, model, compute capability) and for NCCL_NVLS_ENABLE (topo -m).'),
    ('CUOBJDUMP', 'cuobjdump', 'cuobjdump used by `make doctor` (which sm_XX TE and apex were built for).', 'External programs (point these at your own install; tests point them at stand-ins)', 'command', ('machine',), 'cuobjdump used by `make doctor` (which sm_XX TE and apex were built for).'),
    ('DOCTOR_PROFILE', 'full', 'Checks `make doctor` runs: full (a GPU machine) | rehearse (a CPU machine: conda, versions, cuDNN, the flags against the installed parsers, GPUs, architecture and system disk become SKIP). `make doctor PROFILE=rehearse` picks it too.', 'Doctor', 'choice full|rehearse', ('bash',), 'Checks `make doctor` runs: full (a GPU machine) | rehearse (a CPU machine: conda, versions, cuDNN, the flags against the installed parsers, GPUs, architecture and system disk become SKIP). `make doctor PROFILE=rehearse` picks it too.'),
    ('DOCTOR_SKIP', '', 'Checks to report as SKIP, comma-separated names as printed by `make doctor` (e.g. arch,cudnn).', 'Doctor', 'names or empty', (), 'Checks to report as SKIP, comma-separated names as printed by `make doctor` (e.g. arch,cudnn).'),
    ('SLIME_LOCK', 'env/slime.lock', 'Version lock the slime env is checked against (M5; format described in the file).', 'Doctor', 'path', (), 'Version lock the slime env is checked against (M5; format described in the file).'),
    ('RAY_TEMP_DIR', '', "Ray's temp dir; Unix sockets go under it, so keep it short. Empty = /tmp/ray-<hash of the run>.", 'Ray', 'path or empty', ('machine',), "Ray's temp dir; Unix sockets go under it, so keep it short. Empty = /tmp/ray-<hash of the run>."),
    ('RAY_PORT', '6380', "Ray's GCS port and the first of its ten ports, all on 127.0.0.1: +1 client server, +2 raylet, +3 object manager, +4/+5 dashboard agent HTTP/gRPC, +6 runtime-env agent, +7 metrics export, +8/+9 autoscaler/dashboard metrics (workers: kernel-chosen ports). A second run on this machine needs its own block of ten.", 'Ray', 'int [1024, 65526]', ('machine',), "Ray's GCS port and the first of its ten ports, all on 127.0.0.1: +1 client server, +2 raylet, +3 object manager, +4/+5 dashboard agent HTTP/gRPC, +6 runtime-env agent, +7 metrics export, +8/+9 autoscaler/dashboard metrics (workers: kernel-chosen ports). A second run on this machine needs its own block of ten."),
    ('RAY_DASHBOARD_PORT', '8265', "Ray dashboard / job-API port, on 127.0.0.1; every call needs the run's token (runs/<RUN>/ray/auth-token; CVE-2023-48022).", 'Ray', 'int [1024, 65535]', ('machine',), "Ray dashboard / job-API port, on 127.0.0.1; every call needs the run's token (runs/<RUN>/ray/auth-token; CVE-2023-48022)."),
    ('JOB_START_TIMEOUT', '1800', 'Seconds the slime job may take to start training (slime waits forever when GPUs are short).', 'Ray', 'float > 0', (), 'Seconds the slime job may take to start training (slime waits forever when GPUs are short).'),
    ('RAY_START_TIMEOUT', '120', "Seconds the Ray head may take to answer on its dashboard and job agent after `ray start` (about 3 s here); the first job submission may wait as long again for the job agent. Also how long `ray start` (head and workers) waits for its new node to register, where Ray's own wait is 30 s.", 'Ray', 'float > 0', (), "Seconds the Ray head may take to answer on its dashboard and job agent after `ray start` (about 3 s here); the first job submission may wait as long again for the job agent. Also how long `ray start` (head and workers) waits for its new node to register, where Ray's own wait is 30 s."),
    ('RAY_UNREACHABLE_TIMEOUT', '120', "Seconds the job API on the head may go unanswered while a job runs (or waits for its GPUs) before the head's Ray counts as lost (`ray-lost`: restarted, the run resumes from its last checkpoint); a head whose `ray start` ended or whose GCS port is closed counts at once.", 'Ray', 'float > 0', (), "Seconds the job API on the head may go unanswered while a job runs (or waits for its GPUs) before the head's Ray counts as lost (`ray-lost`: restarted, the run resumes from its last checkpoint); a head whose `ray start` ended or whose GCS port is closed counts at once."),
    ('NNODES', '1', 'Machines the run spans, each with NUM_GPUS GPUs: 1 = this machine only. Above 1 this machine is the head (`make train`) and NNODES-1 workers join it (`make join`), all sharing TRAIN_SAVE and RUNS_DIR.', 'Nodes (docs/multinode.md)', 'int >= 1', (), 'Machines the run spans, each with NUM_GPUS GPUs: 1 = this machine only. Above 1 this machine is the head (`make train`) and NNODES-1 workers join it (`make join`), all sharing TRAIN_SAVE and RUNS_DIR.'),
    ('NODE_ADDR', '', "This node's IP address on the network between the nodes (an address of this machine, not loopback). Ray's listeners bind it and 127.0.0.1 only. Required when NNODES > 1.", 'Nodes (docs/multinode.md)', 'host or empty', (), "This node's IP address on the network between the nodes (an address of this machine, not loopback). Ray's listeners bind it and 127.0.0.1 only. Required when NNODES > 1."),
    ('HEAD_ADDR', '', "The head's NODE_ADDR: where `make join` on a worker finds the run's Ray head.", 'Nodes (docs/multinode.md)', 'host or empty', (), "The head's NODE_ADDR: where `make join` on a worker finds the run's Ray head."),
    ('NET_IFACE', '', 'The network interface that carries NODE_ADDR (`ip addr` lists them, e.g. eth0 or ib0): NCCL and Gloo use it (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME). Required when NNODES > 1.', 'Nodes (docs/multinode.md)', 'name or empty', (), 'The network interface that carries NODE_ADDR (`ip addr` lists them, e.g. eth0 or ib0): NCCL and Gloo use it (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME). Required when NNODES > 1.'),
    ('RAY_TOKEN_FILE', '', "A worker's copy of the head's runs/<RUN>/ray/auth-token (mode 0600), when its RUNS_DIR is not the head's; empty = the run dir's own token (RUNS_DIR shared). A path: the token never goes on a command line.", 'Nodes (docs/multinode.md)', 'path or empty', (), "A worker's copy of the head's runs/<RUN>/ray/auth-token (mode 0600), when its RUNS_DIR is not the head's; empty = the run dir's own token (RUNS_DIR shared). A path: the token never goes on a command line."),
    ('JOIN_TIMEOUT', '600', 'Seconds the head waits for the NNODES-1 workers to join before it refuses, naming what is missing (and a resume, for a lost worker to rejoin).', 'Nodes (docs/multinode.md)', 'float > 0', (), 'Seconds the head waits for the NNODES-1 workers to join before it refuses, naming what is missing (and a resume, for a lost worker to rejoin).'),
    ('STOP_GRACE', '20', 'Seconds between TERM and KILL when a process group is stopped.', 'Processes', 'float >= 0', (), 'Seconds between TERM and KILL when a process group is stopped.'),
    ('READY_BACKOFF_MAX', '5.0', 'Longest pause between readiness probes, seconds (probes back off from 0.1 s to this).', 'Processes', 'float > 0', (), 'Longest pause between readiness probes, seconds (probes back off from 0.1 s to this).'),
    ('MAX_RESTARTS', '5', 'Automatic restarts after a transient failure (NCCL, an engine or ShopSimulator dying, a node hiccup; the rules: README.md), per driver run. 0 = never restart.', 'Self-healing and notifications', 'int >= 0', (), 'Automatic restarts after a transient failure (NCCL, an engine or ShopSimulator dying, a node hiccup; the rules: README.md), per driver run. 0 = never restart.'),
    ('MAX_RESTARTS_PER_STAGE', '3', 'Automatic restarts of one stage of one round.', 'Self-healing and notifications', 'int >= 0', (), 'Automatic restarts of one stage of one round.'),
    ('RESTART_BACKOFF', '30.0', 'Seconds before the first restart; doubles for each later one.', 'Self-healing and notifications', 'float >= 0', (), 'Seconds before the first restart; doubles for each later one.'),
    ('RESTART_BACKOFF_MAX', '600.0', 'Longest wait before a restart, seconds.', 'Self-healing and notifications', 'float >= 0', (), 'Longest wait before a restart, seconds.'),
    ('NOTIFY_FORMAT', 'generic', 'Body format of the notification webhook: generic / feishu / dingtalk / wecom / slack.', 'Self-healing and notifications', 'choice generic|feishu|dingtalk|wecom|slack', (), 'Body format of the notification webhook: generic / feishu / dingtalk / wecom / slack.'),
    ('NOTIFY_TIMEOUT', '10.0', 'Seconds one notification may take; a failing or hanging webhook never affects the run.', 'Self-healing and notifications', 'float > 0', (), 'Seconds one notification may take; a failing or hanging webhook never affects the run.'),
    ('WANDB_API_KEY', '', 'W&B API key (or use WANDB_MODE=offline, or ~/.netrc from `wandb login`).', 'Secrets (set these in .env, never on a command line)', 'text or empty', ('secret',), 'W&B API key (or use WANDB_MODE=offline, or ~/.netrc from `wandb login`).'),
    ('DASHSCOPE_API_KEY', '', 'Alibaba Cloud Bailian key for the Failure Analyst.', 'Secrets (set these in .env, never on a command line)', 'text or empty', ('secret',), 'Alibaba Cloud Bailian key for the Failure Analyst.'),
    ('NOTIFY_WEBHOOK', '', 'Webhook URL that receives run start, round done, restart, disk warning and end messages (format NOTIFY_FORMAT); empty = no notifications. It is a credential: keep it in .env.', 'Secrets (set these in .env, never on a command line)', 'url or empty', ('secret',), 'Webhook URL that receives run start, round done, restart, disk warning and end messages (format NOTIFY_FORMAT); empty = no notifications. It is a credential: keep it in .env.'),
    ('NOTIFY_SECRET', '', 'Signing secret of a Feishu/Lark or DingTalk bot with "signature" security (optional).', 'Secrets (set these in .env, never on a command line)', 'text or empty', ('secret',), 'Signing secret of a Feishu/Lark or DingTalk bot with "signature" security (optional).'),
    ('SECRET_VARS', '', 'Extra variable names to treat as secrets, comma-separated (names ending in _KEY, _TOKEN, _SECRET, _PASSWORD or _WEBHOOK always are).', 'Secrets (set these in .env, never on a command line)', 'names or empty', ('machine',), 'Extra variable names to treat as secrets, comma-separated (names ending in _KEY, _TOKEN, _SECRET, _PASSWORD or _WEBHOOK always are).'),
    ('EXTRA_VARS', '', "Names in .env that are not knobs on purpose, comma-separated (say, a variable of your own that a hook reads). A .env name a typo away from a knob's (ROUDNS for ROUNDS) is refused unless listed here; names far from every knob (HTTPS_PROXY) need no listing.", 'Your own variables', 'names or empty', (), "Names in .env that are not knobs on purpose, comma-separated (say, a variable of your own that a hook reads). A .env name a typo away from a knob's (ROUDNS for ROUNDS) is refused unless listed here; names far from every knob (HTTPS_PROXY) need no listing."),
)
