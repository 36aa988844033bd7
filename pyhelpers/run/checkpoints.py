"""Megatron checkpoints and HF exports on disk (M12, architecture §7).

A Megatron save counts only when it is complete: the tracker file names it, or its torch_dist
files (`.metadata` and `common.pt`) are all present. Rotation keeps the newest complete save and
never deletes the iteration the tracker names, nor an incomplete save that might be the newest
(it reports it instead). HF exports live in `hf-<iter>/`; `hf` is a symlink flipped atomically.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from pyhelpers.errors import ToolkitError

TRACKER = "latest_checkpointed_iteration.txt"
ITER_RE = re.compile(r"^iter_(\d{7})$")
HF_RE = re.compile(r"^hf-(\d{7})$")
TORCH_DIST_FILES = (".metadata", "common.pt")


def read_tracker(megatron: Path) -> int | None:
    """The iteration slime's tracker names, None when there is no tracker. 'release' (a
    converted base model) counts as no training iteration."""
    path = Path(megatron) / TRACKER
    if not path.is_file():
        return None
    text = path.read_text().strip()
    if text == "release":
        return None
    if not text.isdigit():
        raise ToolkitError(f"checkpoint tracker holds {text!r}, not an iteration number", str(path),
                           "restore it from the newest complete iter_* directory name, or remove the file")
    return int(text)


def iter_dirs(megatron: Path) -> dict[int, Path]:
    """Every iter_XXXXXXX directory, by iteration."""
    megatron = Path(megatron)
    if not megatron.is_dir():
        return {}
    out = {}
    for p in megatron.iterdir():
        m = ITER_RE.match(p.name)
        if m and p.is_dir():
            out[int(m.group(1))] = p
    return dict(sorted(out.items()))


def is_complete(path: Path) -> bool:
    """A torch_dist save is complete when its metadata and common state exist and at least one
    shard does (Megatron writes .metadata last)."""
    path = Path(path)
    return all((path / f).is_file() for f in TORCH_DIST_FILES) and any(path.glob("*.distcp"))


# slime's data-source state after a save (slime 624b824 rollout/data_source.py:134) and the plugin's
# copy of the same counters after every step (pyhelpers/rollout/data_state.py), in <--save>/rollout/.
ROLLOUT_STATE = "global_dataset_state_dict_{}.pt"
PLUGIN_RECORD = "shopsimrl_data_state_{}.json"


def rollout_state_path(megatron: Path, iteration: int) -> Path:
    return Path(megatron) / "rollout" / ROLLOUT_STATE.format(iteration)


def plugin_record_path(megatron: Path, iteration: int) -> Path:
    return Path(megatron) / "rollout" / PLUGIN_RECORD.format(iteration)


def _numbered(megatron: Path, pattern: str) -> dict[int, Path]:
    head, tail = pattern.split("{}")
    out = {}
    for p in (Path(megatron) / "rollout").glob(pattern.format("*")):
        num = p.name[len(head):len(p.name) - len(tail)]
        if num.isdigit():
            out[int(num)] = p
    return out


def rollout_states(megatron: Path) -> dict[int, Path]:
    """{iteration: rollout/global_dataset_state_dict_<iteration>.pt} (slime's data-source state)."""
    return _numbered(megatron, ROLLOUT_STATE)


def plugin_records(megatron: Path) -> dict[int, Path]:
    """{iteration: rollout/shopsimrl_data_state_<iteration>.json} (the plugin's copy of the data
    position after each step: pyhelpers/rollout/data_state.py)."""
    return _numbered(megatron, PLUGIN_RECORD)


def data_state_gap(megatron: Path) -> str | None:
    """What the next job does when the tracked save has no data-source state (slime writes the
    tracker before rollout/global_dataset_state_dict_<N>.pt, slime 624b824 train.py:71-80, and
    its loader then restarts at offset 0 without a word, rollout/data_source.py:138-148);
    None when nothing is missing."""
    tracked = read_tracker(megatron)
    if tracked is None or tracked in rollout_states(megatron):
        return None
    what = (f"iter_{tracked:07d} has no data-source state (rollout/{ROLLOUT_STATE.format(tracked)}: "
            "slime was stopped between its tracker and that file)")
    if tracked in plugin_records(megatron):
        return f"{what}; the next job restores the data position from {PLUGIN_RECORD.format(tracked)}"
    older = [i for i, p in iter_dirs(megatron).items() if i < tracked and is_complete(p) and i in rollout_states(megatron)]
    back = (f"; iter_{max(older):07d}, the newest save with its data state, is kept: to train from there "
            f"instead, write {max(older)} into {TRACKER}") if older else ""
    return f"{what} and the plugin has no record of it: slime will start the task order again at the first task{back}"


def newest_complete(megatron: Path) -> int | None:
    done = [i for i, p in iter_dirs(megatron).items() if is_complete(p)]
    return max(done) if done else None


@dataclass
class RotationPlan:
    keep: int | None
    delete: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fallback: int | None = None  # an older save kept because the tracked one lost its data state


def plan_rotation(megatron: Path) -> RotationPlan:
    """Which iter_* directories (and their rollout state files) rotation would delete."""
    megatron = Path(megatron)
    tracked = read_tracker(megatron)
    dirs = iter_dirs(megatron)
    newest = newest_complete(megatron)
    plan = RotationPlan(keep=newest)
    if newest is None:
        plan.notes.append("no complete checkpoint: nothing deleted")
        return plan
    states = rollout_states(megatron)
    gap = data_state_gap(megatron)
    fallback = None  # the newest older save with its data state, kept while the tracked one lacks it
    if gap is not None:
        plan.notes.append(gap)
        if tracked not in plugin_records(megatron):
            older = [i for i, p in dirs.items() if i < tracked and is_complete(p) and i in states]
            fallback = plan.fallback = max(older) if older else None
    # The plugin's per-step records go first: rotate's done() sees only older dirs and stray state
    # files, so whatever a kill can leave behind must be followed by one of those on the list.
    plan.delete += [p for it, p in sorted(plugin_records(megatron).items())
                    if it < newest and it not in (tracked, fallback)]
    for it, path in dirs.items():
        if it in (newest, tracked, fallback):
            continue
        if it > newest:
            plan.notes.append(f"{path.name} is newer than the newest complete save and incomplete: kept "
                              f"(a save may be in progress; remove it by hand if it is a crash leftover)")
            continue
        if it in states:  # before its dir: a kill in between leaves a dir the next rotation sees
            plan.delete.append(states[it])
        plan.delete.append(path)
    plan.delete += [states[it] for it in stray_states(megatron, below=newest) if it != tracked]
    if tracked is not None and tracked != newest:
        plan.notes.append(f"tracker names iteration {tracked} but the newest complete save is {newest}: both kept")
    return plan


def stray_states(megatron: Path, below: int) -> list[int]:
    """Iterations < below with a rollout state file but no checkpoint dir: what a rotation cut
    short between deleting a save's state file and its dir leaves behind."""
    dirs = iter_dirs(megatron)
    return sorted(it for it in rollout_states(megatron) if it < below and it not in dirs)


def rotate(megatron: Path, dry_run: bool = False) -> RotationPlan:
    plan = plan_rotation(megatron)
    if not dry_run:
        for path in plan.delete:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    return plan


# --- HF exports ------------------------------------------------------------------------------

def safetensors_names(path: Path) -> set[str]:
    """Tensor names in a safetensors file's header (8-byte little-endian length, then JSON), read
    without the safetensors library. ValueError when the header is cut short or not JSON."""
    with open(path, "rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        if not 2 <= size <= 100_000_000:
            raise ValueError(f"header length {size}")
        raw = fh.read(size)
    if len(raw) != size:
        raise ValueError("header cut short")
    header = json.loads(raw)
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    return set(header) - {"__metadata__"}


def weight_names(path: Path) -> dict[str, str]:
    """{tensor name: file} of an HF dir: its model.safetensors.index.json, else the headers of its
    *.safetensors files. ValueError when the index or a header is unreadable."""
    path = Path(path)
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            return {str(k): str(v) for k, v in json.loads(index.read_text())["weight_map"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"model.safetensors.index.json unreadable ({exc})") from None
    out = {}
    for f in sorted(path.glob("*.safetensors")):
        out.update(dict.fromkeys(safetensors_names(f), f.name))
    return out


def hf_problems(path: Path, origin: Path | None = None) -> list[str]:
    """Why an HF model dir is not usable (empty list = complete): config, and every weight its
    index names present in the shard file that holds it; with `origin` (the model it was trained
    from), every weight name of the origin too -- Qwen3.5's visual tower is not in Megatron, so a
    conversion without --add-missing-from-origin-hf leaves it out (slime 624b824,
    tools/convert_torch_dist_to_hf.py:128-140,192-194; --save-hf never adds it,
    slime/backends/megatron_utils/hf_checkpoint_saver.py:78)."""
    path = Path(path)
    if not path.is_dir():
        return [f"{path} does not exist"]
    problems = []
    if not (path / "config.json").is_file():
        problems.append("config.json missing")
    try:
        names = weight_names(path)
    except (OSError, ValueError) as exc:
        return problems + [str(exc)]
    if not names:
        return problems + ["no *.safetensors weights"]
    by_file: dict[str, set[str]] = {}
    for name, fname in names.items():
        by_file.setdefault(fname, set()).add(name)
    missing_files = sorted(f for f in by_file if not (path / f).is_file())
    if missing_files:
        problems.append(f"weight files named by the index are missing: {', '.join(missing_files[:3])}")
    for fname in sorted(set(by_file) - set(missing_files)):
        try:
            absent = sorted(by_file[fname] - safetensors_names(path / fname))
        except (OSError, ValueError) as exc:
            problems.append(f"{fname} unreadable ({exc}): written only in part?")
            continue
        if absent:
            problems.append(f"{fname} lacks {len(absent)} weight(s) its index names, e.g. {absent[0]}")
    if origin is not None:
        try:
            lost = sorted(set(weight_names(origin)) - set(names))
        except (OSError, ValueError) as exc:
            return problems + [f"cannot read the original model's weight names in {origin}: {exc}"]
        if lost:
            problems.append(f"{len(lost)} weight(s) of the original model missing, e.g. {lost[0]} (the converter "
                            "copies them from the original HF dir only with --add-missing-from-origin-hf)")
    return problems


# What slime's converter prints for each tensor -a copies from --origin-hf-dir (slime 624b824
# tools/convert_torch_dist_to_hf.py:133).
ADDED_LINE = re.compile(r"^add (\S+) from origin hf checkpoint$", re.M)
# Weights of Qwen3.5's HF checkpoint that slime's Megatron model does not hold, so the converter can
# only copy them from the original: the visual tower (hf_checkpoint_saver.py:78 leaves it out),
# the multi-token-prediction head and, when the embeddings are tied, lm_head.
ONLY_FROM_ORIGIN = ("model.visual.", "visual.")
NOT_TRAINED = (*ONLY_FROM_ORIGIN, "mtp.", "model.mtp.")


def added_from_origin(log_text: str) -> set[str]:
    """The tensor names a converter run reported copying from the original HF dir."""
    return set(ADDED_LINE.findall(log_text))


def ties_embeddings(origin: Path) -> bool:
    """config.json's tie_word_embeddings (top level or text_config; transformers' default False)."""
    try:
        cfg = json.loads((Path(origin) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    return bool(cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))


def trained_model_holds(name: str, tied: bool) -> bool:
    return not (name.startswith(NOT_TRAINED) or (tied and name == "lm_head.weight"))


def origin_copy_problems(added: set[str] | None, origin: Path) -> list[str]:
    """Why a conversion's copies from the original are not only what the trained model lacks:
    with -a, "nothing of the original missing" holds even for a converter that wrote none of the
    trained weights (the export would be the base model), so every copied tensor must be one the
    trained model does not hold, and the log must list the visual tower, which only the original
    can supply (else it cannot tell trained weights from copied ones). added None: no log of it."""
    try:
        only_origin = sorted(n for n in weight_names(origin) if n.startswith(ONLY_FROM_ORIGIN))
    except (OSError, ValueError) as exc:
        return [f"cannot read the original model's weight names in {origin}: {exc}"]
    if added is None:
        added = set()
    tied = ties_embeddings(origin)
    trained = sorted(n for n in added if trained_model_holds(n, tied))
    if trained:
        return [f"the converter copied {len(trained)} weight(s) the trained model holds from the original model, "
                f"e.g. {trained[0]}: the export would hold the base model's weights there"]
    unlisted = [n for n in only_origin if n not in added]
    if unlisted:
        return [f"the converter's log does not say it copied {unlisted[0]} from the original model (slime's "
                "converter prints 'add NAME from origin hf checkpoint'): trained and copied weights cannot be told "
                "apart"]
    return []


def hf_target(link: Path) -> Path | None:
    """The directory the `hf` symlink points at (resolved against its parent), or None."""
    link = Path(link)
    if not link.is_symlink():
        return None
    return (link.parent / os.readlink(link)).resolve()


def flip_hf(link: Path, target: Path) -> None:
    """Point `link` at `target` atomically (a relative symlink, renamed over the old one), so the
    eval server never sees a missing or half-written model, and the run can move machines."""
    link, target = Path(link), Path(target)
    if link.exists() and not link.is_symlink():
        raise ToolkitError("the HF export path is a real directory, not the symlink the toolkit manages",
                           str(link), f"move it aside (e.g. mv {link} {link}.old) and run again")
    tmp = link.with_name(f".{link.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    os.symlink(os.path.relpath(target, link.parent), tmp)
    os.replace(tmp, link)


def old_exports(save_dir: Path, keep: Path) -> list[Path]:
    """What an export leaves behind once `hf` points at `keep`: older hf-* directories, the
    converter's staging dirs (.hf-*) and a flip's temp link (.hf.tmp-*), e.g. after a kill."""
    keep = Path(keep).resolve()
    out = []
    for p in sorted(Path(save_dir).iterdir()):
        if p.name.startswith(".hf.tmp-") and p.is_symlink():
            out.append(p)
        elif (HF_RE.match(p.name) or p.name.startswith(".hf-")) and p.is_dir() and p.resolve() != keep:
            out.append(p)
    return out


def remove_old_exports(save_dir: Path, keep: Path) -> list[Path]:
    """Delete old_exports(save_dir, keep) (after the flip)."""
    removed = old_exports(save_dir, keep)
    for p in removed:
        if p.is_symlink():
            p.unlink()
        else:
            shutil.rmtree(p)
    return removed
