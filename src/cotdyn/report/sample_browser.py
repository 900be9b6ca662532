"""The per-sample browser page (issue 53 item 6; docs/reference.md section 7): per reference chain of
each cell, the chain, its prefixes, their continuations with the answer extracted from each, and
the answer entropy at every prefix, as inspect_ai's ``inspect view`` shows a sample.

One page per variant, ``report/samples/<variant>.html``, written by rule ``sample_browser`` from the
stored chains, the variant's samples (the first m of each prefix, its endpoint applied:
cotdyn.records.table.variant_samples), its records and the problems; the audit re-derives it from
the same files and compares it byte for byte. Its size is bounded: the first ``MAX_CHAINS`` chains
of each cell, each chain's text to ``CHAIN_CHARS``, the first ``MAX_SAMPLES`` continuations of a
prefix, each to its last ``CONTINUATION_CHARS`` characters (where its answer is); every cut is said
on the page, with the file that holds it whole. Every string from the study is model output or a
user's data: each is escaped, so nothing on the page is markup from data, and the page carries the
report's Content-Security-Policy (cotdyn.report.csp): no script runs in it. The chains fold open
with ``<details>``, which needs no script.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pandas as pd

from cotdyn.files.writers import write_text
from cotdyn.protocol.segment import cap_units, units
from cotdyn.records.table import variant_samples
from cotdyn.report.csp import with_policy

MAX_CHAINS = 10  # per cell: the page is a look at the samples; samples.jsonl holds them all
CHAIN_CHARS = 6000  # a reference chain's text, from its start
MAX_SAMPLES = 16  # continuations shown per prefix (m is at most 256)
CONTINUATION_CHARS = 300  # a continuation's text, its end (the answer is there)

STYLE = (
    "body{font-family:sans-serif;font-size:13px;margin:1em;color:#222}"
    "pre{white-space:pre-wrap;background:#f6f6f6;padding:4px;margin:2px 0}"
    "table{border-collapse:collapse;margin:4px 0 12px}td,th{border:1px solid #ccc;padding:2px 6px;"
    "vertical-align:top;text-align:left}details{margin:6px 0}summary{cursor:pointer}.note{color:#666}"
)


@dataclass(frozen=True)
class CellView:
    """What the page shows of one cell under one variant (tables as stored)."""

    chains: pd.DataFrame
    samples: pd.DataFrame  # the variant's own (variant_samples applied by ``cell_view``)
    records: pd.DataFrame
    problems: pd.DataFrame
    samples_file: str  # where every sample lies whole (samples.jsonl)


def text(value) -> str:
    """Any value from the study as page text: escaped, quotes included (it may sit in an attribute)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "<span class='note'>none</span>"
    return html.escape(str(value), quote=True)


def head(value: str, chars: int, where: str) -> str:
    value = str(value)
    more = len(value) - chars
    cut = f"\n<span class='note'>[{more} more characters in {text(where)}]</span>" if more > 0 else ""
    return f"<pre>{text(value[:chars])}{cut}</pre>"


def tail(value: str, chars: int) -> str:
    value = str(value)
    more = len(value) - chars
    return (f"<span class='note'>[{more} characters before]</span> " if more > 0 else "") + text(value[-chars:])


def prefix_ends(chain_text: str, protocol: dict, n_prefixes: int) -> list[int] | None:
    """Where prefix k = 0..K ends in the chain's text (the end of its k-th unit, after the cap), or
    None where the text alone does not say (token checkpoints, the token_window rule, or a count that
    differs from the samples' prefixes)."""
    if protocol.get("checkpoints", "steps") != "steps" or protocol.get("segmentation") == "token_window":
        return None
    spans = cap_units(units(chain_text, protocol["segmentation"]), protocol.get("cap"))
    ends = [0] + [end for _, end in spans]
    return ends if len(ends) == n_prefixes else None


def answer_counts(answers: pd.Series) -> str:
    """The prefix's answer distribution, most frequent first: ``9 x7, (no answer) x1``."""
    counts: dict[str, int] = {}
    for a in answers:
        key = "(no answer)" if a is None or (isinstance(a, float) and math.isnan(a)) else str(a)
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{a} x{n}" for a, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def prefix_block(k: int, rows: pd.DataFrame, entropy, step_text: str | None, where: str) -> str:
    """One prefix: its length, the step it ends with, its entropy, the answers and continuations."""
    tokens = int(rows["prefix_tokens"].iloc[0])
    h = "not in the trajectory" if entropy is None else f"{entropy:.4f} nats"
    lines = [f"<h4>prefix {k}: {tokens} tokens; entropy {text(h)}</h4>"]
    if step_text is not None:
        lines.append(f"<div>prefix text (its end): {tail(step_text, CONTINUATION_CHARS)}</div>")
    lines.append(f"<div>answers: {text(answer_counts(rows['answer']))}</div>")
    shown = rows.sort_values("sample", kind="stable").head(MAX_SAMPLES)
    body = "".join(
        f"<tr><td>{int(r.sample)}</td><td>{text(r.answer)}</td><td>{text(r.status)}</td>"
        f"<td>{'yes' if bool(r.hit_budget) else 'no'}</td><td>{tail(r.text, CONTINUATION_CHARS)}</td></tr>"
        for r in shown.itertuples(index=False)
    )
    lines.append(
        "<table><tr><th>sample</th><th>answer</th><th>status</th><th>hit budget</th>"
        f"<th>continuation (its end)</th></tr>{body}</table>"
    )
    if len(rows) > len(shown):
        lines.append(f"<div class='note'>{len(rows) - len(shown)} more continuations in {text(where)}</div>")
    return "\n".join(lines)


def flag(value) -> str:
    """A yes/no field of a record in words; "n/a" where it has none (an excluded chain's is NA)."""
    return "n/a" if value is None or pd.isna(value) else str(bool(value))


def listed(value) -> list:
    """A record's list field; empty where it has none (an excluded chain)."""
    return [] if value is None or (not hasattr(value, "__len__") and pd.isna(value)) else list(value)


def chain_block(problem: pd.Series, chain: pd.Series, record: pd.Series | None, samples: pd.DataFrame,
                protocol: dict, view: CellView) -> str:  # fmt: skip
    """One reference chain, folded: the question and gold, the chain, then every prefix."""
    if record is None:
        entropies, summary = {}, "no record"
    else:
        entropies = dict(
            zip((int(p) for p in listed(record["points"])), (float(h) for h in listed(record["trajectory"])))
        )
        summary = f"prediction {record['pred']}, correct {flag(record['correct'])}, monotone {flag(record['monotone'])}"
    prefixes = sorted(int(k) for k in samples["prefix"].unique())
    ends = prefix_ends(str(chain["text"]), protocol, len(prefixes))
    parts = [
        f"<details><summary>{text(problem['problem_id'])}: gold {text(problem['gold'])}; "
        f"chain answer {text(chain['chain_answer'])}; {text(summary)}</summary>",
        f"<div>question:</div>{head(problem['question'], CHAIN_CHARS, 'the problems table')}",
        f"<div>reference chain ({text(chain['finish_reason'])}):</div>",
        head(chain["text"], CHAIN_CHARS, "chains.parquet"),
    ]
    for i, k in enumerate(prefixes):
        step = str(chain["text"])[: ends[i]] if ends is not None and k > 0 else None
        rows = samples[samples["prefix"] == k]
        parts.append(prefix_block(k, rows, entropies.get(k), step, view.samples_file))
    parts.append("</details>")
    return "\n".join(parts)


def cell_section(cell: str, view: CellView, protocol: dict, max_chains: int = MAX_CHAINS) -> str:
    """A cell's first ``max_chains`` chains (problem order), and a note of how many there are."""
    problems = view.problems.reset_index(drop=True)
    chains = view.chains.set_index("problem_id", drop=False)
    records = view.records.set_index("problem_id", drop=False)
    shown = [p for _, p in problems.iterrows() if p["problem_id"] in chains.index][:max_chains]
    # the shown chains' rows alone: split by problem, a panel cell's samples were copied whole
    problem_ids = view.samples["problem_id"]
    by_problem = {p["problem_id"]: view.samples[problem_ids == p["problem_id"]] for p in shown}
    note = (f"the first {len(shown)} of {len(chains)} chains; every sample is in {view.samples_file}, "
            f"every chain in chains.parquet")  # fmt: skip
    parts = [f"<h2 id='{text(cell)}'>{text(cell)}</h2>", f"<p class='note'>{text(note)}</p>"]
    for problem in shown:
        pid = problem["problem_id"]
        record = records.loc[pid] if pid in records.index else None
        samples = by_problem[pid]
        parts.append(chain_block(problem, chains.loc[pid], record, samples, protocol, view))
    return "\n".join(parts)


def browser_html(variant: str, views: Mapping[str, CellView], protocol: dict, max_chains: int = MAX_CHAINS) -> str:
    """The page of one variant over its cells."""
    return browser_page(variant, [cell_section(cell, view, protocol, max_chains) for cell, view in views.items()])


def browser_page(variant: str, sections: list[str]) -> str:
    """The page of one variant from its cells' sections (``cell_section``), in order: a caller may
    render each cell's section and let its tables go before reading the next cell's."""
    title = text(f"Samples: the {variant} variant's chains, prefixes, continuations and entropies")
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title><style>{STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        "<p class='note'>Every text below is model output or the benchmark's, shown as text. Entropy: the "
        "Shannon entropy (nats) of the prefix's answer distribution, as in the records' trajectory.</p>",
    ]
    parts += sections
    parts.append("</body></html>")
    return with_policy("\n".join(parts) + "\n")


def cell_view(chains, samples, records, problems, protocol: dict, samples_file: str) -> CellView:
    """A cell's tables (paths or frames) as the page reads them."""
    chains, samples, records, problems = (t if isinstance(t, pd.DataFrame) else pd.read_parquet(t)
                                          for t in (chains, samples, records, problems))  # fmt: skip
    return CellView(chains, variant_samples(samples, chains, protocol), records, problems, samples_file)


def write_sample_browser(variant: str, views: Mapping[str, CellView], protocol: dict, out: str | Path) -> Path:
    return write_text(browser_html(variant, views, protocol), out)
