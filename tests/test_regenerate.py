"""The audit against the model (issue 35, docs/tamper-evidence.md): an author's consistent forgery
(the cache rewritten and re-checksummed, the study re-derived by the rules) passes the re-derivation
and fails ``cotdyn audit --regenerate``, which names the forged problem; an honest study passes."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_tamper import subprocess_cotdyn

from cotdyn.audit.regenerate import Regeneration, answer_agreement, select, stored_requests
from cotdyn.generation.backends.base import Request, Sampling
from cotdyn.provenance.seal import read_seal

SAMPLES = "cells/sim-gsm8k/registered/samples.parquet"


def _forge_cache(cache: Path, forged: dict[str, list]) -> None:
    """Rewrite the cache entries ``forged`` (key -> its samples as [ids, text, reason]) in every shard
    holding them, each shard re-checksummed as the cache writes it: the cache loads it as genuine."""
    for shard in cache.rglob("*.json"):
        if "timings" in shard.parts:
            continue
        payload = json.loads(shard.read_text())
        body = json.loads(payload["body"])
        if not set(body) & set(forged):
            continue
        body.update({k: v for k, v in forged.items() if k in body})
        text = json.dumps(dict(sorted(body.items())), separators=(",", ":"))
        shard.write_text(json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(), "body": text}))


def _continuation_keys(study: Path) -> dict[str, tuple[str, str]]:
    """Each sealed continuation request's key -> (its problem, the problem's gold), from the study."""
    out = {}
    for samples_path in study.glob("cells/*/*/samples.parquet"):
        samples = pd.read_parquet(samples_path)
        chains = pd.read_parquet(next(study.glob(f"cells/{samples_path.parts[-3]}/reference/*/chains.parquet")))
        golds = dict(zip(chains["problem_id"], chains["gold"]))
        start = 0
        for key, n in read_seal(samples_path)["requests"]:
            problem = samples["problem_id"].iat[start]
            out[key] = (problem, golds[problem])
            start += n
    return out


def _gold_text(gold: str) -> list:
    text = f"So the answer is \\boxed{{{gold}}}."
    return [list(text.encode()), text, "stop"]


def _rederived(small_simulated_study, tmp_path: Path, forge) -> Path:
    """The shared study's cache copied and forged by ``forge(cache, keys)``, and the study derived
    from it by a plain snakemake run under the same config (its cache the forged copy): every raw
    file, seal, record, analysis and manifest as the rules write them."""
    from test_workflow import snakemake

    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-3000:]
    shutil.copytree(small_simulated_study.root / "cache", tmp_path / "cache")
    forge(tmp_path / "cache", _continuation_keys(small_simulated_study.root / "results" / "t"))
    config = yaml.safe_load(small_simulated_study.config.read_text())
    config["cache"] = str(tmp_path / "cache")
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    run = snakemake("--cores", "2", "--configfile", str(tmp_path / "study.yaml"), cwd=tmp_path)
    assert run.returncode == 0, run.output[-3000:]
    return tmp_path / "results" / "t"


@pytest.fixture(scope="module")
def forged_study(small_simulated_study, tmp_path_factory) -> Path:
    """Every continuation in the cache rewritten to answer the gold, the study re-derived from it."""

    def forge(cache, keys):
        samples = {k: [_gold_text(gold)] * 10 for k, (_, gold) in keys.items()}
        # each request's own n: as many samples as the cache holds for it
        for shard in cache.rglob("*.json"):
            if "timings" not in shard.parts:
                for key, held in json.loads(json.loads(shard.read_text())["body"]).items():
                    if key in samples:
                        samples[key] = samples[key][:1] * len(held)
        _forge_cache(cache, samples)

    return _rederived(small_simulated_study, tmp_path_factory.mktemp("forged"), forge)


def test_the_forgery_is_consistent_and_the_plain_audit_says_it_is_not_verified(forged_study, small_simulated_study):
    honest = json.loads((small_simulated_study.root / "results/t/analysis/registered/hypotheses.json").read_text())
    forged = json.loads((forged_study / "analysis/registered/hypotheses.json").read_text())
    assert forged != honest  # the forgery moved the results
    assert (pd.read_parquet(forged_study / SAMPLES)["text"].str.contains("boxed")).all()
    audit = subprocess_cotdyn("audit", str(forged_study), cwd=forged_study.parent.parent)
    first = audit.stdout.splitlines()[0]
    assert audit.returncode == 0, audit.stdout[-3000:]  # the re-derivation and the cache check pass
    assert "PASS" in first and "not verified against the model" in first
    assert f"cotdyn audit {forged_study} --regenerate" in audit.stdout


def test_regeneration_fails_the_forgery_naming_a_forged_problem(forged_study):
    audit = subprocess_cotdyn("audit", str(forged_study), "--regenerate", "12", "--seed", "7", cwd=forged_study)
    assert audit.returncode == 1, audit.stdout[-3000:]
    assert "FAIL" in audit.stdout.splitlines()[0]
    assert "regenerated: " in audit.stdout and "of 12 requests equal" in audit.stdout
    line = next(x for x in audit.stdout.splitlines() if "regenerated sample differs" in x)
    assert "samples.parquet: problem " in line and "prefix " in line and "sample " in line
    assert "stored 'So the answer is \\\\boxed{" in line and "regenerated '" in line
    assert "requests, " in audit.stdout and "tokens to draw" in audit.stdout  # the cost, printed first
    assert audit.stdout.index("tokens to draw") < audit.stdout.index("regenerated: ")


def test_the_honest_study_regenerates_equal(small_simulated_study):
    study = small_simulated_study.root / "results" / "t"
    audit = subprocess_cotdyn("audit", str(study), "--regenerate", "40", "--seed", "3", cwd=small_simulated_study.root)
    assert audit.returncode == 0, audit.stdout[-3000:]
    assert "regenerated: 40 of 40 requests equal" in audit.stdout.splitlines()[0]
    assert "not verified" not in audit.stdout


def test_one_forged_continuation_is_found_by_regenerating_all(small_simulated_study, tmp_path):
    chosen = {}

    def forge(cache, keys):
        key, (problem, gold) = sorted(keys.items())[0]
        for shard in cache.rglob("*.json"):
            body = {} if "timings" in shard.parts else json.loads(json.loads(shard.read_text())["body"])
            if key in body:
                held = body[key]
                chosen["problem"], chosen["text"] = problem, held[0][1]
                _forge_cache(cache, {key: [_gold_text(gold + "1"), *held[1:]]})

    study = _rederived(small_simulated_study, tmp_path, forge)
    plain = subprocess_cotdyn("audit", str(study), cwd=tmp_path)
    assert plain.returncode == 0 and "not verified against the model" in plain.stdout.splitlines()[0]
    audit = subprocess_cotdyn("audit", str(study), "--regenerate", "all", cwd=tmp_path)
    assert audit.returncode == 1, audit.stdout[-3000:]
    differing = [x for x in audit.stdout.splitlines() if "regenerated sample differs" in x]
    assert len(differing) >= 1 and all(f"problem {chosen['problem']}," in x for x in differing)
    assert "sample 0:" in differing[0] and repr(chosen["text"]) in differing[0]


# --- the pure parts ------------------------------------------------------------------------------


def _stored(cell: str, phase: str, i: int):
    from cotdyn.audit.regenerate import Stored

    return Stored(f"{cell}/{phase}", cell, phase, Request((i,), 1, Sampling(1.0, 8), i), pd.DataFrame())


def test_the_selection_spreads_over_cells_and_phases_and_follows_the_seed():
    items = [_stored(c, p, i) for c in ("a", "b") for p in ("reference", "continuations") for i in range(50)]
    picked = select(items, 8, seed=1)
    assert len(picked) == 8 and {(s.cell, s.phase) for s in picked} == {
        (c, p) for c in "ab" for p in ("reference", "continuations")
    }
    assert select(items, 8, seed=1) == picked and select(items, 8, seed=2) != picked
    assert select(items, None, seed=1) == items


def test_the_answer_test_fails_stored_answers_moved_to_the_gold_and_passes_honest_ones():
    import numpy as np

    rng = np.random.default_rng(0)
    honest = [
        (
            list(rng.choice(["1", "2", "3"], 10, p=[0.5, 0.3, 0.2])),
            list(rng.choice(["1", "2", "3"], 10, p=[0.5, 0.3, 0.2])),
        )
        for _ in range(40)
    ]
    assert answer_agreement(honest)["ok"]
    forged = [(["1"] * 10, regenerated) for _, regenerated in honest]
    result = answer_agreement(forged)
    assert not result["ok"] and result["expected"] == 400 and result["agreeing"] < 300


def test_a_regeneration_with_no_requests_does_not_pass():
    assert not Regeneration().ok


def test_stored_requests_are_read_back_as_the_seal_holds_them(small_simulated_study):
    from cotdyn.audit.check import study_protocols
    from cotdyn.plan.config import resolve_cells
    from cotdyn.plan.load import load_plan

    study = small_simulated_study.root / "results" / "t"
    config = json.loads((study / "study_manifest.json").read_text())["config"]
    plan = load_plan(config["plan"])
    items = stored_requests(study, config, study_protocols(config, plan), resolve_cells(config, plan))
    revision = read_seal(study / SAMPLES)["model_revision"]
    sealed = [k for k, _ in read_seal(study / SAMPLES)["requests"]]
    assert [i.request.key(revision) for i in items if i.path == SAMPLES] == sealed
    assert sum(len(i.rows) for i in items if i.path == SAMPLES) == len(pd.read_parquet(study / SAMPLES))
