"""Step information gain with a supervisor model, and the ORM / Math-Shepherd baselines (seed 000).

Modules: ``toy`` (problems and the five synthetic LLMs), ``supervisor`` (instances, training,
cross-entropy scoring), ``gain`` (information gain, thresholds, detection metrics), ``baselines``
(ORM; the Math-Shepherd labels, which need no torch, are ``cotdyn.methods.math_shepherd``), ``lora`` (the
real-trace LoRA supervisor), ``experiment`` (the toy experiment end to end), ``report`` (tables and
heatmaps), ``traces`` (a study's own chains as steps, the seeded problem split, the tables and
chain-level detection) and ``real`` (supervisor and ORM per cell on those chains).
"""

from cotdyn.methods.infogain.baselines import build_orm, orm_probabilities, train_orm
from cotdyn.methods.infogain.experiment import PAPER_TABLE1, PRESETS, resolve_size, run_toy_experiment, toy_experiment
from cotdyn.methods.infogain.gain import (
    aggregate_gain,
    aggregate_gain_ragged,
    change_scores,
    detection_metrics,
    drop_step,
    gain_by_subtask,
    samplewise_gain,
    select_threshold,
    step_error_labels,
)
from cotdyn.methods.infogain.lora import (
    LoraSettings,
    TextChain,
    score_text_chains,
    text_chain_instances,
    train_lora_supervisor,
)
from cotdyn.methods.infogain.report import write_infogain
from cotdyn.methods.infogain.supervisor import (
    IGNORE_INDEX,
    ModelSize,
    SupervisorInstance,
    TrainParams,
    answer_cross_entropy,
    build_gpt2_lm,
    build_instance,
    chain_instances,
    train_supervisor,
)
from cotdyn.methods.infogain.toy import ToyModel, ToyTraces, gold_answers, toy_models
from cotdyn.methods.math_shepherd import math_shepherd_labels

__all__ = [
    "IGNORE_INDEX",
    "LoraSettings",
    "ModelSize",
    "PAPER_TABLE1",
    "PRESETS",
    "SupervisorInstance",
    "TextChain",
    "ToyModel",
    "ToyTraces",
    "TrainParams",
    "aggregate_gain",
    "aggregate_gain_ragged",
    "answer_cross_entropy",
    "build_gpt2_lm",
    "build_instance",
    "build_orm",
    "chain_instances",
    "change_scores",
    "detection_metrics",
    "drop_step",
    "gain_by_subtask",
    "gold_answers",
    "math_shepherd_labels",
    "orm_probabilities",
    "resolve_size",
    "run_toy_experiment",
    "samplewise_gain",
    "score_text_chains",
    "select_threshold",
    "step_error_labels",
    "text_chain_instances",
    "toy_experiment",
    "toy_models",
    "train_lora_supervisor",
    "train_orm",
    "train_supervisor",
    "write_infogain",
]
