"""Step information gain with a supervisor model, and the ORM / Math-Shepherd baselines (seed 000)."""
