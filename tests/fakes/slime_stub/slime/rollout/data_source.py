"""slime.rollout.data_source in miniature: groups from --prompt-data (JSONL) with slime's counters.

Reading the file is slime.utils.data.Dataset's (slime 624b824): the prompt is line[--input-key]
(default "input"); a string stays a string unless --apply-chat-template (data.py:142-150), and when
the model has a processor the prompt must be a list of messages -- slime asserts it for every line
(data.py:259-264) inside RolloutManager.__init__, before any rollout. slime's load_processor
(utils/processing_utils.py:85-97) gets one from transformers' AutoProcessor, which transformers
5.23 maps for image-text models such as Qwen3.5 (models/auto/processing_auto.py:81); the stand-in
counts a model dir holding preprocessor_config.json or processor_config.json as one with a
processor. --apply-chat-template is not modelled (the toolkit renders its own prompts).
Sample(prompt, label=line[label_key], metadata=line[metadata_key] or {}); get_samples(n) hands out
n groups of n_samples_per_prompt deep copies, numbering group_index and index globally, walking the
(per-epoch shuffled) data in order. save/load keep the counters in
DIR/rollout/global_dataset_state_dict_<id>.pt (JSON here; torch.save in slime).
"""

import copy
import json
import os
import random
from pathlib import Path

from slime.utils.types import Sample


def has_processor(model_dir) -> bool:
    """What slime's load_processor answers for a model dir, as the stand-in models it."""
    return any((Path(model_dir) / name).is_file() for name in ("preprocessor_config.json", "processor_config.json"))


class RolloutDataSourceWithBuffer:
    def __init__(self, args):
        self.args = args
        self.epoch_id = self.sample_group_index = self.sample_index = self.sample_offset = 0
        self.buffer = []
        self.origin = []
        if getattr(args, "apply_chat_template", False):
            raise NotImplementedError("slime stub: --apply-chat-template is not modelled")
        processor = has_processor(args.hf_checkpoint)
        label_key = getattr(args, "label_key", None)
        with open(args.prompt_data, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    prompt = row.get(getattr(args, "input_key", "input"))
                    if processor:
                        assert isinstance(
                            prompt, list
                        ), f"prompt must be a list when processor is not None, got {type(prompt)} instead"
                    self.origin.append(Sample(prompt=prompt, label=row[label_key] if label_key else None,
                                              metadata=row.get(getattr(args, "metadata_key", "metadata")) or {},
                                              multimodal_inputs={"images": None, "videos": None} if processor
                                              else None))
        self._shuffle()

    def _shuffle(self):
        self.samples = list(self.origin)
        if getattr(self.args, "rollout_shuffle", False):
            random.Random(getattr(self.args, "rollout_seed", 42) + self.epoch_id).shuffle(self.samples)

    def get_samples(self, num_samples):
        out = self.buffer[:num_samples]
        self.buffer = self.buffer[num_samples:]
        prompts = []
        while len(prompts) + len(out) < num_samples:
            if self.sample_offset >= len(self.samples):
                self.epoch_id += 1
                self.sample_offset = 0
                self._shuffle()
            prompts.append(self.samples[self.sample_offset])
            self.sample_offset += 1
        for prompt in prompts:
            group = []
            for _ in range(self.args.n_samples_per_prompt):
                s = copy.deepcopy(prompt)
                s.group_index, s.index = self.sample_group_index, self.sample_index
                self.sample_index += 1
                group.append(s)
            self.sample_group_index += 1
            out.append(group)
        return out

    def add_samples(self, samples):
        self.buffer.extend(samples)

    def _path(self, root, rollout_id):
        return os.path.join(root, "rollout", f"global_dataset_state_dict_{rollout_id}.pt")

    def save(self, rollout_id):
        state = {k: getattr(self, k) for k in ("sample_offset", "epoch_id", "sample_group_index", "sample_index")}
        path = self._path(self.args.save, rollout_id)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(state, fh)

    def load(self, rollout_id=None):
        path = self._path(self.args.load, rollout_id) if getattr(self.args, "load", None) else None
        if not path or not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as fh:
            for k, v in json.load(fh).items():
                setattr(self, k, v)
        self._shuffle()

    def __len__(self):
        return len(self.origin)
