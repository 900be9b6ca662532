"""The per-sample browser page (issue 53 item 6; cotdyn.report.sample_browser): per chain, the chain,
its prefixes, continuations, answers and entropy per step; bounded in size, every string escaped,
under the report's Content-Security-Policy, checked in headless Chromium (skipped where absent)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from test_page_policy import CHROMIUM, NO_CHROMIUM, Listener, framed, open_in_chromium, planted

from cotdyn.report.csp import carries_policy
from cotdyn.report.sample_browser import (
    CHAIN_CHARS,
    MAX_CHAINS,
    MAX_SAMPLES,
    CellView,
    browser_html,
    cell_view,
)

PROTOCOL = {"m": 3, "endpoint": "continuation", "segmentation": "blank_line", "cap": None, "checkpoints": "steps"}


def tables(n: int, payload: str = "", m: int = 3, chain_text: str | None = None):
    """Chains, samples, records and problems of n problems, each chain of two steps (three prefixes)."""
    ids = [f"p{i}{payload}" for i in range(n)]
    text = chain_text or f"Step one {payload}.\n\nStep two: the answer is 7."
    chains = pd.DataFrame({"problem_id": ids, "text": text, "finish_reason": "stop", "chain_answer": f"7{payload}"})
    rows = [
        {"problem_id": pid, "prefix": k, "prefix_tokens": 5 * k, "sample": j, "text": f"so it is {j}{payload}",
         "answer": None if j == 0 else f"{j % 2}{payload}", "status": "no_answer" if j == 0 else "ok",
         "hit_budget": j == 1}
        for pid in ids for k in range(3) for j in range(m)
    ]  # fmt: skip
    records = pd.DataFrame({"problem_id": ids, "points": [np.arange(3)] * n, "trajectory": [np.array([1.0986, 0.6365, 0.0])] * n,
                            "pred": "1", "correct": True, "monotone": True})  # fmt: skip
    problems = pd.DataFrame({"problem_id": ids, "question": f"What is 3 + 4? {payload}", "gold": f"7{payload}"})
    return chains, pd.DataFrame(rows), records, problems


def page(n: int = 2, payload: str = "", **kwargs) -> str:
    chains, samples, records, problems = tables(n, payload, **kwargs)
    view = cell_view(
        chains, samples, records, problems, {**PROTOCOL, "m": kwargs.get("m", 3)}, "cells/c/v/samples.jsonl"
    )
    return browser_html("registered", {f"m-gsm8k{payload}": view}, {**PROTOCOL, "m": kwargs.get("m", 3)})


def test_each_chain_shows_its_prefixes_continuations_answers_and_entropy():
    html = page(2)
    assert carries_policy(html.encode())
    assert html.count("<details>") == 2
    assert "prefix 0: 0 tokens; entropy 1.0986 nats" in html and "prefix 2: 10 tokens; entropy 0.0000 nats" in html
    assert "prefix text (its end): Step one ." in html  # prefix 1 ends with the first step
    assert "answers: (no answer) x1, 0 x1, 1 x1" in html
    assert "<td>no_answer</td>" in html and "so it is 2" in html
    assert "What is 3 + 4?" in html and "Step two: the answer is 7." in html


PAYLOAD = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&"


def test_every_string_from_the_study_is_escaped_so_no_markup_comes_from_data():
    html = page(2, PAYLOAD)
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;&quot;&#x27;&amp;"
    assert "<script" not in html and "<img" not in html and "onerror=alert" not in html.replace(escaped, "")
    # the payload was in the cell name, ids, question, gold, chain, continuations and answers: all shown as text
    assert html.count(escaped) >= 2 * (3 * 3 + 5) + 2, html.count(escaped)
    tags = set(re.findall(r"<([a-zA-Z0-9]+)", html))
    assert tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h4", "p", "div", "span", "details",
                    "summary", "pre", "table", "tr", "th", "td"}, tags  # fmt: skip


def test_the_page_is_bounded_and_says_what_it_leaves_out():
    long_chain = "Step one.\n\n" + "x" * (3 * CHAIN_CHARS) + "\n\nStep three."
    html = page(3 * MAX_CHAINS, m=4 * MAX_SAMPLES, chain_text=long_chain)
    assert html.count("<details>") == MAX_CHAINS
    assert f"the first {MAX_CHAINS} of {3 * MAX_CHAINS} chains" in html
    assert f"{3 * MAX_SAMPLES} more continuations in cells/c/v/samples.jsonl" in html
    assert "more characters in chains.parquet" in html
    assert html.count("so it is") == MAX_CHAINS * 3 * MAX_SAMPLES
    assert len(html.encode()) < 2_000_000, len(html.encode())


def test_a_variant_reads_its_own_first_m_samples():
    chains, samples, records, problems = tables(1, m=5)
    view = cell_view(chains, samples, records, problems, {**PROTOCOL, "m": 2}, "x.jsonl")
    assert isinstance(view, CellView) and set(view.samples["sample"]) == {0, 1}


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
@pytest.mark.parametrize("embedded", [False, True], ids=["opened", "embedded-as-report.html-does"])
def test_a_payload_in_the_data_runs_nothing_and_shows_as_text_in_headless_chromium(tmp_path, embedded):
    with Listener() as server:
        payload = planted(server.port)
        html = page(2, payload)
        path = tmp_path / "samples.html"
        path.write_text(framed(html) if embedded else html)
        dom = open_in_chromium(path)
        assert server.paths == [], f"the sample page sent {server.paths}"
        if not embedded:  # the DOM holds the payload as text, escaped again when serialized
            assert "&lt;script&gt;fetch(" in dom and "<script" not in dom
        # the check can see a request: the same payload as markup, without the policy, sends some
        bare = tmp_path / "bare.html"
        bare.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{payload}</body></html>")
        open_in_chromium(bare)
        assert server.paths, "a planted payload sent nothing: the check sees no request"
