"""The records contract (docs/reference.md section 11): the columns every records.parquet holds.

A reader may rely on these and must require no more; a study's records may carry further columns
(a declared signal's, diagnostics such as ``parse_rate``), which readers ignore. Each reader states
the subset it reads (e.g. ``analysis.exploratory.REQUIRED``), and tests check it lies inside this one.
"""

RECORD_COLUMNS = (
    "cell", "problem_id", "trajectory", "n_points", "monotone", "violations", "coherence",
    "final_entropy", "final_confidence", "pred", "gold", "correct", "chain_answer", "chain_correct",
    "excluded", "exclusion_reason", "reference_tokens", "reference_truncated", "raw_units", "cap_hit",
)  # fmt: skip
