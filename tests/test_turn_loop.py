"""Training rollouts and evaluation play a turn the same way (issue 26, item 4).

Both paths used to carry their own copy of the multi-turn loop (budget, /generate, the response
into the transcript, interact, the persona observation, the observation into the transcript) and
their own tokenizer loader; a fix made in one copy then silently missed the other. Now the loop is
pyhelpers/policy/turns.py and the loader pyhelpers/policy/tokenizer.py, and the two paths differ
only in what they pass in. These tests read the code (ast) so that a second copy fails here.
"""

from __future__ import annotations

import ast
import asyncio
from types import SimpleNamespace

import pytest
from conftest import ROOT

PKG = ROOT / "pyhelpers"
# What only the turn loop does with a transcript: size the next generation, append a response, append
# an observation (the prompt builder's methods; the builder itself defines them, never calls them).
TURN_CALLS = {"max_new_tokens", "add_response", "add_observation"}
# The packages that play episodes for the policy (skills/tokens.py counts skill tokens with its own,
# offline tokenizer read: not the policy's prompt).
POLICY_USERS = ("policy", "rollout", "evaluate")


def _calls(path) -> set[str]:
    """Names of the attributes this module calls (x.name(...))."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}


def _imports(path) -> set[tuple[str, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}


def _modules(packages=None):
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if packages is None or rel.parts[1] in packages:
            yield rel.as_posix(), path


def test_one_turn_loop_plays_training_and_evaluation_episodes():
    loops = {rel: sorted(_calls(path) & TURN_CALLS) for rel, path in _modules() if _calls(path) & TURN_CALLS}
    assert set(loops) == {"pyhelpers/policy/turns.py"}, f"the turn loop is written out more than once: {loops}"
    for episode in ("evaluate/episode.py", "rollout/episode.py"):
        assert ("pyhelpers.policy.turns", "play_turns") in _imports(PKG / episode), \
            f"pyhelpers/{episode} does not play its turns through pyhelpers.policy.turns.play_turns"


def test_one_loader_gives_training_and_evaluation_the_policy_tokenizer():
    loaders = [rel for rel, path in _modules(POLICY_USERS) if "from_pretrained" in _calls(path)]
    assert loaders == ["pyhelpers/policy/tokenizer.py"], f"the policy tokenizer is loaded in: {loaders}"
    for user in ("evaluate/val.py", "rollout/runtime.py"):
        assert ("pyhelpers.policy", "tokenizer") in _imports(PKG / user), \
            f"pyhelpers/{user} does not load the policy tokenizer through pyhelpers.policy.tokenizer"


# ----------------------------------------------------------------------------- both paths, one script

class ScriptedPolicy:
    """A policy server that answers each /generate with the next scripted reply (its tokens, as the
    engine would return them) and records the tokens it was shown."""

    def __init__(self, builder, replies: list[str]):
        self.builder, self.replies, self.prompts = builder, list(replies), []

    async def generate(self, token_ids, params, rid=None):  # rid: SGLangClient.generate's (evaluation names its episode)
        from pyhelpers.policy.sglang_client import GenerateResult

        self.prompts.append((list(token_ids), params["max_new_tokens"]))
        text = self.replies.pop(0)
        ids = self.builder.encode(text)
        return GenerateResult(text=text, output_ids=ids, logprobs=[-0.5] * len(ids), finish_reason="stop")


class ScriptedSimulator:
    """One ShopSimulator slot whose interact answers with the next scripted page, the last one a
    purchase; it records the texts it was sent."""

    def __init__(self, task: dict, pages: list[str]):
        from pyhelpers.shopsim.protocol import ResetResult

        self.task, self.pages, self.sent, self.held = task, list(pages), [], set()
        self.reset = ResetResult(env_idx=0, idx=task["shopsim_idx"], instruction=task["instruction"])
        self.env_idx, self.over, self.released = 0, False, False

    def episode_slot(self, idx):
        return self

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.released = True

    async def interact(self, reply, **_):
        from pyhelpers.shopsim.protocol import Scores, StepResult

        self.sent.append(reply)
        page = self.pages.pop(0)
        done = not self.pages
        scores = Scores(loose=0.75, strict=0.5, success=False) if done else Scores(0.0, 0.0, False)
        return StepResult(env_idx=0, done=done, over=False, reward=scores.loose, observation=page, scores=scores,
                          raw={"idx": self.task["shopsim_idx"]})


TASK = {"task_id": "t0007", "shopsim_idx": 7, "instruction": "买一双白色运动鞋", "scenario": "persona",
        "instruction_simple": "想要双鞋"}
REPLIES = ["<think>先搜</think>\nAction: search[白色运动鞋]", "嗯", "<think>买</think>\nAction: click[购买]"]
PAGES = ["第一页 [SEP] 买一双白色运动鞋 [SEP] 按钮", "第二页 [SEP] 买一双白色运动鞋 [SEP] 按钮", "完成"]


@pytest.fixture(scope="module")
def builder(tmp_path_factory):
    from support.tokenizer import build_tokenizer

    from pyhelpers.evaluate.val import load_builder

    return load_builder(str(build_tokenizer(tmp_path_factory.mktemp("tok"))))


def _train(builder, max_turns: int):
    from pyhelpers.rollout import episode
    from pyhelpers.skills.render import Rendered

    policy, sim = ScriptedPolicy(builder, REPLIES), ScriptedSimulator(TASK, PAGES)
    settings = SimpleNamespace(max_turns=max_turns, rollout_max_context_len=4096, rollout_max_response_len=256,
                               episode_timeout_s=60.0, tasks_path="tasks.jsonl", reward="loose")
    rt = SimpleNamespace(settings=settings, builder=builder, policy=policy, shopsim=sim)
    ep = asyncio.run(episode.play(rt, TASK, Rendered(""), {"temperature": 1.0}, slots=asyncio.Semaphore(1),
                                  skip=lambda: False, aborted=lambda: False))
    return ep.termination, [t.get("action", "") for t in ep.turns], ep.reward, policy.prompts, sim.sent


def _evaluate(builder, max_turns: int):
    from pyhelpers.evaluate import episode
    from pyhelpers.evaluate.settings import EvalSettings

    policy, sim = ScriptedPolicy(builder, REPLIES), ScriptedSimulator(TASK, PAGES)
    settings = EvalSettings(shopsim_url="http://127.0.0.1:9", server_url="http://127.0.0.1:9", tokenizer_dir="",
                            max_turns=max_turns, max_context_len=4096, max_response_len=256,
                            sampling={"temperature": 1.0}, concurrency=1, slots=1, skill_token_budget=2000,
                            episode_retries=0, max_infra_share=0.0, reset_timeout_s=5.0, shopsim_ready_s=5.0)

    async def main():
        ctx = episode.Context(settings, builder)
        await ctx.aclose()  # its own clients are never used: the scripted ones answer
        ctx.shopsim, ctx.server = sim, policy
        return await episode.play(ctx, episode.EpisodeSpec(id="val-t0007", task=TASK))

    rec = asyncio.run(main())
    return rec["termination"], rec["actions"], rec["reward"], policy.prompts, sim.sent


@pytest.mark.parametrize("max_turns", [3, 2])
def test_training_and_evaluation_play_the_same_turns_on_the_same_script(builder, max_turns):
    """Same policy replies and pages: the same tokens shown each turn (persona page rewritten, the
    reasoning kept), the same texts sent, the same ending on both paths."""
    train, evaluate = _train(builder, max_turns), _evaluate(builder, max_turns)
    assert train == evaluate
    termination, actions, reward, prompts, sent = train
    assert (termination, reward) == (("done", 0.75) if max_turns == 3 else ("max_turns", 0.0))
    assert actions == ["search[白色运动鞋]", "", "click[购买]"][:max_turns] and sent == REPLIES[:max_turns]
    assert "想要双鞋" in builder.decode(prompts[1][0]) and "先搜" in builder.decode(prompts[-1][0])
