"""Step information gain with a supervisor model, and the ORM / Math-Shepherd baselines (seed 000).

Modules: ``toy`` (problems and the five synthetic LLMs), ``supervisor`` (instances, training,
cross-entropy scoring), ``gain`` (information gain, thresholds, detection metrics), ``baselines``
(ORM; the Math-Shepherd labels, which need no torch, are ``cotdyn.methods.math_shepherd``), ``lora`` (the
real-trace LoRA supervisor), ``experiment`` (the toy experiment end to end), ``report`` (tables and
heatmaps), ``traces`` (a study's own chains as steps, the seeded problem split, the tables and
chain-level detection) and ``real`` (supervisor and ORM per cell on those chains).
"""
