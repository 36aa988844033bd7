"""Rows and text for `skillbank show` and `skillbank diff` (pure; the CLI only echoes)."""

from __future__ import annotations

from collections.abc import Mapping

from pyhelpers.skills.render import STATUS_RANK

TITLE_WIDTH = 40


def _gate_text(last: Mapping | None) -> str:
    if not last:
        return "-"
    return (f"{last['estimate']:+.3f} [{last['ci_low']:+.3f}, {last['ci_high']:+.3f}] "
            f"n={last['n']} {last['decision']} r{last['round']}")


def show_rows(bank: Mapping) -> list[dict]:
    """One row per skill, by status (active first) then id."""
    rows = []
    for s in sorted(bank["skills"], key=lambda s: (STATUS_RANK.get(s["status"], 9), s["id"])):
        rows.append({"id": s["id"], "status": s["status"], "title": s["title"], "tokens": s["render"]["tokens"],
                     "proposals": s["counters"]["proposals"], "last_gate": s["gate"][-1] if s["gate"] else None})
    return rows


def _table(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in [header, *body]]
    return "\n".join(lines)


def format_show(bank: Mapping) -> str:
    rows = show_rows(bank)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    summary = ", ".join(f"{counts[k]} {k}" for k in sorted(counts, key=lambda k: STATUS_RANK.get(k, 9))) or "empty"
    body = [[r["id"], r["status"], r["title"][:TITLE_WIDTH], str(r["tokens"]), str(r["proposals"]),
             _gate_text(r["last_gate"])] for r in rows]
    head = f"round {bank['round']}, tokenizer {bank['tokenizer']['name']}: {summary}"
    if not body:
        return head
    return head + "\n" + _table(["id", "status", "title", "tokens", "proposals", "last gate (effect [CI] n)"], body)


def diff_banks(a: Mapping, b: Mapping) -> dict:
    """added / removed ids, status changes and wording changes from bank a to bank b."""
    sa = {s["id"]: s for s in a["skills"]}
    sb = {s["id"]: s for s in b["skills"]}
    both = sorted(sa.keys() & sb.keys())
    return {
        "rounds": [a["round"], b["round"]],
        "added": [{"id": i, "status": sb[i]["status"], "title": sb[i]["title"]} for i in sorted(sb.keys() - sa.keys())],
        "removed": [{"id": i, "status": sa[i]["status"], "title": sa[i]["title"]} for i in sorted(sa.keys() - sb.keys())],
        "status_changes": [{"id": i, "from": sa[i]["status"], "to": sb[i]["status"], "title": sb[i]["title"]}
                           for i in both if sa[i]["status"] != sb[i]["status"]],
        "edited": [{"id": i, "version": [sa[i]["version"], sb[i]["version"]]}
                   for i in both if sa[i]["text_sha256"] != sb[i]["text_sha256"]],
    }


def format_diff(d: Mapping) -> str:
    lines = [f"round {d['rounds'][0]} -> {d['rounds'][1]}: {len(d['added'])} added, {len(d['removed'])} removed, "
             f"{len(d['status_changes'])} status changes, {len(d['edited'])} edited"]
    lines += [f"+ {r['id']}  {r['status']:<9}  {r['title'][:TITLE_WIDTH]}" for r in d["added"]]
    lines += [f"- {r['id']}  {r['status']:<9}  {r['title'][:TITLE_WIDTH]}" for r in d["removed"]]
    lines += [f"~ {r['id']}  {r['from']} -> {r['to']}  {r['title'][:TITLE_WIDTH]}" for r in d["status_changes"]]
    lines += [f"e {r['id']}  version {r['version'][0]} -> {r['version'][1]}" for r in d["edited"]]
    return "\n".join(lines)
