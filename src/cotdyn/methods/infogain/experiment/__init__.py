"""The toy experiment of seed 000, section 5.1, end to end: chains from LLM1-LLM5, one supervisor and
one ORM per LLM, Math-Shepherd with the generator as completer, aggregate and sample-wise information
gain, held-out thresholds, and the Figure 3 / Table 1 summaries.

Prompts are shared by the five LLMs and split once into train (supervisor and ORM fitting), val
(early stopping and every detection threshold) and test (every reported number).

Choices the seed leaves open, beyond those in ``toy``: a chain is rendered as
``<bos> x_0 || v_1 || ... || v_t #|> A1 y_1 ... A5 y_5`` (v_t the value step t wrote; the field
labels A_j are never scored); one 2-layer GPT-2 per LLM for the supervisor and one for the ORM,
trained from scratch with AdamW and held-out early stopping (``PRESETS``); Math-Shepherd with 10
completions; detection labels every step from a chain's error step on as wrong
(``gain.step_error_labels``) and is reported over chains with a wrong final answer (our reading of
Table 1) and over all chains; ORM and MS are scored both by their level after the step (primary,
matches Table 1's rates) and by their change from the step before ("the step where it drops").

The package: ``presets`` (sizes, seeds, the paper's Table 1), ``chains`` (chains as token ids,
Math-Shepherd's labels), ``models`` (one LLM's supervisor, ORM and scores), ``summaries`` (detection,
profiles, acceptance, Table 1), ``run`` (``toy_experiment`` end to end).
"""
