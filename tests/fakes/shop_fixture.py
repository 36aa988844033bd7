"""A tiny ShopSimulator dataset plus a matching fake-policy file, written inside a test.

    from fakes.shop_fixture import write_shop_fixture
    fx = write_shop_fixture(tmp_path / "shop", n_tasks=8, n_eval=4)
    # fx["server_file"]  items_eval_train.json: what fake_shopsim --tasks loads (eval then train)
    # fx["eval_file"], fx["train_file"]: fine_items_{eval,train}_standard.jsonl (published split)
    # fx["policy"]: fake_sglang --fake-policy file; fx["tasks"]: [{idx, instruction, asin, ...}]

Records follow ShopSimulator's published dataset format (docs/shopsim_protocol.md). Products come in pairs that share a
search word (款式<k>) but differ in category, attributes, options and price, so the partner is
the natural wrong product. With quirks=True the file also holds what upstream skips when it
enumerates goals (a record without attributes, a duplicate asin, an over-long asin) and a record
with two instructions, to test that task indices follow the server's order.
"""

from __future__ import annotations

import json
from pathlib import Path

COLORS = ["红色", "蓝色", "白色", "黑色"]
NOUNS = ["连衣裙", "运动鞋", "保温杯", "双肩包"]


def _record(i: int) -> dict:
    k, side = divmod(i, 2)
    noun = NOUNS[k % len(NOUNS)]
    good = ["纯棉", "修身"] if side == 0 else ["涤纶", "宽松"]
    color = COLORS[(i + side) % len(COLORS)]
    other = COLORS[(i + side + 1) % len(COLORS)]
    asin = str(700000 + i)
    return {
        "asin": asin, "title": f"款式{k:03d} {color} {noun} {' '.join(good)}",
        "category": f"服饰 › 品类{k} › {noun}{side}", "query": f"款式{k:03d} {noun}",
        "product_category": noun, "shop_name": f"店铺{i}",
        "pricing": [50.0 + 10 * i] if side == 0 else [80.0 + 10 * i, 120.0 + 10 * i],
        "customization_options": {"颜色": [{"value": color, "image": None, "price": None},
                                           {"value": other, "image": None, "price": None}]},
        "attribute": good, "images": [f"img{i}.jpg"], "full_description": f"{noun} 描述 {i}",
        "small_description": [f"{good[0]} 材质"],
        "instructions": [{"instruction": f"我想买一件款式{k:03d}的{color}{noun}，要{good[0]}、{good[1]}的",
                          "instruction_sample": f"帮我挑一件{noun}", "instruction_simple": f"想买{noun}",
                          "attributes": good, "instruction_options": [color]}],
        "user_persona": {"__reasoning__": "r", "年龄": "25"} if i % 3 == 0 else {},
        "reason_key": "年龄" if i % 3 == 0 else None,
    }


def records(n: int, quirks: bool = False) -> list[dict]:
    out = [_record(i) for i in range(n)]
    if quirks:
        no_attr = _record(n)
        no_attr["instructions"][0]["attributes"] = []
        dup = _record(1)
        dup["instructions"][0]["instruction"] = "重复的商品"
        long = _record(n + 1)
        long["asin"] = "9" * 21
        two = _record(n + 2)
        two["instructions"].append({**two["instructions"][0], "instruction": two["instructions"][0]["instruction"]
                                    + "（第二个说法）", "instruction_options": []})
        out[2:2] = [no_attr, dup, long]
        out.append(two)
    return out


def goals(recs: list[dict]) -> list[dict]:
    """Upstream's goal enumeration, written out plainly for assertions (a third copy, on purpose)."""
    seen, out = set(), []
    for rec in recs:
        if rec["asin"] == "nan" or len(rec["asin"]) > 20 or rec["asin"] in seen:
            continue
        seen.add(rec["asin"])
        if not rec["instructions"][0]["attributes"]:
            continue
        for ins in rec["instructions"]:
            out.append({"idx": len(out), "asin": rec["asin"], "instruction": ins["instruction"],
                        "query": rec["query"], "options": ins["instruction_options"]})
    return out


def write_shop_fixture(out_dir: Path, n_tasks: int = 8, n_eval: int = 4, *, quirks: bool = False,
                       base_success: float = 0.3, effects: list | None = None, seed: int = 0) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    recs = records(n_tasks, quirks)
    cut = n_eval + (3 if quirks and n_eval > 2 else 0)
    ev, tr = recs[:cut], recs[cut:]
    paths = {"server_file": out_dir / "items_eval_train.json",
             "eval_file": out_dir / "fine_items_eval_standard.jsonl",
             "train_file": out_dir / "fine_items_train_standard.jsonl",
             "policy": out_dir / "policy.json"}
    paths["server_file"].write_text(json.dumps(recs, ensure_ascii=False), encoding="utf-8")
    for key, part in (("eval_file", ev), ("train_file", tr)):
        paths[key].write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part), encoding="utf-8")
    tasks = goals(recs)
    policy = {"seed": seed, "base_success": base_success, "effects": effects or [],
              "tasks": [{"instruction": t["instruction"], "query": t["query"], "asin": t["asin"],
                         "options": t["options"]} for t in tasks]}
    paths["policy"].write_text(json.dumps(policy, ensure_ascii=False, indent=1), encoding="utf-8")
    return {**paths, "tasks": tasks, "records": recs}
