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


def render_plan_md(plan: dict) -> str:
    """plan.md: every registered value of plan.yaml as text, generated so they cannot drift."""
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
