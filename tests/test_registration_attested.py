"""A registration a reviewer can verify (issue 48; docs/design.md section 7, "The registration"):
a study registered with a token from a timestamp authority the tests make (tests/tsa.py, served on
127.0.0.1), generated under plan v4's time lock, then audited as a reviewer would, and each attack
named by file and reason."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_audit import build_study, copy_study
from tsa import TsaServer, make_authority

from cotdyn.audit.check import audit
from cotdyn.cli.main import main
from cotdyn.files.layout import STUDY_MANIFEST
from cotdyn.plan.load import load_plan, plan_sha256
from cotdyn.plan.registration import TOKEN_NAME, PreregistrationError, register
from cotdyn.protocol.seeds import request_seed

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    return make_authority(tmp_path_factory.mktemp("tsa"))


@pytest.fixture(scope="module")
def stranger(tmp_path_factory):
    """Another authority: its tokens must not verify against the first one's CA."""
    return make_authority(tmp_path_factory.mktemp("stranger"), name="someone else")


@pytest.fixture(scope="module")
def attested_study(authority, tmp_path_factory) -> Path:
    """A study whose plan was registered with `cotdyn register --timestamp-url`, then generated."""
    root = tmp_path_factory.mktemp("attested")

    def register_with_token(plan, registered):
        with TsaServer(authority) as server:
            rc, out, err = cli(
                "register", "--plan", plan, "--registered", registered, "--timestamp-url", server.url,
                "--registry-url", "https://osf.io/abcde",
            )  # fmt: skip
        assert rc == 0, err
        assert out.startswith(f"registered: plan {plan} sha256 {plan_sha256(plan)}; registered ")

    return build_study(root, DATA, {}, [], registration=register_with_token)


def test_the_reviewer_verifies_all_three_parts(attested_study, authority):
    rc, out, err = cli("audit", attested_study, "--tsa-ca", authority.ca_pem, "--regenerate", "10")
    lines = out.splitlines()
    plan = attested_study.parents[1] / "preregistration" / "plan.yaml"
    assert rc == 0, out[-3000:] + err
    # the first line names what is verified, before regeneration's progress; the report's first
    # line gives all three parts' outcome, the audit's verdict after it
    assert lines[0].startswith(f"plan {plan} sha256 {plan_sha256(plan)}; registered ")
    full = next(i for i, line in enumerate(lines) if i > 0 and line.startswith(lines[0]))
    assert " UTC (timestamp token; author's date " in lines[full]
    assert "attested by " in lines[full] and "cotdyn test" in lines[full]
    assert f"verified against {authority.ca_pem}" in lines[full]
    assert "; public registration https://osf.io/abcde (the author's word)" in lines[full]
    assert lines[full].endswith("generation time-locked to this registration: verified (10 regenerated)")
    assert lines[full + 1].startswith(f"audit of {attested_study}: PASS")


def test_without_the_ca_the_token_is_said_to_be_unverified(attested_study):
    report = audit(attested_study)
    assert report.ok, report.text()
    assert "timestamp present, not verified: no trusted TSA certificate given" in report.registration
    assert "seeds verified" in report.time_lock and "samples not regenerated" in report.time_lock


def test_a_token_from_a_ca_the_reviewer_did_not_give_is_refused(attested_study, stranger):
    report = audit(attested_study, tsa_ca=stranger.ca_pem)
    assert not report.ok
    assert any("does not verify against the CA certificate" in p and str(stranger.ca_pem) in p for p in report.problems)


def _replace_token(study: Path, token: bytes) -> Path:
    """The study's token replaced, REGISTERED rewritten to record it (a forger's consistent edit)."""
    prereg = study.parents[1] / "preregistration"
    (prereg / TOKEN_NAME).write_bytes(token)
    registered = yaml.safe_load((prereg / "REGISTERED").read_text())
    import hashlib

    registered["timestamp_token_sha256"] = hashlib.sha256(token).hexdigest()
    (prereg / "REGISTERED").write_text(yaml.safe_dump(registered, sort_keys=False))
    return prereg


def test_a_token_over_another_plan_is_refused(attested_study, authority, tmp_path):
    study = copy_study(attested_study, tmp_path)
    prereg = _replace_token(study, authority.token("ab" * 32))
    report = audit(study, tsa_ca=authority.ca_pem)
    assert any(
        f"{prereg / TOKEN_NAME} is over sha256 {'ab' * 32}" in p and "another plan" in p for p in report.problems
    )


def test_a_token_from_another_authority_is_refused_even_over_the_right_plan(
    attested_study, stranger, authority, tmp_path
):
    study = copy_study(attested_study, tmp_path)
    plan = study.parents[1] / "preregistration" / "plan.yaml"
    _replace_token(study, stranger.token(plan_sha256(plan)))
    report = audit(study, tsa_ca=authority.ca_pem)
    assert any("does not verify against the CA certificate" in p for p in report.problems), report.problems


def test_registered_rewritten_with_a_date_earlier_than_the_token_is_refused(attested_study, tmp_path):
    study = copy_study(attested_study, tmp_path)
    prereg = study.parents[1] / "preregistration"
    registered = yaml.safe_load((prereg / "REGISTERED").read_text())
    registered["date"] = "2020-01-01"
    (prereg / "REGISTERED").write_text(yaml.safe_dump(registered, sort_keys=False))
    report = audit(study)
    assert any(
        f"{prereg / 'REGISTERED'} gives the date 2020-01-01, earlier than its timestamp token's" in p
        for p in report.problems
    ), report.problems


def test_a_token_later_than_the_first_generation_record_reads_registered_after_generation_began(
    attested_study, tmp_path
):
    study = copy_study(attested_study, tmp_path)
    log = next(study.glob("cells/*/registered/generation.json"))
    record = json.loads(log.read_text())
    record["started_utc"] = "2020-01-01T00:00:00+00:00"  # the author's clock says generation came first
    log.write_text(json.dumps(record))
    report = audit(study)
    assert any(p.startswith("registered after generation began: the timestamp token's time ") for p in report.problems)


def test_a_generation_log_replaced_after_the_admission_is_not_read(attested_study, tmp_path, monkeypatch):
    """The generation logs are read through the study's view (cotdyn.audit.view), as the tables are:
    one replaced once the folder was walked (an attacker racing the audit, here with an earlier
    start) is not read, and the audit fails."""
    import os

    import cotdyn.audit.check as check

    study = copy_study(attested_study, tmp_path)
    log = next(study.glob("cells/*/registered/generation.json"))
    record = json.loads(log.read_text())
    record["started_utc"] = "2020-01-01T00:00:00+00:00"
    real = check.admit

    def then_replaced(*args):
        admitted = real(*args)
        (tmp_path / "swap").write_text(json.dumps(record))
        os.replace(tmp_path / "swap", log)
        return admitted

    monkeypatch.setattr(check, "admit", then_replaced)
    report = audit(study)
    assert not any(p.startswith("registered after generation began") for p in report.problems), report.problems
    assert not report.ok, "the log the audit did not read is not vouched for either"


def test_samples_drawn_under_another_registrations_seeds_are_named(attested_study, tmp_path):
    """The plan re-registered with another token after generation (its lock changes): every row's
    seed is now another registration's, found from the rows alone, without the model."""
    study = copy_study(attested_study, tmp_path)
    prereg = study.parents[1] / "preregistration"
    (prereg / "REGISTERED").unlink()
    (prereg / TOKEN_NAME).unlink()
    register(prereg / "plan.yaml", prereg / "REGISTERED", "2026-12-06")  # the same plan, no token now
    report = audit(study)
    samples = "cells/qwen7b-gsm8k/registered/samples.parquet"
    assert any(
        p.startswith(f"{samples}: ") and "samples drawn under another registration's seeds" in p
        for p in report.problems
    ), report.problems
    assert "FAILED" in report.time_lock


def test_the_lock_enters_every_seed_and_v3_keeps_its_seeds():
    assert request_seed(1, "c", "p", 0, "reference") == request_seed(1, "c", "p", 0, "reference", None)
    assert request_seed(1, "c", "p", 0, "reference", "plan:aa") != request_seed(1, "c", "p", 0, "reference", "plan:ab")
    v3 = load_plan(ROOT / "preregistration" / "v3" / "plan.yaml")
    v4 = load_plan(ROOT / "preregistration" / "plan.yaml")
    from cotdyn.plan.load import registered_protocol

    assert "time_lock" not in registered_protocol(v3)
    assert registered_protocol(v4)["time_lock"] == f"plan:{plan_sha256(ROOT / 'preregistration' / 'plan.yaml')}"


def test_a_config_cannot_set_the_lock():
    from cotdyn.plan.load import effective_protocol

    with pytest.raises(KeyError, match="time_lock"):
        effective_protocol(load_plan(ROOT / "preregistration" / "plan.yaml"), {"time_lock": "plan:" + "0" * 64})


def test_register_refuses_a_token_over_another_plan_and_an_earlier_date(authority, tmp_path):
    plan = tmp_path / "plan.yaml"
    shutil.copy(ROOT / "preregistration" / "plan.yaml", plan)
    with pytest.raises(PreregistrationError, match="it attests another plan"):
        register(plan, tmp_path / "REGISTERED", None, authority.token("cd" * 32))
    with pytest.raises(PreregistrationError, match="earlier than the timestamp token's time"):
        register(plan, tmp_path / "REGISTERED", "2020-01-01", authority.token(plan_sha256(plan)))
    assert not (tmp_path / "REGISTERED").exists() and not (tmp_path / TOKEN_NAME).exists()


def test_register_takes_a_token_obtained_elsewhere_and_dates_the_registration_by_it(authority, tmp_path):
    plan = tmp_path / "plan.yaml"
    shutil.copy(ROOT / "preregistration" / "plan.yaml", plan)
    token = tmp_path / "plan.tsr"
    token.write_bytes(authority.token(plan_sha256(plan)))
    rc, out, err = cli("register", "--plan", plan, "--registered", tmp_path / "REGISTERED", "--timestamp-token", token)
    assert rc == 0, err
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    assert yaml.safe_load((tmp_path / "REGISTERED").read_text())["date"] == today
    assert (tmp_path / TOKEN_NAME).read_bytes() == token.read_bytes()
    assert "UTC (timestamp token; author's date" in out and "timestamp present, not verified" in out


def test_the_lock_of_a_tokened_registration_holds_the_token(attested_study):
    plan = attested_study.parents[1] / "preregistration" / "plan.yaml"
    samples = pd.read_parquet(attested_study / "cells" / "qwen7b-gsm8k" / "registered" / "samples.parquet")
    token_sha = yaml.safe_load((plan.parent / "REGISTERED").read_text())["timestamp_token_sha256"]
    lock = load_plan(plan)["_generation_lock"]
    assert lock == f"plan:{plan_sha256(plan)}+tsr:{token_sha}"
    row = samples.iloc[0]
    seed = request_seed(20260829, "qwen7b-gsm8k", row.problem_id, int(row.prefix_tokens), "continuation", lock)
    assert int(row.seed) == seed + int(row["sample"])


def test_a_later_analysis_only_version_is_locked_to_the_earlier_registration(attested_study, tmp_path):
    """A version that changes only the analysis names the registration its generation is locked to:
    the seeds are that registration's, and the audit says in words that this version came after."""
    from cotdyn.audit.raw import raw_checks, raw_files
    from cotdyn.audit.registration import earlier_lock, time_lock_status
    from cotdyn.audit.untrusted import refuse_links
    from cotdyn.audit.view import study_view
    from cotdyn.plan.config import resolve_cells, study_protocols
    from cotdyn.plan.timelock import PLAN_LOCK_KEY

    earlier = attested_study.parents[1] / "preregistration"
    prereg = tmp_path / "preregistration"
    shutil.copytree(earlier, prereg / "v4")
    record = yaml.safe_load((earlier / "REGISTERED").read_text())
    text = (earlier / "plan.yaml").read_text().replace("resamples: 100\n", "resamples: 200\n")
    locked = {
        "plan_sha256": record["plan_sha256"],
        "token_sha256": record["timestamp_token_sha256"],
        "registered": "v4/REGISTERED",
    }
    text = text.replace("time_lock: this_registration", "time_lock: " + json.dumps(locked))
    (prereg / "plan.yaml").write_text(text)
    register(prereg / "plan.yaml", prereg / "REGISTERED", "2026-12-07")
    later, first = load_plan(prereg / "plan.yaml"), load_plan(earlier / "plan.yaml")
    assert later[PLAN_LOCK_KEY] == first[PLAN_LOCK_KEY]
    config = json.loads((attested_study / STUDY_MANIFEST).read_text())["config"]
    protocols = study_protocols(config, later)
    raw = raw_files(config, protocols, resolve_cells(config, later))
    seeds = {}  # the audit's own seed check, as it runs it beside the raw files' (audit.raw)
    view = study_view(attested_study, refuse_links(attested_study), list(raw))
    raw_checks(view, raw, protocols, None, "", seeds=seeds)
    checked, problems = sum(rows for rows, _ in seeds.values()), [p for _, p in seeds.values() if p]
    assert checked > 0 and problems == []
    words, problems = earlier_lock(later, prereg / "plan.yaml")
    assert problems == [] and "this plan version was registered after generation began" in words
    assert time_lock_status(protocols, checked, [], words).startswith(
        f"generation time-locked to an earlier registration ({prereg / 'v4' / 'REGISTERED'}"
    )
    # the earlier registration it names must be the one it says
    (prereg / "v4" / "REGISTERED").write_text(
        (prereg / "v4" / "REGISTERED").read_text().replace(record["plan_sha256"], "a" * 64)
    )
    found = earlier_lock(later, prereg / "plan.yaml")[1]
    assert any("v4/REGISTERED registers sha256 " + "a" * 64 in p for p in found), found


@pytest.mark.parametrize(
    "old, new, named",
    [
        ("criterion: {kind: ci_upper_below, value: 0.0}", "criterion: {kind: ci_upper_below, value: 0.0, over: each_cell}",
         "criterion.over is not a key of plan version 4"),
        ("    quantile_rule: linear ", "    # quantile_rule: linear ", "analysis.bootstrap: missing key 'quantile_rule'"),
    ],
)  # fmt: skip
def test_register_refuses_a_v4_plan_its_analysis_cannot_read(tmp_path, old, new, named):
    text = (ROOT / "preregistration" / "plan.yaml").read_text()
    assert old in text
    (tmp_path / "plan.yaml").write_text(text.replace(old, new))
    rc, out, err = cli(
        "register", "--plan", tmp_path / "plan.yaml", "--registered", tmp_path / "REGISTERED", "--date", "2026-12-06"
    )
    assert rc == 1 and named in err and "Traceback" not in err
    assert not (tmp_path / "REGISTERED").exists()
