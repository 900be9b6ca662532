"""A registration a reviewer can verify (issue 48; docs/reference.md section 7, "The registration"):
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
from factories import without_assumed_effects
from test_audit import build_study, copy_study
from tsa import TsaServer, make_authority

from cotdyn.audit.check import audit
from cotdyn.cli.main import main
from cotdyn.files.layout import STUDY_MANIFEST
from cotdyn.plan.load import load_plan, plan_sha256
from cotdyn.plan.registration import TOKEN_NAME, PreregistrationError, register
from cotdyn.protocol.seeds import request_seed

ROOT = Path(__file__).resolve().parents[1]
# The panel's plan without its assumed effects, whose power table `cotdyn register` would simulate.
PANEL_TEXT = without_assumed_effects((ROOT / "preregistration" / "plan.yaml").read_text())
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

    return build_study(root, DATA, {}, [], registration=register_with_token, extras=False)


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
    plan.write_text(PANEL_TEXT)
    with pytest.raises(PreregistrationError, match="it attests another plan"):
        register(plan, tmp_path / "REGISTERED", None, authority.token("cd" * 32))
    with pytest.raises(PreregistrationError, match="earlier than the timestamp token's time"):
        register(plan, tmp_path / "REGISTERED", "2020-01-01", authority.token(plan_sha256(plan)))
    assert not (tmp_path / "REGISTERED").exists() and not (tmp_path / TOKEN_NAME).exists()


def test_register_takes_a_token_obtained_elsewhere_and_dates_the_registration_by_it(authority, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PANEL_TEXT)
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
    # plan v5: the sha256 of the TSTInfo the authority signed (v4 held the token file's, +tsr:)
    signed_sha = yaml.safe_load((plan.parent / "REGISTERED").read_text())["timestamp_signed_sha256"]
    lock = load_plan(plan)["_generation_lock"]
    assert lock == f"plan:{plan_sha256(plan)}+tst:{signed_sha}"
    row = samples.iloc[0]
    seed = request_seed(20260829, "qwen7b-gsm8k", row.problem_id, int(row.prefix_tokens), "continuation", lock)
    assert int(row.seed) == seed + int(row["sample"])


def test_a_later_analysis_only_version_is_locked_to_the_earlier_registration(attested_study, tmp_path):
    """A version that changes only the analysis names the registration its generation is locked to:
    the seeds are that registration's, and the audit says in words that this version came after."""
    from cotdyn.audit.raw import raw_checks, raw_files
    from cotdyn.audit.registration import time_lock_status
    from cotdyn.audit.untrusted import refuse_links
    from cotdyn.audit.view import study_view
    from cotdyn.plan.attestation import earlier_registration_problems
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
        "signed_sha256": record["timestamp_signed_sha256"],  # plan v5's lock holds what the authority signed
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
    words, problems = earlier_registration_problems(later, prereg / "plan.yaml")
    assert problems == [] and words.startswith("generation locked to the registration of ")
    assert f"({prereg / 'v4' / 'REGISTERED'}): seeds verified ({checked} samples rows); samples not regenerated" in (
        time_lock_status(protocols, checked, [], words)
    )
    # the earlier registration it names must be the one it says
    (prereg / "v4" / "REGISTERED").write_text(
        (prereg / "v4" / "REGISTERED").read_text().replace(record["plan_sha256"], "a" * 64)
    )
    found = earlier_registration_problems(later, prereg / "plan.yaml")[1]
    assert any("v4/REGISTERED registers sha256 " + "a" * 64 in p for p in found), found


@pytest.mark.parametrize(
    "old, new, named",
    [
        ("criterion: {kind: ci_upper_below, value: 0.0}", "criterion: {kind: ci_upper_below, value: 0.0, over: each_cell}",
         "criterion.over is not a key of plan version 5"),
        ("    quantile_rule: linear ", "    # quantile_rule: linear ", "analysis.bootstrap: missing key 'quantile_rule'"),
    ],
)  # fmt: skip
def test_register_refuses_a_plan_from_v4_on_its_analysis_cannot_read(tmp_path, old, new, named):
    text = PANEL_TEXT
    assert old in text
    (tmp_path / "plan.yaml").write_text(text.replace(old, new))
    rc, out, err = cli(
        "register", "--plan", tmp_path / "plan.yaml", "--registered", tmp_path / "REGISTERED", "--date", "2026-12-06"
    )
    assert rc == 1 and named in err and "Traceback" not in err
    assert not (tmp_path / "REGISTERED").exists()


# --- issue 60: a PASS that cannot be bought ---------------------------------------------------

LOCK_LINE = "time_lock: this_registration\n"
SEED_UNDER_V5_LOCK = 4078651967726433024


def test_a_v4_plan_without_its_time_lock_registers_runs_and_audits_nowhere(attested_study, tmp_path):
    """Finding 1: the lock is required from plan v4 on; the error names the key and the version."""
    text = PANEL_TEXT
    assert LOCK_LINE in text
    (tmp_path / "plan.yaml").write_text(text.replace(LOCK_LINE, ""))
    rc, out, err = cli("register", "--plan", tmp_path / "plan.yaml", "--registered", tmp_path / "REGISTERED", "--date", "2026-12-06")  # fmt: skip
    assert rc == 1 and "time_lock: missing; plan version 5 locks generation" in err and "Traceback" not in err
    assert not (tmp_path / "REGISTERED").exists()
    # a study whose plan lost its lock after registration, REGISTERED rewritten to match (the attack)
    study = copy_study(attested_study, tmp_path / "copy")
    prereg = study.parents[1] / "preregistration"
    (prereg / "plan.yaml").write_text((prereg / "plan.yaml").read_text().replace(LOCK_LINE, ""))
    for name in ("REGISTERED", TOKEN_NAME):
        (prereg / name).unlink()
    (prereg / "REGISTERED").write_text(f"plan_sha256: {plan_sha256(prereg / 'plan.yaml')}\ndate: '2026-12-06'\n")
    report = audit(study)
    assert not report.ok and any("time_lock: missing; plan version 5" in p for p in report.problems), report.problems
    from cotdyn.plan.registration import write_plan_check

    config = json.loads((study / STUDY_MANIFEST).read_text())["config"]
    with pytest.raises(ValueError, match="time_lock: missing"):  # the run's first rule, check_plan
        write_plan_check(prereg / "plan.yaml", config, tmp_path / "plan_check.json")


def test_a_plan_before_v4_is_said_unlocked_by_its_version():
    from cotdyn.audit.registration import time_lock_status

    assert time_lock_status({"registered": {"seed": 1}}, 0, [], None, 3) == (
        "generation not time-locked (plan version 3 predates time_lock, which plan v4 introduced)"
    )


def _later_text(earlier_text: str, record: dict, change=("resamples: 100\n", "resamples: 200\n")) -> str:
    """A later version of ``earlier_text`` locked to the registration ``record`` (its REGISTERED) at v4/."""
    locked = {"plan_sha256": record["plan_sha256"], "token_sha256": record.get("timestamp_token_sha256"),
              "signed_sha256": record.get("timestamp_signed_sha256"), "registered": "v4/REGISTERED"}  # fmt: skip
    assert change[0] in earlier_text
    text = earlier_text.replace(*change)
    return text.replace(LOCK_LINE, "time_lock: " + json.dumps(locked) + "\n")


@pytest.fixture(scope="module")
def later_version_study(authority, tmp_path_factory) -> Path:
    """Finding 4's legitimate route: generation locked to a v4 registration with a token; a later
    version that changes only the analysis, registered with its own token after generation began."""
    import time

    root = tmp_path_factory.mktemp("later")

    def two_registrations(plan, registered):
        earlier = plan.parent / "v4"
        earlier.mkdir()
        shutil.copy(plan, earlier / "plan.yaml")
        with TsaServer(authority) as server:
            assert cli("register", "--plan", earlier / "plan.yaml", "--registered", earlier / "REGISTERED",
                       "--timestamp-url", server.url)[0] == 0  # fmt: skip
            record = yaml.safe_load((earlier / "REGISTERED").read_text())
            plan.write_text(_later_text(plan.read_text(), record))
            time.sleep(1.1)  # the later token's second is after the earlier's
            assert cli("register", "--plan", plan, "--registered", registered, "--timestamp-url", server.url)[0] == 0

    began = []

    def at_the_earlier_registration(seconds):  # the generation logs' clock: generation began then
        from cotdyn.plan.timestamp import read_token

        began.append(read_token(root / "preregistration" / "v4" / TOKEN_NAME).gen_time.isoformat())
        return began[-1]

    from unittest import mock

    import cotdyn.generation.run

    with mock.patch.object(cotdyn.generation.run, "_utc", at_the_earlier_registration):
        study = build_study(root, DATA, {}, [], registration=two_registrations, extras=False)
    assert began
    return study


def test_an_analysis_only_version_registered_after_the_data_passes_and_says_so(later_version_study, authority):
    """Finding 4: the later version's own token is after generation began, by design; the earlier
    registration's is not. The audit verifies the earlier token against the CA too."""
    report = audit(later_version_study, tsa_ca=authority.ca_pem)
    assert report.ok, report.text()
    earlier = later_version_study.parents[1] / "preregistration" / "v4" / "REGISTERED"
    assert (
        report.time_lock.startswith("analysis registered ")
        and ", after the data; generation locked to the registration of " in report.time_lock
    )
    assert (
        f"({earlier}; attested by CN=cotdyn test TSA,O=cotdyn test (verified against {authority.ca_pem}))"
        in report.time_lock
    )
    assert "seeds verified" in report.time_lock
    # without the CA, nothing of the earlier token is called verified
    unverified = audit(later_version_study).time_lock
    assert "timestamp present, not verified: no trusted TSA certificate given" in unverified
    assert "verified against" not in unverified


def test_an_earlier_registration_is_verified_from_its_own_files(later_version_study, authority, stranger, tmp_path):
    """Finding 2: the earlier plan, REGISTERED and token travel with the study and are each checked."""
    study = copy_study(later_version_study, tmp_path)
    earlier = study.parents[1] / "preregistration" / "v4"
    report = audit(study, tsa_ca=stranger.ca_pem)  # the earlier token, against a CA that did not sign it
    assert any(str(earlier / TOKEN_NAME) in p or "does not verify against the CA" in p for p in report.problems)
    (earlier / "plan.yaml").unlink()
    report = audit(study, tsa_ca=authority.ca_pem)
    assert not report.ok and any(f"{earlier / 'plan.yaml'}: not found" in p for p in report.problems), report.problems
    assert "verified against" not in report.time_lock


def _made_up(plan, registered):
    """Finding 2's attack: a plan locked to a hand-written REGISTERED (made-up hashes, no token file,
    no earlier plan), then registered."""
    (plan.parent / "v4").mkdir()
    record = {"plan_sha256": "ab" * 32, "date": "2026-01-01", "timestamp_token": TOKEN_NAME,
              "timestamp_token_sha256": "cd" * 32}  # fmt: skip
    (plan.parent / "v4" / "REGISTERED").write_text(yaml.safe_dump(record))
    plan.write_text(_later_text(plan.read_text(), record))
    register(plan, registered, "2026-12-06")


@pytest.mark.slow  # builds two studies
def test_an_earlier_registration_on_the_authors_word_neither_runs_nor_audits(tmp_path):
    """The run's first rule refuses it; a study generated under it anyway (the check skipped, as a
    modified cotdyn would) fails its audit, which names the earlier plan it could not find."""
    from unittest import mock

    with pytest.raises(PreregistrationError, match="v4/plan.yaml: not found; a version locked to an earlier"):
        build_study(tmp_path / "run", DATA, {}, [], registration=_made_up, extras=False)
    with mock.patch("cotdyn.plan.registration.earlier_registration_problems", lambda plan, path: (None, [])):
        study = build_study(tmp_path / "skipped", DATA, {}, [], registration=_made_up, extras=False)
    report = audit(study)
    assert not report.ok
    earlier = study.parents[1] / "preregistration" / "v4"
    assert any(f"{earlier / 'plan.yaml'}: not found" in p for p in report.problems), report.problems
    assert "verified" not in report.time_lock.split("seeds verified")[0]


def test_a_later_version_may_change_only_the_analysis(attested_study, tmp_path):
    """Finding 3: a version locked to a real earlier registration that changes the seed and a
    sampling temperature is refused at the run's first rule and named by the audit's check."""
    from cotdyn.plan.attestation import earlier_registration

    prereg = tmp_path / "preregistration"
    shutil.copytree(attested_study.parents[1] / "preregistration", prereg / "v4")
    record = yaml.safe_load((prereg / "v4" / "REGISTERED").read_text())
    text = _later_text((prereg / "v4" / "plan.yaml").read_text(), record)
    assert "seed: 20260829" in text and "continuation_temperature: 0.7" in text
    text = text.replace("seed: 20260829", "seed: 1").replace(
        "continuation_temperature: 0.7", "continuation_temperature: 0.9"
    )
    (prereg / "plan.yaml").write_text(text)
    register(prereg / "plan.yaml", prereg / "REGISTERED", "2026-12-07")
    found = earlier_registration(load_plan(prereg / "plan.yaml"), prereg / "plan.yaml")
    assert [p.split(": ", 1)[1] for p in found.problems] == [
        f"'protocol' differs from the earlier registration's ({prereg / 'v4' / 'plan.yaml'}): a later version "
        "locked to it may change only the analysis"
    ]
    # an analysis-only change is no problem
    (prereg / "plan.yaml").write_text(_later_text((prereg / "v4" / "plan.yaml").read_text(), record))
    assert earlier_registration(load_plan(prereg / "plan.yaml"), prereg / "plan.yaml").problems == ()


def test_register_refuses_a_token_no_reviewer_could_verify(authority, stranger, tmp_path):
    """Finding 6: a token without the TSA's certificate, or one that does not verify against the CA
    the author gives, is refused before any study is locked to it."""
    from tsa import openssl

    plan = tmp_path / "plan.yaml"
    plan.write_text(PANEL_TEXT)
    sha = plan_sha256(plan)
    without = authority.reply(openssl("ts", "-query", "-digest", sha, "-sha256"))  # no -cert
    with pytest.raises(PreregistrationError, match="embeds no certificate, so no reviewer could verify it"):
        register(plan, tmp_path / "REGISTERED", None, without)
    with pytest.raises(PreregistrationError, match="does not verify against the CA certificate"):
        register(plan, tmp_path / "REGISTERED", None, stranger.token(sha), tsa_ca=authority.ca_pem)
    assert not (tmp_path / "REGISTERED").exists() and not (tmp_path / TOKEN_NAME).exists()
    token = tmp_path / "plan.tsr"
    token.write_bytes(authority.token(sha))
    rc, out, err = cli("register", "--plan", plan, "--registered", tmp_path / "REGISTERED", "--timestamp-token",
                       token, "--tsa-ca", authority.ca_pem)  # fmt: skip
    assert rc == 0, err
    assert f"verified against {authority.ca_pem}" in out


def test_plan_v5_locks_to_what_the_tsa_signed(tmp_path):
    """Finding 5: one signature, one lock. Under v5 two replies carrying one signature (another
    status text, another certificate set) give one lock; under v4 (registered, kept) they give two."""
    from asn1crypto import tsp

    authority = make_authority(tmp_path / "tsa", "real", chain=True)
    text = PANEL_TEXT
    locks = {}
    for version in (4, 5):
        plan_text = text.replace("plan_version: 5\n", f"plan_version: {version}\n")
        reply = None
        for variant in ("a", "b"):
            folder = tmp_path / f"v{version}{variant}"
            folder.mkdir()
            (folder / "plan.yaml").write_text(plan_text)
            reply = reply or authority.token(plan_sha256(folder / "plan.yaml"))
            if variant == "b":
                parsed = tsp.TimeStampResp.load(reply)
                parsed["status"] = tsp.PKIStatusInfo({"status": "granted", "status_string": ["ok"]})
                reply = parsed.dump()
            register(folder / "plan.yaml", folder / "REGISTERED", None, reply)
            locks[version, variant] = load_plan(folder / "plan.yaml")["_generation_lock"]
    assert locks[4, "a"] != locks[4, "b"] and locks[4, "a"].split("+")[1].startswith("tsr:")
    assert locks[5, "a"] == locks[5, "b"] and locks[5, "a"].split("+")[1].startswith("tst:")


def test_the_v5_lock_and_its_seeds_are_pinned():
    """Golden: the lock text of plan v5 and a seed drawn under it (a change is a new plan version)."""
    from cotdyn.plan.timelock import LockedTo

    lock = LockedTo("a" * 64, "b" * 64, None, "c" * 64).lock
    assert lock == f"plan:{'a' * 64}+tst:{'c' * 64}"
    assert LockedTo("a" * 64, "b" * 64).lock == f"plan:{'a' * 64}+tsr:{'b' * 64}"  # v4's, unchanged
    assert request_seed(20260829, "qwen7b-gsm8k", "gsm8k-0", 12, "continuation", lock) == SEED_UNDER_V5_LOCK
