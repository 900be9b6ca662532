"""Exploratory analyses over stored records (seed 003 sections 5, 6.1, 8 and Appendix F; docs/reference.md section 6).

Everything here is outside the registration and is computed from records.parquet (docs/reference.md section 11)
alone: no model runs. Each function takes a records frame (or arrays) and returns plain data; the
tables are assembled in ``cotdyn.report.exploratory_tables`` and written there. A signal is oriented so that a higher
score means "more likely correct": the monotone flag, the negated violation count, the negated final
entropy, and coherence C = H_0 - H_N as it stands (seed 003 Appendix F.1).

The package: ``inputs`` (the records contract, exclusions; the signals are declared in ``cotdyn.protocol.signals``), ``ranking`` (ROC and risk-coverage
areas), ``confounders`` (confounder controls, label coupling), ``variants`` (early exit, the epsilon
sweep), ``coverage`` (reference-budget coverage curves), ``sweeps`` (sensitivity sweeps). Every public
name is importable from here.
"""

from cotdyn.analysis.exploratory.confounders import (
    LOGIT_TERMS,
    LogitFit,
    label_coupling,
    max_rise,
    partial_correlation,
    standardized_logit,
    violation_magnitude,
)
from cotdyn.analysis.exploratory.coverage import CoverageCurve, coverage_curve, coverage_rows
from cotdyn.analysis.exploratory.inputs import REQUIRED, analyzed, check_records
from cotdyn.analysis.exploratory.ranking import TRUNCATED_COVERAGE, aurc, ranking_table, roc_area, selective_risk_curve
from cotdyn.analysis.exploratory.sweeps import SWEEP_FIELDS, chain_length_stats, sweep_table
from cotdyn.analysis.exploratory.variants import EPSILONS, early_exit, epsilon_sweep, min_grid_spacing, shape_at
from cotdyn.protocol.signals import SIGNALS, in_records

__all__ = [
    "CoverageCurve",
    "EPSILONS",
    "LOGIT_TERMS",
    "LogitFit",
    "REQUIRED",
    "SIGNALS",
    "SWEEP_FIELDS",
    "TRUNCATED_COVERAGE",
    "analyzed",
    "aurc",
    "chain_length_stats",
    "check_records",
    "coverage_curve",
    "coverage_rows",
    "early_exit",
    "in_records",
    "epsilon_sweep",
    "label_coupling",
    "max_rise",
    "min_grid_spacing",
    "partial_correlation",
    "ranking_table",
    "roc_area",
    "selective_risk_curve",
    "shape_at",
    "standardized_logit",
    "sweep_table",
    "violation_magnitude",
]
