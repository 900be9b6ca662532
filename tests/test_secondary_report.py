"""Seed 003's further analyses as tables (cotdyn.report.secondary_tables): plan settings, wiring, determinism."""

import copy

import pandas as pd
import pytest

from cotdyn.analysis import hypotheses as hyp
from cotdyn.analysis.calibration import PlantedCell, paper_panel, simulate_panel, simulate_records
from cotdyn.files import layout
from cotdyn.plan.config import protocol_for
from cotdyn.report import secondary_tables as rep

SECONDARY = {
    "selective_coverage": 0.737,
    "early_exit_transitions": [1, 2, 3],
    "descriptive_family": {"cells": "panel", "tests": [{"id": "H1", "p": "p_fisher"}, {"id": "H3", "p": "p_spearman"}]},
}


@pytest.fixture(scope="module")
def plan2(plan):
    plan = copy.deepcopy(plan)
    plan["analysis"].setdefault("secondary", SECONDARY)
    return plan


@pytest.fixture(scope="module")
def settings(plan2):
    return rep.SecondarySettings.from_plan(plan2)


def test_settings_come_from_the_plan_and_name_a_missing_key(plan, settings):
    assert settings.coverage == 0.737 and settings.transitions == (1, 2, 3) and len(settings.family_cells) == 8
    assert settings.seed == plan["analysis"]["bootstrap"]["seed"] and settings.alpha == plan["holm"]["alpha"]
    groups = plan["analysis"]["groups"]  # the registered small-group rule applies here too
    assert settings.groups.min_group_size == groups["min_group_size"]
    assert settings.groups.precise_group_size == groups["precise_group_size"]
    assert settings.min_kept_fraction == plan["analysis"]["bootstrap"]["min_kept_fraction"]
    broken = copy.deepcopy(plan)
    broken["analysis"]["secondary"] = {"selective_coverage": 0.737}
    with pytest.raises(KeyError, match="analysis.secondary: missing key 'descriptive_family'"):
        rep.SecondarySettings.from_plan(broken)


def test_targets_only_when_the_plan_specifies_them(plan, plan2):
    def targets(plan: dict, extras=layout.EXTRAS) -> set[str]:
        return set(layout.study_targets(["a-gsm8k"], ["registered"], extras=extras, secondary=rep.has_secondary(plan)))

    secondary = {"analysis/registered/secondary/tables.html", layout.GENERATIONS}
    assert targets(plan2) - targets({"analysis": {}}) == secondary
    assert not secondary & targets(plan2, extras=("dynamics",))  # and only when the config asks for them


def test_secondary_tables_over_the_paper_panel(plan2, settings, tmp_path):
    records = simulate_panel(paper_panel(scale=0.1), seed=3)
    result = hyp.analyze(records, plan2, "x")
    tables = rep.secondary_tables(records, result, epsilon=0.01, s=settings)
    assert list(tables) == list(rep.TABLES)
    family = tables["descriptive_family"]
    assert len(family) == 16 and set(family["id"]) == {"H1", "H3"}  # Appendix C: 2 tests x 8 cells
    assert family.loc[family["id"].eq("H1"), "p"].tolist() == [
        result["cells"][c]["H1"]["p_fisher"] for c in settings.family_cells
    ]
    selective = tables["selective_accuracy"]
    assert set(selective["cell"]) == set(records["cell"]) and (selective["coverage"] == 0.737).all()
    # without endpoint_answered the table says why, it does not crash
    assert tables["endpoint_by_truncation"]["reason"].str.contains("endpoint_answered").all()
    first = rep.write_secondary(records, result, tmp_path / "a", epsilon=0.01, s=settings)
    second = rep.write_secondary(records, result, tmp_path / "b", epsilon=0.01, s=settings)
    assert [p.name for p in first] == [f"{t}.csv" for t in rep.TABLES] + [rep.TABLES_HTML]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(first, second))


def _latex(pred):
    """The same answer written as LaTeX text: n as \\text{n}."""
    return None if pred is None else f"\\text{{{pred}}}"


def test_generation_tables_find_the_seed_and_budget_variants(plan2, settings, tmp_path):
    config = {"variants": {"registered": {}, "seed-1": {"seed": 1}, "budget-4096": {"reference_max_tokens": 4096},
                           "eps-0": {"epsilon": 0.0}}}  # fmt: skip
    protocols = {v: protocol_for(config, plan2, v, "test") for v in config["variants"]}
    cell = "qwen7b-math500"
    frames = {v: simulate_records(PlantedCell(80, 0.3, 0.5, 0.3), cell, seed=i) for i, v in enumerate(protocols)}
    probe = frames["budget-4096"]
    probe["reference_tokens"] = probe["reference_tokens"] * 5
    probe["reference_truncated"] = probe["reference_tokens"] >= 2500
    probe.loc[probe["reference_truncated"], "reference_tokens"] = 4096
    records = {v: {cell: f} for v, f in frames.items()}
    results = {v: hyp.analyze(f, plan2, "x") for v, f in frames.items()}
    tables = rep.generation_tables(records, results, protocols, settings)
    agreement = tables["generation_agreement"]
    assert set(zip(agreement["variant_a"], agreement["variant_b"])) == {("registered", "seed-1")}
    assert len(agreement) == 4 and agreement["agreement"].between(0, 1).all()
    spread = tables["seed_spread"]
    assert (spread["n_seeds"] == 2).all() and {"value_registered", "value_seed-1"} <= set(spread.columns)
    budget = tables["budget_probe"].iloc[0]
    assert budget["variant"] == "budget-4096" and budget["budget"] == 600 and budget["probe_budget"] == 4096
    done = (~probe["reference_truncated"]) & (probe["reference_tokens"] <= 600)
    assert budget["completed"] == pytest.approx(done.mean())
    assert budget["longest_uncensored"] == probe.loc[~probe["reference_truncated"], "reference_tokens"].max()
    # predictions agree under the variant's equivalence for the cell's answer rule, and rerun to the same bytes
    seeded = {v: records[v] for v in ("registered", "seed-1")}
    seeded["seed-1"] = {cell: frames["registered"].assign(pred=frames["registered"]["pred"].map(_latex))}
    args = (seeded, results, {v: protocols[v] for v in seeded}, settings)
    judged = rep.generation_tables(*args, benchmarks={cell: "math500"})["generation_agreement"]
    strings = rep.generation_tables(*args)["generation_agreement"]
    prediction = judged.set_index("agreement_on").loc["prediction"]
    assert prediction["agreement"] == 1.0 and prediction["rule"] == "normalized equivalence; both null agree"
    assert strings.set_index("agreement_on").loc["prediction", "agreement"] < 1.0
    paths = [rep.write_generations(rep.generation_tables(*args, benchmarks={cell: "math500"}), tmp_path / d)
             for d in ("a", "b")]  # fmt: skip
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(*paths))
    alone = rep.generation_tables(
        {"registered": records["registered"]}, results, {"registered": protocols["registered"]}, settings
    )
    assert all("no variant differs" in frame["reason"].iloc[0] for frame in alone.values())
    assert isinstance(alone["seed_spread"], pd.DataFrame)
