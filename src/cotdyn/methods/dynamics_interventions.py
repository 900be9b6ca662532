"""Training and inference interventions on the dynamical profile (seed 002 Figure 4, Appendix B).

Figure 4 operates on model-task condition means. A matched comparison names a reference and an
intervened condition (a model under a protocol variant, e.g. a base and an instruction-tuned model,
a small and a large one, or one model at two temperatures as two variants). For every task both
conditions have and every metric, the raw change is intervened minus reference, divided by the
sample standard deviation (ddof = 1) of that metric across the condition means of the default
decoding (``default_variant``: every model-task condition of it). The standardised changes of one
comparison are averaged across its tasks: one point per comparison. Per family the mean of the
points gets a two-sided 95% confidence interval mean +- t_{0.975, n-1} x SD / sqrt(n).

Choices the seed leaves open: a metric whose standard deviation is 0 or undefined (fewer than two
default conditions with a value) gets NaN changes; a family with fewer than two comparisons gets a
mean and no interval, with the reason in ``ci_note``. The seed's accuracy is the trace's realized
endpoint correctness, as in Figure 2.

The comparisons come from the config (``dynamics_comparisons``):

    dynamics_comparisons:
      default_variant: sampled
      families:
        instruction_tuning:
          - {reference: {model: base}, intervened: {model: instruct}}
        temperature:
          - {reference: {model: m, variant: t02}, intervened: {model: m, variant: t10}, tasks: [gsm8k]}
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from cotdyn.files.columns import require_columns
from cotdyn.methods.dynamics import PROFILE_METRICS, condition_means

FIGURE4_METRICS = ("accuracy", *PROFILE_METRICS)
JITTER_SEED = 20260829  # vertical jitter is visual only (seed 002 Appendix B)


def condition_table(profiles: Mapping[str, pd.DataFrame], metrics: Sequence[str] = PROFILE_METRICS) -> pd.DataFrame:
    """Condition means of every variant: one row per (variant, model, task) with accuracy and metrics."""
    frames = [condition_means(frame, metrics).assign(variant=variant) for variant, frame in sorted(profiles.items())]
    if not frames:
        raise ValueError("condition_table: no variant's profiles given")
    table = pd.concat(frames, ignore_index=True)
    return table[["variant", "model", "task", *[c for c in table.columns if c not in ("variant", "model", "task")]]]


def _side(entry: Mapping, side: str, default_variant: str, where: str) -> tuple[str, str]:
    if side not in entry or "model" not in entry[side]:
        raise ValueError(f"{where}: '{side}' needs a 'model' (and optionally a 'variant')")
    return str(entry[side].get("variant", default_variant)), str(entry[side]["model"])


def comparison_variants(comparisons: Mapping, variants: Sequence[str]) -> list[str]:
    """The variants a comparison config reads (the default's included), each one of ``variants``."""
    default = comparisons["default_variant"]
    named = {default}
    for entries in comparisons["families"].values():
        for entry in entries:
            named |= {side.get("variant", default) for side in (entry["reference"], entry["intervened"])}
    unknown = sorted(named - set(variants))
    if unknown:
        raise ValueError(
            f"dynamics_comparisons names unknown variant(s) {', '.join(unknown)} (known: {', '.join(variants)})"
        )
    return sorted(named)


def comparison_label(reference: tuple[str, str], intervened: tuple[str, str]) -> str:
    """'model' when the variant is the default's, else 'model@variant', reference -> intervened."""
    return f"{reference[1]}@{reference[0]} -> {intervened[1]}@{intervened[0]}"


def standardized_changes(
    conditions: pd.DataFrame,
    comparisons: Mapping,
    metrics: Sequence[str] = FIGURE4_METRICS,
) -> pd.DataFrame:
    """One row per (family, comparison, metric): the standardised change averaged over tasks.

    Columns: family, comparison, reference_variant, reference_model, intervened_variant,
    intervened_model, metric, n_tasks, tasks, sd (the standardising SD), change. ``n_tasks`` and
    ``tasks`` are, per metric, the shared tasks where the metric is defined on both sides: exactly
    the tasks ``change`` averages over (a task whose metric is NaN on either side enters neither).
    A comparison that names a condition absent from ``conditions`` is an error naming it.
    """
    require_columns(conditions, ("variant", "model", "task", *metrics), "conditions")
    default = comparisons.get("default_variant")
    families = comparisons.get("families") or {}
    if default is None or default not in set(conditions["variant"]):
        raise ValueError(f"dynamics_comparisons: default_variant {default!r} has no conditions")
    base = conditions[conditions["variant"] == default]
    sd = {m: float(base[m].dropna().std(ddof=1)) if base[m].notna().sum() >= 2 else math.nan for m in metrics}
    # plain dicts: a figure has a few dozen comparisons, and pandas lookups cost more than the arithmetic
    keys = list(zip(conditions["variant"].astype(str), conditions["model"].astype(str), conditions["task"].astype(str)))
    values = dict(zip(keys, conditions[list(metrics)].to_numpy(dtype=float)))
    tasks_of: dict[tuple[str, str], set[str]] = {}
    for variant, model, task in keys:
        tasks_of.setdefault((variant, model), set()).add(task)
    rows = []
    for family, entries in families.items():
        for i, entry in enumerate(entries):
            where = f"dynamics_comparisons: {family}[{i}]"
            ref, alt = _side(entry, "reference", default, where), _side(entry, "intervened", default, where)
            for key in (ref, alt):
                if key not in tasks_of:
                    raise ValueError(f"{where}: no condition for model {key[1]!r} under variant {key[0]!r}")
            tasks = sorted(set(entry.get("tasks") or tasks_of[ref]) & tasks_of[ref] & tasks_of[alt])
            if not tasks:
                raise ValueError(f"{where}: the two conditions share no task")
            raw = np.array([values[(*alt, t)] - values[(*ref, t)] for t in tasks])  # (task, metric)
            for j, metric in enumerate(metrics):
                scale = sd[metric]
                both = np.isfinite(raw[:, j])  # defined on both sides
                used = [t for t, ok in zip(tasks, both) if ok]
                z = raw[both, j] / scale if scale > 0 else np.full(len(used), np.nan)
                rows.append(
                    {
                        "family": family,
                        "comparison": comparison_label(ref, alt),
                        "reference_variant": ref[0],
                        "reference_model": ref[1],
                        "intervened_variant": alt[0],
                        "intervened_model": alt[1],
                        "metric": metric,
                        "n_tasks": len(used),
                        "tasks": ";".join(used),
                        "sd": scale,
                        "change": float(z.mean()) if len(used) and np.isfinite(z).all() else math.nan,
                    }
                )
    return pd.DataFrame(
        rows,
        columns=["family", "comparison", "reference_variant", "reference_model", "intervened_variant",
                 "intervened_model", "metric", "n_tasks", "tasks", "sd", "change"],
    )  # fmt: skip


def mean_effects(changes: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per (family, metric): n comparisons, mean standardised change and its t-based CI."""
    import scipy.stats

    require_columns(changes, ("family", "metric", "change"), "changes")
    rows = []
    groups: dict[tuple[str, str], list[float]] = {}
    for family, metric, change in zip(changes["family"], changes["metric"], changes["change"]):
        groups.setdefault((family, metric), []).append(float(change))
    for (family, metric), values in groups.items():
        x = np.array([v for v in values if not math.isnan(v)])
        n = len(x)
        mean = float(x.mean()) if n else math.nan
        if n >= 2:
            se = float(x.std(ddof=1) / math.sqrt(n))
            half = float(scipy.stats.t.ppf(0.5 + level / 2, n - 1)) * se
            lo, hi, note = mean - half, mean + half, ""
        else:
            se, lo, hi = math.nan, math.nan, math.nan
            note = "fewer than two comparisons with a defined change: no interval"
        rows.append(
            {"family": family, "metric": metric, "n": n, "mean": mean, "se": se, "ci_low": lo, "ci_high": hi,
             "ci_note": note}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=["family", "metric", "n", "mean", "se", "ci_low", "ci_high", "ci_note"])


def interventions_figure(changes: pd.DataFrame, effects: pd.DataFrame):
    """Seed 002 Figure 4: one panel per family, one row per metric; points are comparisons,
    diamonds the means, bars the 95% CIs; a symmetric x-range shared by the panels."""
    from matplotlib.figure import Figure

    families = list(dict.fromkeys(changes["family"]))
    metrics = [m for m in FIGURE4_METRICS if m in set(changes["metric"])]
    finite = pd.concat([changes["change"], effects["ci_low"], effects["ci_high"]]).abs()
    finite = finite[np.isfinite(finite)]
    bound = 1.1 * float(finite.max()) if len(finite) and finite.max() > 0 else 1.0
    fig = Figure(figsize=(3.6 * len(families), 0.45 * len(metrics) + 1.2))
    fig.subplots_adjust(left=0.55 / (3.6 * len(families)) + 0.1, right=0.98, bottom=0.2, top=0.88, wspace=0.08)
    axes = np.atleast_1d(fig.subplots(1, len(families), sharey=True))
    rng = np.random.default_rng(JITTER_SEED)
    y_of = {m: len(metrics) - 1 - i for i, m in enumerate(metrics)}
    for ax, family in zip(axes, families):
        points = changes[changes["family"] == family]
        for metric in metrics:
            x = points.loc[points["metric"] == metric, "change"].to_numpy(dtype=float)
            y = y_of[metric] + rng.uniform(-0.15, 0.15, size=len(x))
            ax.plot(x, y, "o", markersize=3.5, alpha=0.6, color="#4477aa")
            eff = effects[(effects["family"] == family) & (effects["metric"] == metric)]
            if len(eff):
                e = eff.iloc[0]
                if np.isfinite(e["ci_low"]):
                    ax.plot([e["ci_low"], e["ci_high"]], [y_of[metric]] * 2, color="black", linewidth=1.2)
                ax.plot([e["mean"]], [y_of[metric]], "D", markersize=6, color="#ee6677", markeredgecolor="black")
        ax.axvline(0, color="grey", linewidth=0.6, linestyle="--")
        ax.set_xlim(-bound, bound)
        ax.set_title(family.replace("_", " "), fontsize=10)
        ax.set_xlabel("standardised change", fontsize=8)
    axes[0].set_yticks(list(y_of.values()), [m.replace("_", " ") for m in y_of])
    return fig


def write_interventions(profiles: Mapping[str, pd.DataFrame], comparisons: Mapping, out_dir) -> list:
    """Write conditions.csv, changes.csv, effects.csv and figure4.png (seed 002 Figure 4) to ``out_dir``."""
    from pathlib import Path

    from cotdyn.files.writers import write_csv, write_png

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    conditions = condition_table(profiles)
    changes = standardized_changes(conditions, comparisons)
    effects = mean_effects(changes)
    return [
        write_csv(conditions, out / "conditions.csv"),
        write_csv(changes, out / "changes.csv"),
        write_csv(effects, out / "effects.csv"),
        write_png(interventions_figure(changes, effects), out / "figure4.png"),
    ]
