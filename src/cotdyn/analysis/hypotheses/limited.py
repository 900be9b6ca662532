"""The registered analysis of a limited study (config ``limit``; cotdyn.plan.config.study_limit).

Run on the first N problems of each benchmark, the analysis computes every statistic as usual,
but a subset tests no registered hypothesis: each verdict that decides (supported, not supported,
and the estimation verdicts) reads ``descriptive``, with what the numbers would have read kept
beside it (``reading_on_the_subset``) and the scope named; ``not_estimable`` stays, as it decides
nothing. The rule hypotheses and the audit share it (cotdyn.audit.derive.derive_analysis).
"""

from __future__ import annotations

DESCRIPTIVE = "descriptive"
UNDECIDED = "not_estimable"


def _descriptive(block: dict) -> None:
    verdict = block.get("verdict")
    if verdict is not None and verdict != UNDECIDED:
        block["reading_on_the_subset"] = verdict
        block["verdict"] = DESCRIPTIVE


def descriptive_only(result: dict, limit: int, scope: str) -> dict:
    """``result`` (hypotheses.json's content) with every deciding verdict read as descriptive and
    the study's scope recorded (``scope``: cotdyn.plan.config.limited_scope's words)."""
    result["scope"] = {"limit": limit, "descriptive": True, "note": scope}
    for verdict in (result.get("verdicts") or {}).values():
        _descriptive(verdict)
        verdict["scope"] = scope
        for block in (verdict.get("cells") or {}).values():
            if isinstance(block, dict):
                _descriptive(block)
    return result
