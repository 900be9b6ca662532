"""Seed 003's further analyses, each a table with its bootstrap CI (seed 003 sections 2, 3.4, 5.1, 5.2,
6.1, 7, Appendices C and F; docs/reference.md section 6).

Outside the confirmatory verdicts, and computed from stored records only. Functions over one cell's
records take that cell's problem-resample matrix ``idx`` (``stats.cell_resamples`` over its analyzed
problems, the matrix its registered analysis reads), so every interval here is paired with H1-H5.
The analyses across generations (seeds, budget probes) are ``cotdyn.analysis.secondary_generations``.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from cotdyn import stats
from cotdyn.analysis.exploratory import analyzed, shape_at
from cotdyn.analysis.hypotheses.cells import group_rule, kept_flags
from cotdyn.files.columns import require_columns
from cotdyn.protocol.signals import registered_signals
from cotdyn.stats import finite_or_none


def _ci(values: np.ndarray, level: float, resamples: int) -> dict:
    interval = stats.percentile_interval(values, level) if resamples else stats.Interval(None, None, 0, 0)
    return {"ci_lo": interval.lo, "ci_hi": interval.hi, "ci_n_kept": interval.n_kept}


def judged(row: dict, sizes: Mapping[str, int], groups, estimates: Sequence[str], resamples: int) -> dict:
    """The registered analysis' small-group rule and kept-fraction flag on one row (plan
    ``analysis.groups``, ``analysis.bootstrap.min_kept_fraction``; ``groups`` carries them, None for
    none): below min_group_size the ``estimates`` are null with the reason; below
    precise_group_size, or a CI that kept too few resamples, the row is flagged."""
    row = dict(row, flags=None)
    if groups is None:
        return row
    reason, flags = group_rule(dict(sizes), groups)
    if reason:
        row.update({key: None for key in estimates})
        row["reason"] = "; ".join(r for r in (row.get("reason"), reason) if r)
        return row
    if row.get("ci_lo") is not None:
        flags += kept_flags(stats.Interval(row["ci_lo"], row["ci_hi"], row["ci_n_kept"], resamples), groups)
    row["flags"] = "; ".join(flags) or None
    return row


def _rows(idx: np.ndarray | None, n: int) -> np.ndarray:
    """The resample matrix, or an empty one when no CI is asked for."""
    return np.zeros((0, n), dtype=np.int64) if idx is None else idx


# ---------------------------------------------------------------------------------------------
# Selective accuracy at a fixed coverage (seed 003 section 6.1, Appendix F.2: the original's table)


def top_k_accuracy_rows(score: np.ndarray, correct: np.ndarray, idx: np.ndarray, k: int) -> np.ndarray:
    """Per resample row, the expected accuracy of the k problems ranked first by descending score,
    ties broken by a uniform draw that never sees the label: tiers above the cut are accepted
    whole and the cut tier contributes its accepted count times its accuracy (its exact expectation)."""
    tiers = stats.descending_tiers(score)
    n_tiers = int(tiers.max()) + 1
    codes = 2 * tiers.astype(np.int64) + np.asarray(correct, dtype=np.int64)
    counts = stats.category_counts(codes, idx, 2 * n_tiers).reshape(idx.shape[0], n_tiers, 2)
    per_tier = counts.sum(axis=2)
    accepted = np.clip(k - (np.cumsum(per_tier, axis=1) - per_tier), 0, per_tier)
    share = np.divide(counts[:, :, 1], per_tier, out=np.zeros(per_tier.shape), where=per_tier > 0)
    return (accepted * share).sum(axis=1) / k


# Selective accuracy is flagged when more than this share of its k accepted chains is filler
# (docs/reference.md section 6): outside the plan, a reporting threshold of this table only.
FILLER_FLAG_SHARE = 0.10


def top_k_filler(score: np.ndarray, k: int) -> dict:
    """How the k accepted chains are made up (the point sample): ``top_tier_coverage``, the share of
    chains in the signal's top tier (a binary flag's own coverage); ``filler_share``, the share of
    the k accepted chains drawn at random from a tier the signal ranks below its top tier and does
    not accept whole (the cut tier, when it is not the top tier): chains the signal does not prefer
    over the ones it rejects. A cut inside the top tier subsamples the signal's own choice and is
    not filler."""
    tiers = stats.descending_tiers(score)
    per_tier = np.bincount(tiers)
    above = np.cumsum(per_tier) - per_tier
    accepted = np.clip(k - above, 0, per_tier)
    cut = np.flatnonzero((accepted > 0) & (accepted < per_tier))
    filler = int(accepted[cut[0]]) if cut.size and cut[0] > 0 else 0
    return {"top_tier_coverage": float(per_tier[0] / tiers.size), "filler_share": filler / k}


def coverage_k(coverage: float, n: int) -> int:
    """Problems accepted at ``coverage`` of n: floor(coverage x n), as the truncated AURC counts them."""
    return math.floor(coverage * n + 1e-9)  # 1e-9: 0.737 x 1000 must keep k = 737


def selective_accuracy(
    records: pd.DataFrame, coverage: float, idx: np.ndarray | None, level: float, groups=None
) -> list[dict]:
    """Selective accuracy of each signal at a fixed coverage, with its CI (the original reports the
    monotone flag's at 73.7%, its own monotone rate there). A flag that covers less than
    ``coverage`` is topped up from its tied unflagged tier at that tier's accuracy, so every signal
    is compared at exactly k problems; ``filler_share`` says how much of the k is that top-up and
    ``top_tier_coverage`` what the signal covers itself (``top_k_filler``). A row whose filler share
    exceeds FILLER_FLAG_SHARE is flagged."""
    rows = analyzed(records)
    y = rows["correct"].to_numpy(dtype=bool)
    n = len(rows)
    k = coverage_k(coverage, n)
    out = []
    for signal in registered_signals():  # plan-fixed: a newly declared signal adds no row
        name = signal.name
        row = {
            "signal": name,
            "n": n,
            "coverage": float(coverage),
            "k": k,
            "accuracy": finite_or_none(y.mean()) if n else None,
        }
        if k < 1:
            out.append(row | {"selective_accuracy": None, "ci_lo": None, "ci_hi": None, "ci_n_kept": 0,
                              "top_tier_coverage": None, "filler_share": None,
                              "reason": f"coverage {coverage} of {n} analyzed chains accepts none"})  # fmt: skip
            continue
        score = signal.score(rows)
        point = top_k_accuracy_rows(score, y, stats.full_sample(n), k)[0]
        boot = top_k_accuracy_rows(score, y, _rows(idx, n), k)
        filler = top_k_filler(score, k)
        row |= {"selective_accuracy": finite_or_none(point), **_ci(boot, level, boot.size), **filler, "reason": None}
        row = judged(row, {"accepted chains": k}, groups, ("selective_accuracy", "ci_lo", "ci_hi"), boot.size)
        if filler["filler_share"] > FILLER_FLAG_SHARE:
            note = (
                f"filled: {filler['filler_share']:.3f} of the accepted chains are random filler (> {FILLER_FLAG_SHARE})"
            )
            row["flags"] = "; ".join(f for f in (row.get("flags"), note) if f)
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------------
# Early exit: share of the full gap recovered and fraction of the cost (seed 003 section 2)


def early_exit_recovery(
    records: pd.DataFrame,
    epsilon: float,
    transitions: Sequence[int],
    idx: np.ndarray | None,
    level: float,
    groups=None,
) -> list[dict]:
    """For each k: the monotonicity gap from the first k transitions, the share of the full gap it
    recovers (gap_k / gap_full, paired row by row in the bootstrap), and the fraction of the
    trajectory cost it needs, in two units (``cost_unit`` names the first): ``cost_fraction``, in
    answer-bearing points, sum over chains of min(points, k + 1) over the sum of points (the
    original: 2 transitions recover 76% of the gap at 60% of the cost), with its CI; and
    ``prefix_cost_fraction``, in prefixes sampled, ``prefixes_sampled`` over the sum of
    ``n_prefixes`` (with its CI). Both gaps rest on their monotone and non-monotone groups
    (``judged``)."""
    rows = analyzed(records)
    y = rows["correct"].to_numpy(dtype=bool)
    points = rows["n_points"].to_numpy(dtype=np.int64)
    n = len(rows)
    has_prefixes = {"points", "n_prefixes"} <= set(rows.columns)
    prefixes = rows["n_prefixes"].to_numpy(dtype=np.int64) if has_prefixes else None
    full, _ = shape_at(rows["trajectory"], epsilon)
    boot_idx = _rows(idx, n)
    full_point = stats.accuracy_gap_rows(full, y, stats.full_sample(n))[0] if n else np.nan
    full_boot = stats.accuracy_gap_rows(full, y, boot_idx) if n else np.zeros(0)
    out = []
    for k in transitions:
        flag, _ = shape_at(rows["trajectory"], epsilon, int(k))
        used = np.minimum(points, int(k) + 1)
        gap = stats.accuracy_gap_rows(flag, y, stats.full_sample(n))[0] if n else np.nan
        with np.errstate(divide="ignore", invalid="ignore"):
            share = gap / full_point if full_point != 0 else np.nan
            share_boot = stats.accuracy_gap_rows(flag, y, boot_idx) / full_boot if n else np.zeros(0)
            cost_boot = used[boot_idx].sum(axis=1) / points[boot_idx].sum(axis=1) if n else np.zeros(0)
        share_boot = np.where(full_boot == 0, np.nan, share_boot)
        if has_prefixes:
            sampled = prefixes_sampled(rows["points"], prefixes, int(k))
            prefix_cost = finite_or_none(sampled.sum() / prefixes.sum()) if n else None
            prefix_boot = sampled[boot_idx].sum(axis=1) / prefixes[boot_idx].sum(axis=1) if n else np.zeros(0)
            ci_prefix = _ci(prefix_boot, level, prefix_boot.size)
        else:
            prefix_cost, ci_prefix = None, {"ci_lo": None, "ci_hi": None}
        reason = None if np.isfinite(share) else ("no analyzed chains" if n == 0 else "the full gap is 0 or undefined")
        ci_share = _ci(share_boot, level, share_boot.size)
        ci_cost = _ci(cost_boot, level, cost_boot.size)
        sizes = {
            "monotone at k": int(flag.sum()), "non-monotone at k": int(n - flag.sum()),
            "monotone": int(full.sum()), "non-monotone": int(n - full.sum()),
        }  # fmt: skip
        row = {
            "epsilon": float(epsilon), "transitions": int(k), "n": n,
            "n_monotone_k": sizes["monotone at k"], "n_monotone": sizes["monotone"],
            "gap_pp": finite_or_none(100 * gap), "full_gap_pp": finite_or_none(100 * full_point),
            "share_recovered": finite_or_none(share), **ci_share,
            "cost_fraction": finite_or_none(used.sum() / points.sum()) if n else None,
            "cost_ci_lo": ci_cost["ci_lo"], "cost_ci_hi": ci_cost["ci_hi"], "cost_unit": "answer-bearing points",
            "prefix_cost_fraction": prefix_cost, "prefix_cost_ci_lo": ci_prefix["ci_lo"],
            "prefix_cost_ci_hi": ci_prefix["ci_hi"], "reason": reason,
        }  # fmt: skip
        estimates = ("gap_pp", "full_gap_pp", "share_recovered", "ci_lo", "ci_hi")
        out.append(judged(row, sizes, groups, estimates, share_boot.size))
    return out


def prefixes_sampled(points: Sequence[Sequence[int]], n_prefixes: np.ndarray, k: int) -> np.ndarray:
    """Per chain, the prefixes an early exit after k transitions has sampled: every prefix through
    the one that gave its (k + 1)-th answer-bearing point (prefix index points[k], so points[k] + 1
    prefixes), or all ``n_prefixes`` when the chain has at most k + 1 points (it was read whole)."""
    out = np.asarray(n_prefixes, dtype=np.int64).copy()
    for i, p in enumerate(points):
        p = list(p)
        if len(p) > k + 1:
            out[i] = int(p[k]) + 1
    return out


# ---------------------------------------------------------------------------------------------
# Chain length against the monotone flag (seed 003 section 4.2: the original reports rho = -0.37)

LENGTH_MEASURES = ("reference_tokens", "raw_units")


def length_confound(records: pd.DataFrame, idx: np.ndarray | None, level: float, groups=None) -> list[dict]:
    """Spearman rho of each chain-length measure (tokens, raw segmentation units) with the monotone
    flag, with its CI and scipy's two-sided p, over the analyzed chains."""
    from scipy import stats as sps

    require_columns(records, LENGTH_MEASURES, "records")
    rows = analyzed(records)
    flag = rows["monotone"].to_numpy(dtype=bool)
    n = len(rows)
    out = []
    for measure in LENGTH_MEASURES:
        x = rows[measure].to_numpy(dtype=float)
        constant = n < 3 or x.min() == x.max() or flag.min() == flag.max()
        if constant:
            reason = f"{n} analyzed chains" if n < 3 else f"{measure} or the monotone flag is constant"
            out.append({"measure": measure, "n": n, "rho": None, "p": None, "ci_lo": None, "ci_hi": None,
                        "ci_n_kept": 0, "reason": reason})  # fmt: skip
            continue
        boot = stats.spearman_binary_rows(x, flag, _rows(idx, n))
        row = {
            "measure": measure, "n": n, "rho": finite_or_none(stats.spearman_binary(x, flag)),
            "p": finite_or_none(sps.spearmanr(x, flag).pvalue), **_ci(boot, level, boot.size), "reason": None,
        }  # fmt: skip
        sizes = {"monotone": int(flag.sum()), "non-monotone": int(n - flag.sum())}
        out.append(judged(row, sizes, groups, ("rho", "p", "ci_lo", "ci_hi"), boot.size))
    return out


# ---------------------------------------------------------------------------------------------
# Endpoint answered, truncated against complete chains (seed 003 section 5.2)


def endpoint_by_truncation(records: pd.DataFrame, idx: np.ndarray | None, level: float, groups=None) -> list[dict]:
    """Share of analyzed chains whose last prefix returned an answer, for complete and truncated
    reference chains, and their difference (complete minus truncated), each with its CI. The
    original's traced sample: 2 of 67 complete chains against 33 of 33 truncated ones."""
    require_columns(records, ("endpoint_answered", "reference_truncated"), "records")
    rows = analyzed(records)
    truncated = rows["reference_truncated"].to_numpy(dtype=bool)
    answered = rows["endpoint_answered"].to_numpy(dtype=bool)
    n = len(rows)
    codes = 2 * truncated.astype(np.int64) + answered
    rates = {}
    for which, matrix in (("point", stats.full_sample(n)), ("boot", _rows(idx, n))):
        counts = stats.category_counts(codes, matrix, 4) if n else np.zeros((matrix.shape[0], 4))
        with np.errstate(divide="ignore", invalid="ignore"):
            rates[which] = {
                False: counts[:, 1] / (counts[:, 0] + counts[:, 1]),
                True: counts[:, 3] / (counts[:, 2] + counts[:, 3]),
            }
    out, estimates = [], ("endpoint_answered_rate", "ci_lo", "ci_hi")
    sizes = {"complete": int((~truncated).sum()), "truncated": int(truncated.sum())}
    for group, mask in (("complete", False), ("truncated", True)):
        point = rates["point"][mask][0] if n else np.nan
        row = {"chains": group, "n": sizes[group], "endpoint_answered_rate": finite_or_none(point),
               **_ci(rates["boot"][mask], level, rates["boot"][mask].size),
               "reason": None if sizes[group] else f"no {group} chains"}  # fmt: skip
        out.append(judged(row, {group: sizes[group]}, groups, estimates, rates["boot"][mask].size))
    diff = rates["boot"][False] - rates["boot"][True]
    point = rates["point"][False][0] - rates["point"][True][0] if n else np.nan
    row = {"chains": "complete minus truncated", "n": n, "endpoint_answered_rate": finite_or_none(point),
           **_ci(diff, level, diff.size), "reason": None if np.isfinite(point) else "a group is empty"}  # fmt: skip
    out.append(judged(row, sizes, groups, estimates, diff.size))
    return out


# ---------------------------------------------------------------------------------------------
# Appendix C: the earlier revision's panel-wide family of 16 tests, descriptive


def descriptive_family(result: Mapping, family: Sequence[Mapping], cells: Sequence[str], alpha: float) -> list[dict]:
    """Holm over every (test, cell) of ``family`` x ``cells`` (each test: hypothesis id and the
    name of its p-value in hypotheses.json, e.g. H1 p_fisher and H3 p_spearman over the eight
    panel cells: 16 tests). Descriptive only: the registered family is ``holm.family``. A test
    whose p is undefined enters as p = 1, as in the registered family."""
    members = []
    for test in family:
        for cell in cells:
            block = result["cells"].get(cell, {}).get(test["id"], {})
            p = finite_or_none(block.get(test["p"]))
            members.append({"id": test["id"], "cell": cell, "p_name": test["p"], "p": p,
                            "p_used": 1.0 if p is None else p})  # fmt: skip
    if not members:
        return []
    reject, adjusted = stats.holm([m["p_used"] for m in members], alpha)
    return [m | {"p_adjusted": float(a), "reject": bool(r), "alpha": float(alpha)} for m, r, a in
            zip(members, reject, adjusted)]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The sweep table's further columns (seed 003 sections 5.1-5.2)


def sweep_columns(records: pd.DataFrame, idx: np.ndarray | None, level: float) -> dict:
    """One variant's cell: the median raw unit count over all its chains (the segmentation rule's
    grain; seed 003 section 5.2 compares 2 against 8 and 7 against 25) and the magnitude rho,
    Spearman rho(coherence, correct) as H2 computes it, with its CI (per budget in section 5.1)."""
    require_columns(records, ("raw_units", "coherence", "correct"), "records")
    units = records["raw_units"].dropna().to_numpy(dtype=float)
    rows = analyzed(records)
    c, y = rows["coherence"].to_numpy(dtype=float), rows["correct"].to_numpy(dtype=bool)
    out = {"median_raw_units": finite_or_none(np.median(units)) if units.size else None}
    if len(rows) < 3 or c.min() == c.max() or y.min() == y.max():
        return out | {"rho_coherence": None, "rho_coherence_ci_lo": None, "rho_coherence_ci_hi": None}
    boot = stats.spearman_binary_rows(c, y, _rows(idx, len(rows)))
    ci = _ci(boot, level, boot.size)
    return out | {
        "rho_coherence": finite_or_none(stats.spearman_binary(c, y)),
        "rho_coherence_ci_lo": ci["ci_lo"],
        "rho_coherence_ci_hi": ci["ci_hi"],
    }
