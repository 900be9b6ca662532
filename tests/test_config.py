import hashlib
import json

import pytest

from cotdyn.plan.config import (
    RECORDS_ONLY,
    REFERENCE_FIELDS,
    STUDY_WIDE,
    ConfigError,
    check_study_wide,
    protocol_for,
    reference_id,
    resolve_cells,
    samples_variant,
)
from cotdyn.plan.load import registered_protocol
from cotdyn.plan.registration import protocol_differences
from cotdyn.plan.timelock import PLAN_LOCK_KEY


def study(**variants):
    return {
        "study": "s",
        "plan": "p",
        "cells": ["qwen7b-gsm8k"],
        "models": {"qwen7b": {"backend": "vllm"}},
        "benchmarks": {"gsm8k": {"kind": "gsm8k"}},
        "variants": {"registered": {}, **variants},
    }


def test_panel_models_and_benchmarks_take_their_pins_from_the_plan(plan):
    cell = resolve_cells(study(), plan)["qwen7b-gsm8k"]
    assert cell.model["id"] == "Qwen/Qwen2.5-7B-Instruct"
    assert cell.model["revision"] == "a09a35458c702b33eeacc393d103063234e8bc28"
    assert cell.benchmark["content_sha256"] == plan["panel"]["benchmarks"]["gsm8k"]["content_sha256"]


def test_a_cell_naming_an_unknown_model_is_an_error(plan):
    config = study()
    config["cells"] = ["gpt9-gsm8k"]
    with pytest.raises(ConfigError, match="model 'gpt9'"):
        resolve_cells(config, plan, "study.yaml")


def test_variants_override_the_plan_and_name_unknown_parameters(plan):
    # the plan's protocol, and the one parameter it does not name at its registered rule
    assert "extraction" not in plan["protocol"]
    # and the registration's lock (plan v4's time_lock), derived from the plan file, never set by a config
    lock = {"time_lock": plan[PLAN_LOCK_KEY]}
    assert protocol_for(study(), plan, "registered") == {**plan["protocol"], "extraction": "final_number", **lock}
    assert protocol_for(study(cap8={"cap": None}), plan, "cap8")["cap"] is None
    with pytest.raises(ConfigError, match="study.yaml: variant 'x': unknown protocol parameter 'temprature'"):
        protocol_for(study(x={"temprature": 0.1}), plan, "x", "study.yaml")
    with pytest.raises(ConfigError, match="unknown label 'oracle'"):
        protocol_for(study(x={"label": "oracle"}), plan, "x")


def test_records_only_variants_reuse_samples_and_may_not_change_generation(plan):
    config = study(
        **{
            "m-20": {"m": 20},
            "m-3": {"m": 3, "subsample_of": "m-20"},
            "eps": {"epsilon": 0.1, "subsample_of": "registered"},
        }
    )
    assert samples_variant(config, "m-3") == "m-20" and samples_variant(config, "m-20") == "m-20"
    assert protocol_for(config, plan, "m-3")["m"] == 3
    assert protocol_for(config, plan, "eps")["epsilon"] == 0.1
    bad = study(**{"m-20": {"m": 20}, "seg": {"segmentation": "newline", "subsample_of": "m-20"}})
    with pytest.raises(ConfigError, match="changes segmentation"):
        protocol_for(bad, plan, "seg")
    with pytest.raises(ConfigError, match="m = 8 exceeds the 5 samples"):
        protocol_for(study(big={"m": 8, "subsample_of": "registered"}), plan, "big")


def test_reference_settings_name_the_chains_they_share(plan):
    registered = protocol_for(study(), plan, "registered")
    assert (
        reference_id(registered)
        == "t0.7-b600-s20260829-"
        + hashlib.sha256(json.dumps({f: registered[f] for f in REFERENCE_FIELDS}, sort_keys=True).encode()).hexdigest()[
            :8
        ]
    )
    for field in ("segmentation", "continuation_temperature", "m", "epsilon", "checkpoints"):
        assert reference_id({**registered, field: "changed"}) == reference_id(registered), field


@pytest.mark.parametrize(
    "field,value",
    [
        ("reference_temperature", 0.1),
        ("reference_max_tokens", 1280),
        ("seed", 1),
        ("top_p", 0.95),  # the same temperature, budget and seed: only the digest tells them apart
        ("top_k", 50),
        ("repetition_penalty", 1.1),
        ("system_prompt", "Answer."),
    ],
)
def test_every_field_a_reference_chain_reads_changes_its_name(plan, field, value):
    registered = protocol_for(study(), plan, "registered")
    assert reference_id({**registered, field: value}) != reference_id(registered)


def test_every_protocol_parameter_is_classified_for_the_reference_chains(plan):
    # a new parameter must be placed: read by the reference chain, study-wide, or read only after it
    after_the_chain = {
        "m", "continuation_temperature", "continuation_max_tokens", "segmentation", "cap", "epsilon",
        "null_answers", "label", "endpoint", "equivalence", "checkpoints", "checkpoint_stride", "extraction",
        "answer_form",
    }  # fmt: skip
    # the registration's lock is the plan's, so the study's: it reaches every request through its seed
    # (a changed lock changes the chains' content and the rules' params, not the folder's name)
    lock = {"time_lock"}
    assert set(registered_protocol(plan)) == set(REFERENCE_FIELDS) | set(STUDY_WIDE) | after_the_chain | lock
    assert not set(REFERENCE_FIELDS) & after_the_chain


def test_a_variant_may_not_change_a_study_wide_parameter(plan):
    config = study(half={"dtype": "float16"})
    protocols = {v: protocol_for(config, plan, v) for v in config["variants"]}
    with pytest.raises(ConfigError, match="dtype is one value for the whole study.*half: float16"):
        check_study_wide(protocols, "config.yaml")
    check_study_wide({"registered": protocols["registered"]})


def test_the_reasoning_cut_is_a_generating_choice(plan):
    config = study(
        sampled={"endpoint": "reasoning"},
        forced={"subsample_of": "sampled", "endpoint": "forced"},
    )
    assert protocol_for(config, plan, "sampled")["endpoint"] == "reasoning"
    assert protocol_for(config, plan, "forced")["endpoint"] == "forced"
    # samples drawn at the whole chain cannot stand for a last state sampled from the reasoning alone
    with pytest.raises(ConfigError, match="endpoint 'reasoning' cannot reuse the samples of 'registered'"):
        protocol_for(study(cut={"subsample_of": "registered", "endpoint": "reasoning"}), plan, "cut")
    # nor the cut's samples for a whole-chain continuation endpoint
    bad = study(sampled={"endpoint": "reasoning"}, full={"subsample_of": "sampled", "endpoint": "continuation"})
    with pytest.raises(ConfigError, match="endpoint 'continuation' cannot reuse the samples of 'sampled'"):
        protocol_for(bad, plan, "full")


def test_panel_dynamics_runs_seed_002s_protocol_on_vllm(plan):
    import yaml

    config = yaml.safe_load(open("config/panel-dynamics.yaml"))
    cells = resolve_cells(config, plan)
    assert len(cells) == 8 and {c.model["backend"] for c in cells.values()} == {"vllm"}
    assert not config.get("confirmatory")  # exploratory, beside the registered study
    # seed 002 Appendix A.3-A.5 and Def. 1
    paper = {
        "reference_temperature": 0.7,
        "continuation_temperature": 0.7,
        "top_p": 0.9,
        "reference_max_tokens": 600,
        "continuation_max_tokens": 600,
        "checkpoints": "tokens",
        "checkpoint_stride": 16,
        "m": 16,
        "null_answers": "class",
    }
    sampled, forced = protocol_for(config, plan, "sampled"), protocol_for(config, plan, "forced")
    assert {k: sampled[k] for k in paper} == paper and {k: forced[k] for k in paper} == paper
    assert (sampled["endpoint"], forced["endpoint"]) == ("reasoning", "forced")
    assert samples_variant(config, "forced") == "sampled"


def test_the_extraction_rule_is_a_records_only_parameter_the_plan_does_not_name(plan):
    # registered rule by default; the sensitivity variant reuses the registered samples
    config = study(statement={"extraction": "final_statement", "subsample_of": "registered"})
    protocol = protocol_for(config, plan, "statement")
    assert protocol["extraction"] == "final_statement" and "extraction" in RECORDS_ONLY
    # a cell run under it differs from the plan there, as a deviation would have to declare
    assert protocol_differences(plan, protocol) == [("extraction", "final_number", "final_statement")]
    assert protocol_differences(plan, protocol_for(config, plan, "registered")) == []
    with pytest.raises(ConfigError, match="unknown extraction 'last_line' \\(known: final_number, final_statement\\)"):
        protocol_for(study(x={"extraction": "last_line"}), plan, "x")
