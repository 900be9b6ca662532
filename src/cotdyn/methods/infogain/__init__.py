"""Step information gain with a supervisor model, and the ORM baseline, on a study's own traces (seed 000).

Modules: ``supervisor`` (instances, batches, training), ``gain`` (information gain, thresholds,
detection metrics), ``baselines`` (the ORM's instances and loss; Math-Shepherd's labels, which need no
torch, are ``cotdyn.methods.math_shepherd``), ``lora`` (the LoRA supervisor on text chains),
``traces`` (a study's own chains as steps, the seeded problem split, the tables and chain-level
detection) and ``real`` (supervisor and ORM per cell on those chains).
"""
