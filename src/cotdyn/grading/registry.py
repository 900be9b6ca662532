"""The benchmark registry (docs/reference.md section 4): one declaration per benchmark a study may name.

A declaration (``Benchmark``) is all there is to know of a benchmark that is not a registered value:
its name, where its rows come from (a hub dataset's repo, config and split; a local copy in the
checkout, ``source``; or code, ``generated``), which row fields hold the question, the gold answer,
the id and the options, its answer type (``number``, ``boxed``, ``choice``, ``string``:
``cotdyn.grading.answers``), its own extraction and normalization where its type's are not right for
it (``extract``, ``normalize``: money golds, say), the marker its gold follows where a solution holds
it (``gold_after``) and how a row becomes a problem. ``register`` adds one.

Benchmarks are found through packaging entry points of group ``cotdyn.benchmarks`` (``discover``, run
as ``cotdyn.grading`` is imported), cotdyn's own (``cotdyn.grading.builtin_benchmarks``) as a lab's
plugin package: ``ORIGINS`` records the package each came from. Every list of
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

from cotdyn import plugins
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
    # stored class is normalized again when it is compared. It never receives cotdyn's canonical form
    # (plan v4): under ``answer_form: canonical`` a class in that form is itself. An answer it cannot
    # read equals no other answer, gold included.
    extract: Callable[[str], str | None] | None = None
    normalize: Callable[[str], str | None] | None = None


REGISTRY: dict[str, Benchmark] = {}
GROUP = "cotdyn.benchmarks"  # the entry-point group a package declares its benchmarks under
ORIGINS: dict[str, plugins.Plugin] = {}  # benchmark -> the entry point (and package) it was found through
BROKEN: dict[str, plugins.PluginError] = {}  # benchmark -> why its plugin could not be loaded

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


def discover() -> None:
    """Load every benchmark plugin (group ``cotdyn.benchmarks``) not yet loaded, recording its package;
    cotdyn's own first, so its declaration order leads ``kinds()``. An entry point names a declared
    ``Benchmark`` (registered here if its module did not register it) or a module whose import
    registers it; either way the entry point's name is the benchmark's. A plugin that fails is kept in
    ``BROKEN``, and its error is given where a config names it (``entry``)."""
    plugins.discover(GROUP, _found, ORIGINS, BROKEN)


def _found(plugin: plugins.Plugin, declared: object) -> None:
    if plugin.name not in REGISTRY and isinstance(declared, Benchmark) and declared.name == plugin.name:
        try:
            register(declared)
        except ValueError as error:
            raise plugins.PluginError(f"{GROUP} plugin '{plugin.name}' from {plugin.package}: {error}") from None
    if plugin.name not in REGISTRY:
        raise plugins.PluginError(
            f"{GROUP} plugin '{plugin.name}' from {plugin.package} declares no benchmark of that name ({plugin.value})"
        )


def package_of(name: str) -> str:
    """The distribution (name and version) a benchmark comes from, as ``cotdyn ls`` lists it."""
    return plugins.package_of(ORIGINS, name)


def kinds() -> list[str]:
    """Every ``kind`` a config's benchmark entry may name: the declared benchmarks, then ``jsonl``."""
    return [*REGISTRY, JSONL]


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
    if kind in BROKEN and kind not in REGISTRY:
        raise KeyError(str(BROKEN[kind]))
    if kind not in REGISTRY:
        hint = "" if ORIGINS else f"; no {GROUP} entry point was found: reinstall cotdyn (pip install -e .)"
        raise KeyError(f"unknown benchmark kind '{kind}' (known: {', '.join(kinds())}){hint}")
    return REGISTRY[kind]


def answer_rule(spec: Mapping) -> str:
    """The name the answer functions take for a benchmark spec: the registered name, or a jsonl's type."""
    return spec["answer"] if spec.get("kind") == JSONL else spec["kind"]
