"""A study's config resolved against the plan: cells, their model and benchmark, and protocols.

The config names cells ``<model>-<benchmark>``; panel models and benchmarks take their ids,
revisions and content hashes from the plan's ``panel`` (one place for each registered fact),
with the config's entry laid over them; a config may not pin another content hash than its plan's.
What a model entry needs by its backend (an id, a revision) is the backend's declaration's to check
(cotdyn.generation.backends.registry.check_entry, called by the workflow and the audit: this layer
lies below generation).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from cotdyn.grading.registry import answer_rule
from cotdyn.grading.registry import entry as registry_entry
from cotdyn.grading.types import ANSWER_FORMS, EQUIVALENCES, EXTRACTIONS
from cotdyn.plan.load import effective_protocol
from cotdyn.protocol.segment import RULES


class ConfigError(ValueError):
    pass


# --- --config values ----------------------------------------------------------------------------


def _snakemake_reading(text: str):
    """What Snakemake 9 makes of a nested ``--config`` value (``snakemake.cli.parse_config``): YAML
    read by the base loader, every scalar a string (``{m: 3}`` is ``{'m': '3'}``)."""
    import yaml

    try:
        return yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506 (the base loader makes strings only)
    except yaml.YAMLError:
        return None


def command_line_overrides(entries, parsed: dict) -> dict[str, tuple[str, object]]:
    """``{key: (entry, value)}`` of each ``--config key=value`` entry whose value Snakemake read as a
    mapping or list of strings, that value read again as YAML (``{m: 3}`` is ``{'m': 3}``), strictly:
    a key written twice is refused, naming the entry (cotdyn.files.strict). ``entries``: the command
    line's entries (``workflow.config_settings.config_args``); ``parsed``: Snakemake's reading of them
    (``config_settings.config``). A top-level scalar is left as Snakemake read it (it tries int, float
    and bool itself), and so is an entry Snakemake did not read from that text (a config handed to its
    Python API, already typed). ConfigError names the entry."""
    from cotdyn.files.strict import UntrustedFileError, parse_yaml

    out = {}
    for entry in entries or []:
        key, sep, text = str(entry).partition("=")
        given = parsed.get(key) if sep else None
        if not isinstance(given, (dict, list)) or _snakemake_reading(text) != given:
            continue
        try:
            out[key] = (entry, parse_yaml(text, f"--config {entry}"))
        except UntrustedFileError as e:
            raise ConfigError(str(e)) from None
    return out


def override_source(overrides: dict[str, tuple[str, object]], path, default: str) -> str:
    """Who set the config field at ``path`` (a schema error's path): the ``--config`` entry that holds
    it, else ``default`` (the config files)."""
    parts = list(path)
    if not parts or parts[0] not in overrides:
        return default
    entry, value = overrides[parts[0]]
    for part in parts[1:]:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and part < len(value):
            value = value[part]
        else:
            return default  # a field the config file holds, beside the override's
    return f"--config {entry}"


@dataclass(frozen=True)
class Cell:
    name: str
    model_key: str
    benchmark_key: str
    model: dict
    benchmark: dict

    @property
    def answer_rule(self) -> str:
        """What the answer functions take for this cell: its benchmark's registered name, or a
        researcher's JSONL's answer type (``cotdyn.grading.registry.answer_rule``)."""
        return answer_rule(self.benchmark)


# The registered plans and the bundled data this cotdyn ships (preregistration/, data/): in a checkout
# src/cotdyn/bundled/ links to the checkout's folders, in an installed wheel it holds copies of them.
BUNDLED = Path(__file__).resolve().parents[1] / "bundled"
BUNDLED_FOLDERS = ("preregistration", "data")


def bundled_roots(root: Path = BUNDLED) -> list[Path]:
    """The folders the bundled files lie in, resolved (in a checkout, its own preregistration/ and data/)."""
    return [(root / name).resolve() for name in BUNDLED_FOLDERS]


def bundled(path, root: Path = BUNDLED, cwd: Path | None = None):
    """``path``, or the file under ``root`` (the bundled files, ``BUNDLED``) that it names, resolved,
    when it is relative and names no file in ``cwd`` (the working directory) but one there: a study
    runs in a folder of its own, which holds its config but not the bundled plans and data. A file in
    ``cwd`` wins."""
    if not isinstance(path, str) or Path(path).is_absolute() or ((cwd or Path.cwd()) / path).exists():
        return path
    return str((root / path).resolve()) if (root / path).exists() else path


def with_bundled_paths(config: dict, root: Path = BUNDLED, cwd: Path | None = None) -> dict:
    """The config with its plan and benchmark files found by ``bundled`` (nothing else changes; a
    malformed entry is left for the schema to name)."""
    out = dict(config)
    if "plan" in out:
        out["plan"] = bundled(out["plan"], root, cwd)
    if isinstance(out.get("benchmarks"), dict):
        out["benchmarks"] = {
            key: {**b, "path": bundled(b["path"], root, cwd)} if isinstance(b, dict) and "path" in b else b
            for key, b in out["benchmarks"].items()
        }
    return out


def split_cell(name: str) -> tuple[str, str]:
    """(model key, benchmark) of a cell name: the benchmark is what follows the last '-'."""
    model, sep, benchmark = str(name).rpartition("-")
    if not sep or not model or not benchmark:
        raise ValueError(f"cell name '{name}' is not '<model>-<benchmark>'")
    return model, benchmark


# A quick look (``limit:``, as lm-evaluation-harness's --limit): the first N problems of each
# benchmark. A subset of a benchmark tests no registered hypothesis, so a limited study is
# descriptive: no cell of it is held as confirmatory, whatever ``confirmatory`` lists, and its
# plan check, verdicts, report header and audit say so (``limited_scope``).
def study_limit(config: dict) -> int | None:
    """The config's ``limit``, or None for a study of every problem."""
    limit = config.get("limit")
    return None if limit is None else int(limit)


def confirmatory_cells(config: dict) -> list[str]:
    """The cells held to the plan's frozen protocol: none in a limited study."""
    return [] if study_limit(config) else list(config.get("confirmatory", []))


def limited_scope(limit: int) -> str:
    """What a limited study is, in the words its pages and its audit use."""
    return (
        f"descriptive: limited to the first {limit} problems of each benchmark (config limit), "
        "so no cell is confirmatory and no verdict is a registered result"
    )


def limited(benchmark: dict, limit: int | None) -> dict:
    """A benchmark entry under the study's ``limit`` (the smaller, where the entry has its own)."""
    if limit is None:
        return benchmark
    own = benchmark.get("limit")
    return {**benchmark, "limit": min(limit, int(own)) if own else limit}


def resolve_cells(config: dict, plan: dict, source: str = "config") -> dict[str, Cell]:
    panel_models = plan.get("panel", {}).get("models", {})
    panel_benchmarks = plan.get("panel", {}).get("benchmarks", {})
    cells = {}
    for name in config["cells"]:
        try:
            model_key, benchmark_key = split_cell(name)
        except ValueError as e:
            raise ConfigError(f"{source}: {e}") from None
        if model_key not in config["models"]:
            raise ConfigError(f"{source}: cell '{name}' names model '{model_key}', which is not under 'models'")
        if benchmark_key not in config["benchmarks"]:
            raise ConfigError(
                f"{source}: cell '{name}' names benchmark '{benchmark_key}', which is not under 'benchmarks'"
            )
        model = {**panel_models.get(model_key, {}), **config["models"][model_key]}
        pinned = panel_benchmarks.get(benchmark_key, {}).get("content_sha256")
        own = config["benchmarks"][benchmark_key].get("content_sha256")
        if pinned and own not in (None, pinned):
            # the plan pins the content once; a config's other hash would load other data under its name
            raise ConfigError(
                f"{source}: benchmarks.{benchmark_key}.content_sha256 {own} differs from the plan's {pinned} "
                f"(the plan pins it: drop it from the config)"
            )
        benchmark = {**panel_benchmarks.get(benchmark_key, {}), **config["benchmarks"][benchmark_key]}
        try:
            registry_entry(benchmark)
        except KeyError as e:
            raise ConfigError(f"{source}: benchmarks.{benchmark_key}: {e.args[0]}") from None
        cells[name] = Cell(name, model_key, benchmark_key, model, limited(benchmark, study_limit(config)))
    for name in config.get("confirmatory", []):
        if name not in cells:
            raise ConfigError(f"{source}: confirmatory cell '{name}' is not one of the study's cells")
    return cells


# Protocol parameters that take one of a few named values, and where those values are defined.
CHOICES = {
    "segmentation": RULES,
    "null_answers": ("drop", "class"),
    "label": ("majority", "chain"),
    "endpoint": ("continuation", "chain_answer", "reasoning", "forced"),
    "equivalence": EQUIVALENCES,
    "extraction": EXTRACTIONS,
    "answer_form": ANSWER_FORMS,
    "checkpoints": ("steps", "tokens"),
}
# The study-wide precision: torch's, for a backend that loads the weights at one, or the one the
# weights come at where they fix it (a backend's ``weights_precision``: a served model's as its server
# lists it, a GGUF file's; "Q4_1"), which cotdyn init registers and the backend checks as it loads.
TORCH_DTYPES = ("bfloat16", "float16", "float32")
WEIGHTS_PRECISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+ -]{0,39}")


def is_precision(dtype) -> bool:
    """Whether ``dtype`` names a precision: one of TORCH_DTYPES, or the weights' own (WEIGHTS_PRECISION)."""
    return dtype in TORCH_DTYPES or (isinstance(dtype, str) and WEIGHTS_PRECISION.fullmatch(dtype) is not None)


# What a records-only variant may change: everything else is fixed by the generations it reuses.
# ``extraction`` is one: samples.parquet keeps the registered rule's answers (the audit re-extracts
# them so), and a variant's records re-extract each sample's text under its own rule. So is
# ``answer_form``: the stored answers are the ``as_written`` classes, which the records map to the
# variant's form (cotdyn.records.table.with_answer_form).
RECORDS_ONLY = ("m", "epsilon", "null_answers", "label", "endpoint", "equivalence", "extraction", "answer_form")


# A variant's keys that are no protocol parameters: which samples it reads, and how it reads the
# answers of continuations cut by their budget (``cut_answers``: ``keep``, as registered, or
# ``no_answer``, the sensitivity variant that counts them as giving none).
VARIANT_KEYS = ("subsample_of", "cut_answers")
CUT_ANSWERS = ("keep", "no_answer")


def cut_answers(config: dict, variant: str, source: str = "config") -> str:
    """How ``variant`` reads the answers of cut continuations: ``keep`` (registered) or ``no_answer``."""
    value = config.get("variants", {}).get(variant, {}).get("cut_answers", "keep")
    if value not in CUT_ANSWERS:
        raise ConfigError(
            f"{source}: variant '{variant}': unknown cut_answers '{value}' (known: {', '.join(CUT_ANSWERS)})"
        )
    return value


def samples_variant(config: dict, variant: str) -> str:
    """The variant whose samples.parquet ``variant`` reads: its own, or the one it subsamples."""
    return config.get("variants", {}).get(variant, {}).get("subsample_of", variant)


def protocol_for(config: dict, plan: dict, variant: str, source: str = "config") -> dict:
    """The effective protocol of a variant: plan, then the study's overrides, then the variant's.

    A variant with ``subsample_of: <other>`` generates nothing: its records are derived from the
    other variant's samples (the first m of them, for the m sweep), so it may differ from that
    variant only in the records-only parameters.
    """
    variants = config.get("variants", {"registered": {}})
    if variant not in variants:
        raise ConfigError(f"{source}: unknown variant '{variant}' (known: {', '.join(variants)})")
    overrides = {k: v for k, v in variants[variant].items() if k not in VARIANT_KEYS}
    try:
        protocol = effective_protocol(plan, config.get("protocol"), overrides)
    except KeyError as e:
        raise ConfigError(f"{source}: variant '{variant}': {e.args[0]}") from None
    for key, allowed in CHOICES.items():
        if protocol[key] not in allowed:
            raise ConfigError(
                f"{source}: variant '{variant}': unknown {key} '{protocol[key]}' (known: {', '.join(allowed)})"
            )
    if not is_precision(protocol["dtype"]):
        raise ConfigError(
            f"{source}: variant '{variant}': unknown dtype {str(protocol['dtype'])[:60]!r} (known: "
            f"{', '.join(TORCH_DTYPES)}, or the precision a served model or GGUF file has, such as Q4_1)"
        )
    parent = samples_variant(config, variant)
    if parent != variant:
        if parent not in variants or samples_variant(config, parent) != parent:
            raise ConfigError(
                f"{source}: variant '{variant}': subsample_of '{parent}' must name a variant that generates"
            )
        generating = protocol_for(config, plan, parent, source)
        changed = sorted(k for k in protocol if protocol[k] != generating[k] and k not in RECORDS_ONLY)
        if changed:
            raise ConfigError(
                f"{source}: variant '{variant}' reuses the samples of '{parent}' but changes "
                f"{', '.join(changed)} (only {', '.join(RECORDS_ONLY)} may differ)"
            )
        cut, parent_cut = protocol["endpoint"] == "reasoning", generating["endpoint"] == "reasoning"
        # the reasoning cut moves the last prefix, so samples drawn with it serve only the sampled
        # (reasoning) or forced endpoint, and samples drawn without it never the sampled one
        if cut != parent_cut and not (parent_cut and protocol["endpoint"] == "forced"):
            raise ConfigError(
                f"{source}: variant '{variant}': endpoint '{protocol['endpoint']}' cannot reuse the samples of "
                f"'{parent}' (endpoint '{generating['endpoint']}'): the reasoning cut changes which prefixes "
                "are sampled"
            )
        if protocol["m"] > generating["m"]:
            raise ConfigError(
                f"{source}: variant '{variant}': m = {protocol['m']} exceeds the {generating['m']} "
                f"samples of '{parent}'"
            )
    return protocol


# The protocol parameters a reference chain depends on (cotdyn.generation.requests.reference_requests and the
# prompt); variants equal in all of them share one chains file.
REFERENCE_FIELDS = (
    "system_prompt",
    "reference_temperature",
    "reference_max_tokens",
    "top_p",
    "top_k",
    "repetition_penalty",
    "seed",
)

# Parameters of the model rather than of a variant: one value for the whole study.
STUDY_WIDE = ("dtype",)


def reference_id(protocol: dict) -> str:
    """Name of a reference setting: temperature, budget and seed, readable, then a digest of every
    field in REFERENCE_FIELDS, so variants differing only in, say, top-p never share chains."""
    setting = {field: protocol[field] for field in REFERENCE_FIELDS}
    digest = hashlib.sha256(json.dumps(setting, sort_keys=True).encode()).hexdigest()[:8]
    return f"t{protocol['reference_temperature']}-b{protocol['reference_max_tokens']}-s{protocol['seed']}-{digest}"


def study_protocols(config: dict, plan: dict) -> dict[str, dict]:
    """Every variant's effective protocol (protocol_for), by variant."""
    return {v: protocol_for(config, plan, v) for v in config.get("variants", {"registered": {}})}


def check_study_wide(protocols: dict[str, dict], source: str = "config") -> None:
    """Variants may not differ in a study-wide parameter: a cell's model is built once for all of them."""
    for key in STUDY_WIDE:
        values = {variant: protocol[key] for variant, protocol in protocols.items()}
        if len(set(values.values())) > 1:
            listed = ", ".join(f"{variant}: {value}" for variant, value in values.items())
            raise ConfigError(
                f"{source}: {key} is one value for the whole study (set it under protocol:), got {listed}"
            )
