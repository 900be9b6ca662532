"""A lab's three plugin packages, as pip installs them (a module and a dist-info folder with its entry
points, on a sys.path entry): a signal, a benchmark with its own normalization, and a backend with a
declared dependency (issues 50 and 65). One place for their code: the plugin tests install them one
at a time (``distribution``), and ``install_lab`` writes all three into a folder, as a lab's
environment holds them, for the tests that run cotdyn's commands and workflow beside them.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

SIGNAL_MODULE = '''
"""A lab's signal: the first point from which the modal answer no longer changes."""
from cotdyn.protocol.signals import Signal
from cotdyn.protocol.trajectory import answer_classes, majority


def _settle_step(t, prefix_answers):
    modes = [majority(answer_classes(prefix_answers[k])) for k in t.points]
    if not modes:
        return float("nan")
    step = len(modes) - 1
    while step > 0 and modes[step - 1] == modes[-1]:
        step -= 1
    return float(step)


SETTLE_STEP = Signal("settle_step", False, "-settle step", "-settle step", "#999933", (0, (3, 1)), derive=_settle_step)
'''

BENCHMARK_MODULE = '''
"""A lab's SVAMP-shaped benchmark whose golds are money: "$8.50" and 8.5 are one answer."""
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

from cotdyn.grading.registry import Benchmark


def money(raw):
    text = re.sub(r"[$,\\s]", "", raw).rstrip(".")
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return format(value.normalize(), "f") if value.is_finite() else None


def _row(row):
    return {**row, "text": f"{row['Body'].strip()} {row['Question'].strip()}"}


SVAMP_MONEY = Benchmark(
    "svamp_money",
    "number",
    {"question": "text", "gold": "Answer", "id": "ID"},
    source=str(Path(__file__).with_name("svamp_money.jsonl")),
    adapt=_row,
    normalize=money,
)
'''

MONEY_ROWS = [
    {"ID": "m-1", "Body": "A pen costs $ 4.25.", "Question": "How much do 2 pens cost?", "Answer": "$8.50"},
    {"ID": "m-2", "Body": "Ann has $ 1,000.", "Question": "She earns $ 200. How much has she?", "Answer": "$1,200.00"},
    {"ID": "m-3", "Body": "A cup costs $ 3.", "Question": "How much do 4 cups cost?", "Answer": "12"},
]

BACKEND_MODULE = """
from pathlib import Path

from cotdyn.generation.backends.base import Completion
from cotdyn.cli.init_backend import declare_init
from cotdyn.generation.backends.registry import register_backend
from cotdyn.plugins import Dependency


class EchoTokenizer:
    def decode(self, ids, skip_special_tokens=True):
        return " ".join(str(i) for i in ids)

    def chat_prompt_ids(self, system_prompt, question):
        return [len(system_prompt), len(question)]


class EchoBackend:
    name = "echo"

    def __init__(self, revision, loud):
        import lab_dep  # the declared dependency, imported as the backend is built

        self.model_revision, self.loud, self.tokenizer = revision, loud, EchoTokenizer()
        self.dep_version = lab_dep.VERSION

    def generate(self, requests, desc="", done=None, on_done=None):
        return [[Completion(r.prompt_ids, "echo", "stop") for _ in range(r.n)] for r in requests]

    def effective_sampling(self, sampling):
        return sampling.as_dict()

    def describe(self):
        return {"backend": self.name, "model_id": "echo", "revision": self.model_revision,
                "dtype": None, "device": "cpu", "loud": self.loud, "lab_dep": self.dep_version}


@register_backend(
    "echo",
    summary="echo: a lab's backend that echoes its prompt",
    options_schema={"type": "object", "additionalProperties": False, "properties": {"loud": {"type": "boolean"}}},
    defaults={"loud": False},
    needs_revision=True,
    requires=(Dependency("lab-dep", ">=1.0,<2", "lab_dep"),),
    runs_in=str(Path(__file__).with_name("echo-env.yaml")),
)
def build(entry, options, golds, benchmark):
    return EchoBackend(entry["revision"], options["loud"])


declare_init("echo", lambda model_id, revision, device: {"backend": "echo", "revision": revision or "echo-1"}, "echo")
"""


# The lab's backend for a whole study: the simulated model under the lab's own name, built only
# where its declared dependency imports.
SIM_BACKEND_MODULE = """
from pathlib import Path

from cotdyn.cli.init_backend import declare_init
from cotdyn.generation.backends.registry import register_backend
from cotdyn.generation.backends.simulated import Planted, SimulatedBackend
from cotdyn.plugins import Dependency


class LabBackend(SimulatedBackend):
    name = "lab_sim"


@register_backend(
    "lab_sim",
    summary="lab_sim: a lab's backend (the simulated model, under its own name)",
    requires=(Dependency("lab-dep", ">=1.0,<2", "lab_dep"),),
    runs_in=str(Path(__file__).with_name("echo-env.yaml")),
)
def build(entry, options, golds, benchmark):
    import lab_dep  # noqa: F401  (the declared dependency, imported as the backend is built)

    return LabBackend(golds or {}, benchmark or "gsm8k", Planted())


declare_init("lab_sim", lambda model_id, revision, device: {"backend": "lab_sim"}, "labsim")
"""


def distribution(root, name: str, version: str, modules: dict[str, str], entry_points: str = "") -> None:
    """Install ``name`` as pip would, into ``root``: its modules and a dist-info folder."""
    for module, text in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(text))
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if entry_points:
        (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def install_lab(site: Path, dependency: str | None = "1.4") -> Path:
    """The three packages in ``site`` (a folder to put on sys.path), with the benchmark's rows and the
    backend's conda environment file; its declared dependency lab-dep at ``dependency`` (None: not
    installed)."""
    site.mkdir(parents=True, exist_ok=True)
    distribution(site, "lab-signals", "0.1", {"lab_signals": SIGNAL_MODULE}, SIGNAL_ENTRY)
    distribution(site, "lab-benchmarks", "0.1", {"lab_benchmarks": BENCHMARK_MODULE}, BENCHMARK_ENTRY)
    distribution(site, "lab-backends", "0.3.1", {"lab_backends": SIM_BACKEND_MODULE}, BACKEND_ENTRY)
    (site / "svamp_money.jsonl").write_text("".join(json.dumps(row) + "\n" for row in MONEY_ROWS))
    (site / "echo-env.yaml").write_text("name: echo\ndependencies: [python=3.11]\n")
    if dependency is not None:
        distribution(site, "lab-dep", dependency, {"lab_dep": f"VERSION = '{dependency}'\n"})
    return site


SIGNAL_ENTRY = "[cotdyn.signals]\nsettle_step = lab_signals:SETTLE_STEP\n"
BENCHMARK_ENTRY = "[cotdyn.benchmarks]\nsvamp_money = lab_benchmarks:SVAMP_MONEY\n"
BACKEND_ENTRY = "[cotdyn.backends]\nlab_sim = lab_backends:build\n"


def install_neighbour(site: Path) -> Path:
    """Another lab's three packages, named apart from the lab's above (signal late_flips, benchmark
    nb_money, backend nb_echo, whose dependency is not installed), as a shared environment may hold
    them: cotdyn's own tests pass with them installed (issue 65)."""
    site.mkdir(parents=True, exist_ok=True)
    signal = SIGNAL_MODULE.replace("settle_step", "late_flips").replace("SETTLE_STEP", "LATE_FLIPS")
    distribution(
        site, "nb-signals", "2.0", {"nb_signals": signal}, "[cotdyn.signals]\nlate_flips = nb_signals:LATE_FLIPS\n"
    )
    benchmark = BENCHMARK_MODULE.replace('"svamp_money"', '"nb_money"')
    distribution(
        site,
        "nb-benchmarks",
        "2.0",
        {"nb_benchmarks": benchmark},
        "[cotdyn.benchmarks]\nnb_money = nb_benchmarks:SVAMP_MONEY\n",
    )
    backend = BACKEND_MODULE.replace('"echo"', '"nb_echo"').replace('"echo: ', '"nb_echo: ')
    distribution(
        site, "nb-backends", "2.0", {"nb_backends": backend}, "[cotdyn.backends]\nnb_echo = nb_backends:build\n"
    )
    (site / "echo-env.yaml").write_text("name: echo\ndependencies: [python=3.11]\n")
    (site / "svamp_money.jsonl").write_text("".join(json.dumps(row) + "\n" for row in MONEY_ROWS))
    return site
