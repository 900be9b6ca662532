"""cotdyn's own benchmarks, declared: ``gsm8k``, ``math500``, ``arithmetic``, ``arc``, ``svamp``,
``math_algebra`` (docs/reference.md section 4).

Each is one ``register(Benchmark(...))`` declaration (``cotdyn.grading.registry``), and cotdyn's package
metadata names each as an entry point of group ``cotdyn.benchmarks`` (pyproject.toml), as a lab's plugin
package names its own: the registry finds these the way it finds theirs (``registry.discover``).
Importing this module declares all six, in this order (the order of ``registry.kinds()``).
"""

from __future__ import annotations

from cotdyn.grading import choices
from cotdyn.grading.registry import Benchmark, register


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


DECLARED = (
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
)
for _declared in DECLARED:
    register(_declared)

# what each entry point names (pyproject.toml)
GSM8K = DECLARED[0]
MATH500 = DECLARED[1]
ARITHMETIC = DECLARED[2]
ARC = DECLARED[3]
SVAMP = DECLARED[4]
MATH_ALGEBRA = DECLARED[5]
