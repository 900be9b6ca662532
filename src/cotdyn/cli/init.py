"""``cotdyn init DIR``: the skeleton of a preregistered study of your own (docs/your-study.md).

It writes three files into DIR, refusing to overwrite any:

- ``config.yaml``: the study (named after DIR), its one cell ``<model>-<benchmark>``, the model, the
  benchmark (your JSONL, ``--jsonl FILE --answer TYPE``, or a declared one, ``--benchmark NAME``,
  from its local copy), and the cell declared confirmatory;
- ``plan.yaml``: a plan of its own, the registered plan's protocol and analysis (so the registered
  definitions apply unchanged) with hypotheses H1, H2, H3 and H5 and their Holm family naming your cell,
  and the benchmark's content sha256 in its panel, the one place it is pinned (for a benchmark the
  registered plan pins, its revision and hash, checked against the local copy);
- ``deviations.yaml``: none declared.

Read and edit them, then freeze the plan with ``cotdyn register`` before the first run. Paths in the
files are as given (relative to the folder you run snakemake from, or absolute).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import yaml

from cotdyn.cli.init_backend import init_declaration, model_entry, settings_of
from cotdyn.cli.init_checks import (
    InitError,
    check_config,
    check_plan_values,
    parse_setting,
    registered_plan_of,
    resolve_model,
)
from cotdyn.files.terminal import printable
from cotdyn.files.writers import write_text
from cotdyn.plan.timelock import THIS_REGISTRATION

REGISTERED_PLAN = "preregistration/plan.yaml"
KEY = re.compile(r"[A-Za-z0-9_]+")
MAX_NAME = 100  # characters of a study, model or benchmark name (a file name must hold it)


def _frozen(jsonl: str, declaration) -> dict:
    """The plan's panel entry of a file's rows read as ``declaration`` reads them: their number and
    content sha256."""
    from cotdyn.dataset.benchmarks import BenchmarkError, content_sha256, problems_from_rows, read_jsonl_lines

    if not Path(jsonl).is_file():
        raise InitError(f"--jsonl {jsonl}: not a file (expected a JSONL file, one JSON object a line)")
    try:
        numbered = read_jsonl_lines(jsonl)
        problems = problems_from_rows([row for _, row in numbered], declaration, jsonl, [n for n, _ in numbered])
    except OSError as e:
        raise InitError(f"{jsonl}: cannot be read ({e.strerror or e})") from None
    except BenchmarkError as e:  # it names the file and line
        raise InitError(str(e)) from None
    except (KeyError, UnicodeDecodeError) as e:
        raise InitError(f"{jsonl}: {e.args[0] if e.args else e}") from None
    if not problems:
        raise InitError(f"{jsonl}: no problems")
    return {"n": len(problems), "content_sha256": content_sha256(problems)}


def benchmark_entry(jsonl: str, answer: str, fields: dict) -> tuple[dict, dict]:
    """(config entry, plan entry) of your own JSONL: the config names the file, its fields and answer
    type; the plan pins its number of problems and content sha256."""
    from cotdyn.grading import registry

    spec = {"kind": "jsonl", "path": jsonl, "fields": {k: v for k, v in fields.items() if v}, "answer": answer}
    try:
        declaration = registry.entry(spec)
    except KeyError as e:
        raise InitError(f"{jsonl}: {e.args[0]}") from None
    return spec, {"kind": "jsonl", **_frozen(jsonl, declaration)}


def declared_entry(name: str, jsonl: str | None, registered: dict) -> tuple[dict, dict]:
    """(config entry, plan entry) of a declared benchmark (``cotdyn.grading.registry``), read from
    ``jsonl`` or the declaration's own local copy. Where the registered plan pins it, the plan entry
    is the registered plan's (its revision and hash), and the local copy must be those rows."""
    from cotdyn.dataset.benchmarks import arithmetic, content_sha256
    from cotdyn.grading import registry

    declaration = registry.REGISTRY[name]
    pinned = ((registered.get("panel") or {}).get("benchmarks") or {}).get(name)
    path = jsonl or declaration.source
    if declaration.generated:
        problems = arithmetic(20, 0)  # the loader's default count and seed
        return {"kind": name}, {"kind": name, "n": len(problems), "content_sha256": content_sha256(problems)}
    if path is None and pinned is None:
        raise InitError(
            f"benchmark {name}: no local copy is declared and the registered plan pins none of its rows; "
            "give --jsonl FILE, a copy of its rows"
        )
    config = {"kind": name, **({"path": path} if path else {})}
    if pinned is None:
        return config, {"kind": name, **_frozen(path, declaration)}
    if path is not None:
        found = _frozen(path, declaration)["content_sha256"]
        if found != pinned["content_sha256"]:
            raise InitError(
                f"{path}: content sha256 {found} differs from the registered plan's {pinned['content_sha256']} "
                f"for {name} (not the rows it pins)"
            )
    return config, {"kind": name, **pinned}


def study_plan(
    registered: dict,
    cell: str,
    model: str,
    benchmark: str,
    frozen: dict,
    protocol: dict,
    min_group_size: int | None = None,
) -> dict:
    """A plan for one cell: the registered plan's protocol (with ``protocol`` laid over it), exclusion,
    verdict rule and analysis (``min_group_size``, when given, in place of its small-group rule);
    H1, H2, H3, H5 and the Holm family (H1 and H3) on ``cell``; ``frozen``, the benchmark's panel
    entry (its content sha256 and number of problems). No H4: it compares a distilled model
    with standard ones, which a one-model study has not."""
    unknown = sorted(set(protocol) - set(registered["protocol"]))
    if unknown:
        raise InitError(
            f"--protocol: unknown parameter(s) {', '.join(unknown)} (known: {', '.join(registered['protocol'])})"
        )
    analysis = registered["analysis"]
    if min_group_size is not None:
        analysis = {**analysis, "groups": {**analysis["groups"], "min_group_size": min_group_size}}
    hypotheses = {h["id"]: h for h in registered["hypotheses"]}
    named = [{**hypotheses[h], "cells": [cell]} for h in ("H1", "H2", "H3", "H5")]
    return {
        # the registered plan's version: the analysis reads a plan by its version's rules (version 1
        # registered no small-group rule and decided by the CI alone), so the copy keeps them
        "plan_version": registered["plan_version"],
        "title": f"Chain-of-thought entropy trajectories of {model} on {benchmark}",
        "protocol": {**registered["protocol"], **protocol},
        "exclusion": dict(registered["exclusion"]),
        "panel": {
            "anchor": model,
            "standard": [model],
            "models": {model: {}},
            "benchmarks": {benchmark: frozen},
        },
        "hypotheses": named,
        "verdict_rule": dict(registered["verdict_rule"]),
        # a new study's generation is locked to its own registration (plan v4 on), whichever one
        # the registered plan's generation was locked to
        **({"time_lock": THIS_REGISTRATION} if "time_lock" in registered else {}),
        "holm": {
            **{k: v for k, v in registered["holm"].items() if k != "family"},
            "family": [{"id": "H1", "cell": cell, "p": "p_fisher"}, {"id": "H3", "cell": cell, "p": "p_spearman"}],
        },
        "analysis": analysis,
        **(
            {"assumed_effects": proposed_effects(registered["assumed_effects"])}
            if "assumed_effects" in registered
            else {}
        ),
    }


# What a study of your own is proposed to be powered for, before anything is measured (plan v5 on):
# the registered plan's per-cell laws are its cells', not yours.
PROPOSED_LAW = {"gap_pp": 10.0, "coverage": 0.5, "accuracy": 0.5, "exclusion_rate": 0.0}
PROPOSED_SOURCE = (
    "proposed by cotdyn init, to be replaced by your pilot's figures: a 10-point gap (an effect of interest, not a "
    "measurement), coverage and accuracy 0.5 (unknown before the study), no exclusions; violation and confidence "
    "laws: the records simulator's"
)


def proposed_effects(registered: dict) -> dict:
    """The assumed effects proposed for a study's one cell: the registered plan's required power and
    table settings, and one law for every cell (``default``): PROPOSED_LAW under the registered
    plan's default violation and confidence laws."""
    default = {k: v for k, v in registered.get("default", {}).items() if k != "source"}
    return {
        **{k: registered[k] for k in ("min_power", "replicates", "seed", "scales") if k in registered},
        "default": {**PROPOSED_LAW, **default, "source": PROPOSED_SOURCE},
    }


HEADER = """# The plan of study '{study}', written by `cotdyn init`: the registered plan's protocol and analysis
# ({source}), with hypotheses H1, H2, H3 and H5 naming this study's cell. Edit it now if you
# mean to; then freeze it (cotdyn register) before the first run. After registration, any edit
# stops the run: a changed plan is a new registration.
"""

CONFIG_HEADER = """# Study '{study}', written by `cotdyn init`. Run from the folder that holds these paths:
#   snakemake --cores 2 --configfile {config}
# The cell is named <model>-<benchmark> from the keys below; it is confirmatory: its protocol must
# equal the plan's (or declare a deviation in {deviations}).
"""

DEVIATIONS = """# Declared deviations of study '{study}' from its plan (cotdyn.plan.registration): none yet.
# One entry per difference: {{cell, parameter, registered, used, reason}}.
[]
"""


def write_skeleton(
    folder: Path,
    jsonl: str | None,
    answer: str | None,
    fields: dict,
    model: str | None = None,
    benchmark: str | None = None,
    backend: str = "transformers",
    model_id: str | None = None,
    revision: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    registered_plan: str = REGISTERED_PLAN,
    protocol: dict | None = None,
    min_group_size: int | None = None,
    options: dict | None = None,
    signals: list[str] | None = None,
) -> list[Path]:
    """config.yaml, plan.yaml and deviations.yaml of a new study in ``folder`` (see the module docstring).
    A relative ``registered_plan`` that the working directory lacks is the one cotdyn ships."""
    from cotdyn.plan.config import bundled

    registered_plan = bundled(registered_plan)
    if not Path(registered_plan).is_file():
        raise InitError(f"{registered_plan} not found: name the registered plan with --registered-plan")
    folder = Path(folder)
    study = folder.name
    declared, init = init_declaration(backend)
    model = model or init.default_key
    from cotdyn.grading.registry import BROKEN

    if answer is None and benchmark in BROKEN:  # two packages declare it, or its plugin does not load
        raise InitError(f"--benchmark {benchmark}: {BROKEN[benchmark]}")
    if answer is None and benchmark not in _declared():
        raise InitError(
            "give your own file (--jsonl FILE --answer TYPE) or a declared benchmark "
            f"(--benchmark one of {', '.join(_declared())})" + (f", not {benchmark}" if benchmark else "")
        )
    if answer is not None and not jsonl:
        raise InitError("--answer TYPE reads your own file: give it as --jsonl FILE")
    benchmark = benchmark or re.sub(r"[^A-Za-z0-9_]", "_", Path(jsonl).stem)
    for what, key in (("study", study), ("model", model), ("benchmark", benchmark)):
        if len(key) > MAX_NAME:
            raise InitError(f"{what} name '{key[:40]}...' has {len(key)} characters; at most {MAX_NAME}")
        if not KEY.fullmatch(key):
            raise InitError(
                f"{what} name '{key}' may hold only letters, digits and '_' (a cell is <model>-<benchmark>)"
            )
    paths = {name: folder / name for name in ("config.yaml", "plan.yaml", "deviations.yaml")}
    existing = [str(p) for p in paths.values() if p.exists()]
    if existing:
        raise InitError(f"{', '.join(existing)} exist(s): cotdyn init never overwrites a study")
    registered = registered_plan_of(registered_plan)
    if answer is not None:
        entry, frozen = benchmark_entry(jsonl, answer, fields)
    else:
        entry, frozen = declared_entry(benchmark, jsonl, registered)
    cell = f"{model}-{benchmark}"
    weights = model_entry(backend, model_id, revision, device, options)
    device, dtype = settings_of(declared, device, dtype, weights)
    protocol = {**({"dtype": dtype} if dtype else {}), **(protocol or {})}
    plan = study_plan(registered, cell, model, benchmark, frozen, protocol, min_group_size)
    check_plan_values(plan, protocol, min_group_size)
    config = {
        "study": study,
        "plan": str(paths["plan.yaml"]),
        "cells": [cell],
        "confirmatory": [cell],
        "models": {model: weights},
        "benchmarks": {benchmark: entry},
        **({"signals": list(signals)} if signals else {}),
        "variants": {"registered": {}},
        "extras": [],  # the registered study only (config extras, cotdyn.files.layout.EXTRAS)
    }
    check_config(config)
    if signals:
        from cotdyn.plugins import PluginError
        from cotdyn.protocol.signals import study_signals

        try:
            study_signals(signals)
        except PluginError as e:
            raise InitError(f"--signal: {e}") from None
    if "id" in weights:  # found now, not by the run's first job (a served model: its tokenizer)
        resolve_model(weights["id"], revision, tokenizer_only=declared.needs_revision)
    dump = lambda obj: yaml.safe_dump(obj, sort_keys=False, allow_unicode=True, width=120)  # noqa: E731
    texts = {
        "plan.yaml": HEADER.format(study=study, source=registered_plan) + dump(plan),
        "config.yaml": CONFIG_HEADER.format(
            study=study, config=paths["config.yaml"], deviations=paths["deviations.yaml"]
        )
        + dump(config),
        "deviations.yaml": DEVIATIONS.format(study=study),
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            write_text(text, paths[name])
    except OSError as e:
        raise InitError(f"{e.filename or folder}: cannot be written ({e.strerror or e})") from None
    return list(paths.values())


def _declared() -> list[str]:
    from cotdyn.grading.registry import REGISTRY

    return list(REGISTRY)


def cmd_init(args) -> int:
    try:
        written = write_skeleton(
            Path(args.folder),
            args.jsonl,
            args.answer,
            {"question": args.question, "gold": args.gold, "id": args.id, "options": args.options},
            model=args.model,
            benchmark=args.benchmark,
            backend=args.backend,
            model_id=args.model_id,
            revision=args.revision,
            device=args.device,
            dtype=args.dtype,
            registered_plan=args.registered_plan,
            protocol=dict(parse_setting(p) for p in args.protocol),
            min_group_size=args.min_group_size,
            options=dict(parse_setting(o, "--option") for o in args.option),
            signals=args.signal,
        )
    except InitError as e:
        print(f"error: {printable(str(e))}", file=sys.stderr)
        return 1
    folder = Path(args.folder)
    for path in written:
        print(f"wrote {printable(str(path))}")
    from cotdyn.generation.backends import registry
    from cotdyn.plugins import MissingDependency

    try:  # the run stops on it, unless its jobs run in their conda environments (cotdyn.workflow.checks)
        registry.check_requires(registry.spec(args.backend))
    except MissingDependency as e:
        print(f"note: {printable(str(e))} (snakemake --sdm conda); the run stops on it otherwise", file=sys.stderr)
    try:
        print_power(folder / "plan.yaml", args.power_reps)
    except ValueError as e:  # power.PowerInputError, naming its key (a --power-reps below 1)
        print(f"error: {printable(str(e))}", file=sys.stderr)
        return 1
    print(
        "next: read and edit them, then\n"
        f"  cotdyn register --plan {folder / 'plan.yaml'} --registered {folder / 'REGISTERED'} --date YYYY-MM-DD\n"
        "    (or --timestamp-url URL in place of --date: a timestamp authority attests the time; docs/your-study.md)\n"
        "    (it simulates the power again, at the registered replicates; below min_power it registers only\n"
        "    with --underpowered; the problems needed: "
        f"cotdyn power --plan {folder / 'plan.yaml'} --needed 100,200,400)\n"
        f"  snakemake --cores 2 --configfile {folder / 'config.yaml'}"
    )
    return 0


def print_power(plan_path: Path, reps: int | None) -> None:
    """The power the study's size gives under the proposed effects, before it is registered: the
    plan's own table at ``reps`` simulated studies per world (None: the plan's replicates)."""
    from cotdyn.analysis import power
    from cotdyn.cli.power import table_settings
    from cotdyn.plan.load import load_plan

    if reps == 0:
        print(f"power: not simulated (--power-reps 0); cotdyn power --plan {printable(str(plan_path))}")
        return
    plan = load_plan(plan_path)
    if power.SECTION not in plan:
        print("power: not simulated (the registered plan, before v5, has no assumed_effects)")
        return
    effects = power.assumed_effects(plan)
    reps, seed, scales = table_settings(effects, reps)  # as cotdyn power and register read the plan
    result = power.power_analysis(plan, effects, reps, seed, scales, workers=os.cpu_count() or 1, progress=True)
    size = ", ".join(f"{n} problems in {cell}" for cell, n in result["sizes"].items())
    print(f"power at this study's size ({size}), under the proposed assumed_effects:")
    print("\n".join(power.table_lines(result)))


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    from cotdyn.generation.backends import registry
    from cotdyn.grading.types import ANSWER_TYPES

    i = subparsers.add_parser("init", help="write the config, plan and deviations of a study of your own")
    i.add_argument("folder", help="the study's folder; its name is the study's (results/<name>/)")
    i.add_argument(
        "--jsonl",
        default=None,
        help="your problems, one JSON object a line (with --answer); or a declared benchmark's copy",
    )
    i.add_argument(
        "--answer",
        default=None,
        choices=ANSWER_TYPES,
        help="your file's answer type: how answers are read and compared",
    )
    i.add_argument("--question", default="question", help="the field holding the question (default: question)")
    i.add_argument("--gold", default="gold", help="the field holding the gold answer (default: gold)")
    i.add_argument("--id", default=None, help="the field holding a problem id (default: <benchmark>-<row>)")
    i.add_argument("--options", default=None, help="a choice benchmark's field holding the option texts")
    i.add_argument(
        "--benchmark",
        default=None,
        help="your file's key (default: the file's name); without --answer, a declared benchmark: "
        + ", ".join(_declared()),
    )
    i.add_argument(
        "--model",
        default=None,
        help="the model's key (default: the backend's: smollm2; sim on the simulated backend; model on openai_compat)",
    )
    i.add_argument(
        "--backend",
        default="transformers",  # not argparse's choices: a refused plugin is named, with its fix (write_skeleton)
        help="; ".join(declared.summary for declared in registry.REGISTRY.values()) + " (default: transformers)",
    )
    i.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the backend, written under its own key in the model entry (repeatable), "
        "e.g. --option base_url=http://127.0.0.1:8000 --option model=NAME for openai_compat",
    )
    i.add_argument(
        "--signal",
        action="append",
        default=[],
        metavar="NAME",
        help="a plugin signal the study computes beside cotdyn's own (repeatable; `cotdyn ls signals`)",
    )
    i.add_argument("--model-id", default=None, help="a hub id or a local model folder")
    i.add_argument("--revision", default=None, help="the hub revision to pin")
    i.add_argument(
        "--device", default=None, help="for a backend with a device setting (transformers): cpu or cuda (default: cpu)"
    )
    i.add_argument(
        "--dtype",
        default=None,
        help="for a backend with a precision setting (transformers, vllm): the study's precision (default: float32 "
        "on a CPU, else the plan's); where the weights fix it (openai_compat), init registers the precision "
        "the server lists, and --dtype is needed only where they do not (vLLM's server)",
    )
    i.add_argument("--registered-plan", default=REGISTERED_PLAN, help="the plan whose protocol and analysis to copy")
    i.add_argument(
        "--protocol",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="register a protocol value other than the registered plan's (repeatable), e.g. reference_max_tokens=80",
    )
    i.add_argument(
        "--min-group-size",
        type=int,
        default=None,
        help="register a smaller analysis.groups.min_group_size than the registered plan's (a small study)",
    )
    i.add_argument(
        "--power-reps",
        type=int,
        default=None,
        metavar="N",
        help="simulated studies per world for the power it prints (default: the plan's replicates, as `cotdyn register` will; 0: none)",
    )
    i.set_defaults(run=cmd_init)
