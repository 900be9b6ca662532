"""plan.md: every registered value of plan.yaml rendered as text, so the two cannot drift
(docs/reference.md section 7)."""

from __future__ import annotations

from typing import Any

from cotdyn.plan.timelock import THIS_REGISTRATION


def _value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(_value(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_value(v)}" for k, v in value.items())
    return str(value).replace("|", "\\|")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(_value(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _rate(share: dict) -> str:
    return f"{share['rate']:.3f} ({share['se']:.3f})"


def _power_lines(table: dict) -> list[str]:
    """The power table computed at registration (power.json, cotdyn.analysis.power): per powered
    hypothesis and each of its cells, P(supported) under the assumed effect and under the null."""
    lines = [
        "## Power at registration",
        "",
        f"{table['reps']} simulated studies of the registered size at each effect size ("
        f"{', '.join(f'{s:g}' for s in table['scales'])} times the assumed effects; 0 is the null; seed "
        f"{table['seed']}), each through the registered analysis; MC standard errors in brackets. "
        f"Required: power >= {table['min_power']:g}. Minimum detectable effect: the multiple of the assumed effect "
        "at which power reaches it. The table is power.json; its sha256 is in REGISTERED.",
        "",
    ]
    rows = []
    for h in table["hypotheses"]:
        if not h["powered"]:
            continue
        mde = h["minimum_detectable"]["scale"]
        mde = "not reached" if mde is None else f"{mde:.2f} x assumed"
        flag = " (UNDERPOWERED)" if h["underpowered"] else ""
        rows.append([h["id"], "all its cells", _rate(h["power"]) + flag, _rate(h["false_support"]), mde])
        for cell, shares in h["effect"]["cells"].items():
            rows.append([h["id"], cell, _rate(shares["supported"]), _rate(h["null"]["cells"][cell]["supported"]), ""])
    return lines + _table(["hypothesis", "cell", "power", "false support", "minimum detectable"], rows)


def render_plan_md(plan: dict, power: dict | None = None) -> str:
    """plan.md: every registered value of plan.yaml as text, generated so they cannot drift; with
    ``power``, the power table computed at registration (power.json beside REGISTERED)."""
    lines = [
        f"# {plan.get('title', 'Registered plan')}",
        "",
        "<!-- Generated from plan.yaml by cotdyn.plan.registration.render_plan_md; do not edit. -->",
        "",
        f"Plan version {plan.get('plan_version')}. The sha256 of plan.yaml and the registration date are in "
        "REGISTERED; declared deviations are in deviations.yaml.",
        "",
        "## Frozen protocol",
        "",
    ]
    lines += _table(["parameter", "registered value"], [[k, v] for k, v in plan["protocol"].items()])
    if "time_lock" in plan:
        locked = plan["time_lock"]
        lines += [
            "## Generation time lock",
            "",
            "Every request seed's key holds the registration's lock: "
            + (
                "this plan's own sha256 and its timestamp token's, where REGISTERED records one."
                if locked == THIS_REGISTRATION
                else f"the registration named here ({_value(locked)})."
            ),
            "",
        ]
    lines += ["## Exclusion", ""]
    lines += _table(["rule", "value"], [[k, v] for k, v in plan["exclusion"].items()])
    panel = plan.get("panel", {})
    if panel:
        lines += [
            "## Panel",
            "",
            f"Anchor: {panel.get('anchor')}; distilled: {panel.get('distilled')}; "
            f"standard: {_value(panel.get('standard', []))}.",
            "",
        ]
        lines += _table(
            ["model", "id", "revision"],
            [[k, m.get("id"), m.get("revision")] for k, m in panel.get("models", {}).items()],
        )
        lines += _table(
            ["benchmark", "hub", "n", "content sha256"],
            [[k, b.get("hub"), b.get("n"), b.get("content_sha256")] for k, b in panel.get("benchmarks", {}).items()],
        )
    lines += ["## Hypotheses", ""]
    lines += _table(
        ["id", "role", "statistic", "cells", "criterion"],
        [[h["id"], h["role"], h["statistic"], h["cells"], h["criterion"]] for h in plan["hypotheses"]],
    )
    lines += [f"## Holm family (alpha = {plan['holm']['alpha']})", ""]
    lines += _table(["hypothesis", "cell", "p-value"], [[f["id"], f["cell"], f["p"]] for f in plan["holm"]["family"]])
    if "undefined_p" in plan["holm"]:
        lines += [
            f"A member whose p-value is undefined enters the correction as p = {plan['holm']['undefined_p']}.",
            "",
        ]
    lines += ["## Analysis parameters", ""]
    lines += _table(
        ["group", "parameter", "value"],
        [[g, k, v] for g, params in plan["analysis"].items() for k, v in params.items()],
    )
    if "verdict_rule" in plan:
        lines += ["## Verdict rule", ""]
        lines += _table(["rule", "value"], [[k, v] for k, v in plan["verdict_rule"].items()])
    if "assumed_effects" in plan:
        effects = plan["assumed_effects"]
        lines += ["## Assumed effects (the sample-size rationale)", ""]
        lines += _table(
            ["setting", "value"],
            [[k, effects[k]] for k in ("min_power", "replicates", "seed", "scales") if k in effects],
        )
        laws = [["default", effects.get("default", {})]] + [[c, law] for c, law in effects.get("cells", {}).items()]
        lines += _table(["cell", "assumed law"], laws)
    if power is not None:
        lines += _power_lines(power)
    if "changes_from_previous_version" in plan:
        lines += ["## Deviations from the previous plan version", ""]
        lines += _table(
            ["key", "previous version", "this version", "why"],
            [
                [c["key"], c.get("previous", c.get("v1")), c.get("this", c.get("v2")), c["why"]]
                for c in plan["changes_from_previous_version"]
            ],  # fmt: skip
        )
    return "\n".join(lines).rstrip("\n") + "\n"
