"""The study a run's config describes, read once as the workflow is read (workflow/rules/common.smk).

``read_study`` types the config (each config file read again strictly, the ``--config`` values read
as YAML, the schema with the backend registry filled in), loads the plan and resolves its cells,
variants and protocols. Every error is a ``StudyError`` of one line naming the config or the plan,
which the glue raises as Snakemake's WorkflowError (no traceback).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cotdyn import plugins
from cotdyn.files.strict import UntrustedFileError, read_yaml
from cotdyn.generation.backends import registry as backend_registry
from cotdyn.generation.backends.validation import plugin_problems, validate_config
from cotdyn.plan.config import (
    Cell,
    ConfigError,
    check_study_wide,
    command_line_overrides,
    cut_answers,
    override_source,
    protocol_for,
    reference_id,
    resolve_cells,
    samples_variant,
    with_bundled_paths,
)
from cotdyn.plan.load import load_plan, plan_sha256
from cotdyn.plan.registration import sibling_paths
from cotdyn.plan.schema import validate_plan
from cotdyn.protocol.signals import study_signals


class StudyError(ValueError):
    """A config or plan error, as one line naming the file or the ``--config`` entry."""


@dataclass(frozen=True)
class Study:
    """What the rules read of a study: its config (Snakemake's own dict, typed), plan and cells."""

    config: dict
    source: str  # the config files, as errors name them
    plan_path: str
    plan: dict
    plan_sha256: str
    cells: dict[str, Cell]
    variants: list[str]
    protocols: dict[str, dict]
    cut_answers: dict[str, str]

    @property
    def dir(self) -> str:
        return f"results/{self.config['study']}"

    @property
    def cache(self) -> str:
        return self.config["cache"]

    @property
    def cell_names(self) -> list[str]:
        return list(self.cells)

    @property
    def benchmarks(self) -> list[str]:
        return sorted({c.benchmark_key for c in self.cells.values()})

    @property
    def references(self) -> dict[str, dict]:
        """The reference settings' ids and their protocols: variants that share them share chains."""
        return {reference_id(p): p for p in self.protocols.values()}

    @property
    def generating(self) -> list[str]:
        """The variants that draw samples of their own (not ``subsample_of`` another)."""
        return [v for v in self.variants if samples_variant(self.config, v) == v]

    @property
    def infogain_traces(self) -> dict | None:
        """Seed 000 on the study's own traces (workflow/rules/infogain.smk), when the config asks."""
        return self.config.get("infogain", {}).get("traces")

    @property
    def infogain_variant(self) -> str:
        return (self.infogain_traces or {}).get("variant", "registered")


def config_source(configfiles) -> str:
    """The config files as errors name them ("config" for a config given otherwise)."""
    return ", ".join(str(f) for f in configfiles) or "config"


def check_config_files(configfiles) -> None:
    """Snakemake reads each config file itself, and a key written twice there wins by position; each
    is read again strictly (cotdyn.files.strict: no key twice, no alias bomb, bounded), at every run
    and dry run, so such a file stops the run by name (issue 48)."""
    for path in configfiles:
        try:
            read_yaml(path)
        except UntrustedFileError as e:
            raise StudyError(f"config: {e}") from None


def typed_config(config: dict, config_settings, root: Path, schema: str, source: str) -> None:
    """``config`` (Snakemake's dict, changed in place: the rules read it) with the ``--config`` values
    read as YAML, the bundled plan and data of a relative path the working directory lacks, and the
    schema's defaults, validated by the schema with the backend registry filled in.

    Snakemake reads a nested ``--config`` value (``protocol={m: 3}``) into strings only ('3'); each is
    read again, strictly, and laid over the config where Snakemake laid its strings
    (cotdyn.plan.config.command_line_overrides). A schema error in a field an override set names the
    override, not the config file."""
    from snakemake.utils import update_config

    try:
        overrides = command_line_overrides(
            getattr(config_settings, "config_args", None), dict(getattr(config_settings, "config", {}))
        )
        update_config(config, {key: value for key, (_, value) in overrides.items()})
        config.update(with_bundled_paths(dict(config), root))
        where = f"invalid config ({source})"
        validate_config(config, where, schema, lambda path: override_source(overrides, path, where))
    except ConfigError as e:
        raise StudyError(str(e)) from None


def read_plan(plan_path: str, source: str) -> tuple[dict, str]:
    """The plan and its sha256; its protocol typed and in range (an ``m: five`` never reaches a job),
    and its REGISTERED and deviations.yaml read strictly, at every run, whether check_plan reruns."""
    try:
        plan = load_plan(plan_path)
    except (ValueError, FileNotFoundError) as e:
        raise StudyError(f"plan of {source}: {e}") from None
    try:
        validate_plan(plan, f"plan {plan_path}")
    except ConfigError as e:
        raise StudyError(str(e)) from None
    sha256 = plan_sha256(plan_path)
    for sibling in sibling_paths(plan_path):
        if os.path.lexists(sibling):
            try:
                read_yaml(sibling)
            except UntrustedFileError as e:
                raise StudyError(f"plan of {source}: {e}") from None
    return plan, sha256


def read_study(config: dict, configfiles, config_settings, root: Path, schema: str) -> Study:
    """The study of the run's ``config`` (typed in place, ``typed_config``): ``configfiles`` and
    ``config_settings`` are Snakemake's (``workflow.configfiles``, ``workflow.config_settings``),
    ``root`` the folder of the bundled plans and data (``cotdyn.plan.config.BUNDLED``), ``schema``
    the config schema's path."""
    source = config_source(configfiles)
    check_config_files(configfiles)
    refused = plugin_problems(config)  # named before the schema, which knows no refused name
    if refused:
        raise StudyError(f"{source}: " + "; ".join(refused))
    typed_config(config, config_settings, root, schema, source)
    plan, sha256 = read_plan(config["plan"], source)
    try:
        cells = resolve_cells(config, plan, source)
        variants = list(config["variants"])
        protocols = {v: protocol_for(config, plan, v, source) for v in variants}
        dtype = protocols[variants[0]]["dtype"]
        for cell in cells.values():
            backend_registry.check_entry(cell.model, f"{source}: model '{cell.model_key}'", dtype)
        cut = {v: cut_answers(config, v, source) for v in variants}
        check_study_wide(protocols, source)
        study_signals(config.get("signals", ()))
    except (ConfigError, ValueError, plugins.PluginError) as e:
        raise StudyError(str(e)) from None
    return Study(config, source, config["plan"], plan, sha256, cells, variants, protocols, cut)


def check_infogain_traces(study: Study) -> None:
    """Seed 000 on the study's own traces needs a variant of the study cut into steps."""
    if not study.infogain_traces:
        return
    variant = study.infogain_variant
    if variant not in study.variants:
        raise StudyError(f"infogain.traces.variant '{variant}' is not a variant of {study.source}")
    if study.protocols[variant]["checkpoints"] != "steps":
        raise StudyError(f"infogain.traces.variant '{variant}' must use step checkpoints ({study.source})")
