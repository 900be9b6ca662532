"""The benchmark registry (docs/design.md section 4): one declaration per benchmark a study may name.

A declaration (``Benchmark``) is all there is to know of a benchmark that is not a registered value:
its name, where its rows come from (a hub dataset's repo, config and split; a local copy in the
checkout, ``source``; or code, ``generated``), which row fields hold the question, the gold answer,
the id and the options, its answer type (``number``, ``boxed``, ``choice``, ``string``:
``cotdyn.grading.answers``), the marker its gold follows where a solution holds it (``gold_after``)
and how a row becomes a problem. ``register`` adds one; every list of
benchmark names is read from ``REGISTRY`` (``kinds``): the config schema's ``kind`` enum
(``cotdyn.plan.schema``), the plan check, ``cotdyn init --benchmark`` and the ``--benchmark``
choices of ``cotdyn extract``/``equivalent``. docs/developer-notes.md, "Adding a benchmark".

A hub revision and a content sha256 are registered values: they live in a plan's ``panel``
(``preregistration/plan.yaml`` pins GSM8K's and MATH-500's), never here, so each is pinned once.
A config's ``benchmarks`` entry names a declaration by ``kind`` and may add a local copy (``path``)
or, outside a plan's panel, the pinned values; ``kind: jsonl`` is a researcher's own file, with its
fields and answer type in the config entry. Seed 002's tasks (ARC-Challenge, SVAMP, MATH algebra)
have no plan that pins them: the hub was unreachable when they were added, and the loader refuses a
hub load without a pinned revision and warns loudly when no content hash is pinned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from cotdyn.grading import choices
from cotdyn.grading.types import ANSWER_TYPES


@dataclass(frozen=True)
class Benchmark:
    name: str
    answer: str  # answer type
    # row field of each role: question, gold, id (None: "<name>-<index>"), options (choice only),
    # gold_raw (the source's gold field when an adapter derives the gold: ARC's answerKey)
    fields: Mapping[str, str | None]
    hub: Mapping[str, str | None] | None = None  # repo, config, split (the revision: a plan's or a config's)
    source: str | None = None  # a local copy of the rows, relative to the checkout (the offline path)
    where: Mapping[str, str] = field(default_factory=dict)  # keep rows whose field equals the value
    adapt: Callable[[dict], dict] | None = None  # a raw row in the form ``fields`` reads
    gold_after: str | None = None  # the gold is the text after this marker (GSM8K's "... #### 18")
    generated: bool = False  # made by code (cotdyn.dataset.benchmarks.arithmetic), no rows
    # The benchmark's own rules, where its answer type's are not right for it (None: the type's).
    # ``extract``: a model's text -> the answer as written (None: none found), in place of the type's
    # registered extraction. ``normalize``: an answer as written (a model's, or the gold) -> its class
    # (None: unreadable), in place of the type's normalization; it must map a class to itself, since a
    # stored class is normalized again when it is compared.
    extract: Callable[[str], str | None] | None = None
    normalize: Callable[[str], str | None] | None = None


def _arc_row(row: dict) -> dict:
    """ARC's options are ``choices: {text: [...], label: [...]}`` with labels A-E or 1-5; the model
    sees them lettered A, B, ... in their order, so the gold is the letter at the key's position."""
    options, labels = row["choices"]["text"], row["choices"]["label"]
    key = str(row["answerKey"])
    if key not in labels:
        raise KeyError(f"answerKey {key!r} is none of the labels {labels}")
    return {**row, "options": list(options), "gold": choices.letters(len(options))[list(labels).index(key)]}


def _svamp_row(row: dict) -> dict:
    """SVAMP splits a problem into a Body and a Question; the model reads them joined."""
    return {**row, "text": f"{str(row['Body']).strip()} {str(row['Question']).strip()}"}


REGISTRY: dict[str, Benchmark] = {}

# A researcher's own file: its fields and answer type come from the config entry.
JSONL = "jsonl"


def register(benchmark: Benchmark) -> Benchmark:
    """Add one declaration to ``REGISTRY``: a name no other benchmark has, of a known answer type."""
    if benchmark.name in REGISTRY or benchmark.name == JSONL:
        raise ValueError(f"benchmark '{benchmark.name}' is declared already (or is the reserved kind '{JSONL}')")
    if benchmark.answer not in ANSWER_TYPES:
        raise ValueError(
            f"benchmark '{benchmark.name}': answer '{benchmark.answer}' is not an answer type ({', '.join(ANSWER_TYPES)})"
        )
    for role in ("question", "gold"):
        if role not in benchmark.fields:
            raise ValueError(f"benchmark '{benchmark.name}': fields has no '{role}'")
    if benchmark.answer == "choice" and (benchmark.extract or benchmark.normalize):
        # a choice's class is an option's letter, read against the problem's own options
        raise ValueError(f"benchmark '{benchmark.name}': a choice benchmark declares no extract or normalize")
    REGISTRY[benchmark.name] = benchmark
    return benchmark


def kinds() -> list[str]:
    """Every ``kind`` a config's benchmark entry may name: the declared benchmarks, then ``jsonl``."""
    return [*REGISTRY, JSONL]


for _declared in (
    # revision and content sha256: the plan's panel (preregistration/plan.yaml); the local
    # copies are those rows, byte-exact (data/README.md)
    Benchmark(
        "gsm8k",
        "number",
        {"question": "question", "gold": "answer", "id": None},
        {"repo": "openai/gsm8k", "config": "main", "split": "test"},
        source="data/gsm8k_test.jsonl",
        gold_after="####",
    ),
    Benchmark(
        "math500",
        "boxed",
        {"question": "problem", "gold": "answer", "id": "unique_id"},
        {"repo": "HuggingFaceH4/MATH-500", "config": None, "split": "test"},
        source="data/math500_test.jsonl",
    ),
    Benchmark("arithmetic", "number", {"question": "question", "gold": "gold", "id": None}, generated=True),
    # seed 002 appendix A.1; revisions and hashes unverified (hub unreachable when added)
    Benchmark(
        "arc",
        "choice",
        {"question": "question", "gold": "gold", "gold_raw": "answerKey", "id": "id", "options": "options"},
        {"repo": "allenai/ai2_arc", "config": "ARC-Challenge", "split": "test"},
        adapt=_arc_row,
    ),
    Benchmark(
        "svamp",
        "number",
        {"question": "text", "gold": "Answer", "id": "ID"},
        {"repo": "ChilleD/SVAMP", "config": None, "split": "test"},
        adapt=_svamp_row,
    ),
    Benchmark(
        "math_algebra",
        "boxed",
        {"question": "problem", "gold": "solution", "id": None},
        {"repo": "EleutherAI/hendrycks_math", "config": "algebra", "split": "test"},
        where={"type": "Algebra"},
    ),
):
    register(_declared)


def entry(spec: Mapping) -> Benchmark:
    """The registry entry a config's benchmark spec names, or the entry a ``jsonl`` spec describes."""
    kind = spec.get("kind")
    if kind == JSONL:
        where = f"benchmark kind jsonl ({spec.get('path', 'no path')})"
        for key in ("path", "fields", "answer"):
            if key not in spec:
                raise KeyError(f"{where}: missing key '{key}'")
        if spec["answer"] not in ANSWER_TYPES:
            raise KeyError(f"{where}: answer '{spec['answer']}' is not an answer type ({', '.join(ANSWER_TYPES)})")
        fields = dict(spec["fields"])
        for role in ("question", "gold"):
            if role not in fields:
                raise KeyError(f"{where}: fields has no '{role}'")
        if spec["answer"] == "choice" and "options" not in fields:
            raise KeyError(f"{where}: a choice benchmark needs fields.options (the list of option texts)")
        return Benchmark(JSONL, spec["answer"], {"id": None, **fields})
    if kind not in REGISTRY:
        raise KeyError(f"unknown benchmark kind '{kind}' (known: {', '.join(kinds())})")
    return REGISTRY[kind]


def answer_rule(spec: Mapping) -> str:
    """The name the answer functions take for a benchmark spec: the registered name, or a jsonl's type."""
    return spec["answer"] if spec.get("kind") == JSONL else spec["kind"]
