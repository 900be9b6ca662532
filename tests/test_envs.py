"""Each rule's conda environment holds what its script imports, and pins what requirements.lock pins.

For every rule of workflow/rules/*.smk with a ``script:``, the test collects the modules of
src/cotdyn the script reaches (its imports, followed transitively, function-level ones included: a
static over-approximation) and every third-party import of those modules (again function-level
ones included; an import inside ``try: ... except ImportError`` is optional and not counted). Each
third-party distribution must be listed in the rule's envs/*.yaml. NEVER_RUN names the few modules
(or a module's lazy import) that the closure reaches but that never run in an environment, each
with its reason; an entry no longer needed fails too, so the list stays true.

Backends are read from their declarations (cotdyn.generation.backends.registry, issue 50): a
backend's own modules (what its build function imports) are counted only in the environments its
declaration runs it in (``runs_in``), and each package it declares (``requires``) is pinned there,
within its declared range, and at requirements.lock's version.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cotdyn.generation.backends import registry

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
RULES = ROOT / "workflow" / "rules"
ENVS = ROOT / "envs"
LOCK = ROOT / "requirements.lock"

_SEAL = "the generation rules' seals read only file_sha256 of cotdyn.provenance.manifests; its config validation runs in the manifest rules"
_HUB = "cotdyn.dataset.benchmarks.read_hub runs only in rule problems (analysis.yaml)"
# env file -> {module, or "module:distribution" for one lazy import of a module: why it never runs there}
NEVER_RUN = {
    "analysis.yaml": {},
    "generate-cpu.yaml": {
        "cotdyn.provenance.manifests:snakemake": _SEAL,
        "cotdyn.dataset.benchmarks:datasets": _HUB,
    },
    "generate-cuda.yaml": {
        "cotdyn.provenance.manifests:snakemake": _SEAL,
        "cotdyn.dataset.benchmarks:datasets": _HUB,
    },
    "generate-vllm.yaml": {
        "cotdyn.provenance.manifests:snakemake": _SEAL,
        "cotdyn.dataset.benchmarks:datasets": _HUB,
        "cotdyn.files.writers:matplotlib": "generation rules write parquet and JSON, no figures",
    },
}
# Pins of an environment that are not the lock's (the lock is the CPU test environment).
NOT_IN_LOCK = {
    "generate-vllm.yaml": {"vllm", "torchvision", "torchaudio"},
}
OTHER_THAN_LOCK = {("generate-vllm.yaml", "transformers"): "vllm 0.32.0 requires transformers >=5.16.1,<5.20"}
# Import names whose distribution is not installed here (so importlib.metadata cannot map them).
NOT_INSTALLED = {"vllm": "vllm"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------------------------------------
# Rules: script and environment(s).


def _smk_texts() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(RULES.glob("*.smk"))}


def _env_function(name: str) -> list[str]:
    """The environments a ``conda: <function>`` may return: every envs/*.yaml named in its body or
    in the body of a workflow function it calls. A generation job's are those the backends'
    declarations name (``runs_in``, which the workflow reads through the registry)."""
    if name == "generation_env":
        return declared_environments()
    texts = "\n".join(_smk_texts().values()) + "\n#"
    found = re.search(rf"^def {name}\(.*?(?=^\S)", texts, re.S | re.M)
    assert found, f"conda: {name} names no function defined in workflow/rules/*.smk"
    body = found.group(0)
    envs = set(re.findall(r"envs/([\w.-]+\.yaml)", body))
    for called in set(re.findall(r"\b(\w+)\(", body.split(":", 1)[1])) - {name}:
        if re.search(rf"^def {called}\(", texts, re.M):
            envs |= set(_env_function(called))
    return sorted(envs)


def rules() -> list[tuple[str, str, str]]:
    """(rule, script path relative to the repository, env file name) for every rule with a script."""
    found = []
    for file, text in _smk_texts().items():
        for block in re.split(r"^(?=rule \w+:)", text, flags=re.M)[1:]:
            rule = re.match(r"rule (\w+):", block).group(1)
            script = re.search(r"^\s+script:\s*\n\s+\"([^\"]+)\"", block, re.M)
            if not script:
                continue
            conda = re.search(r"^\s+conda:\s*\n\s+(\S+)", block, re.M)
            assert conda, f"rule {rule} ({file}) runs {script.group(1)} but names no conda environment"
            value = conda.group(1)  # a path, a function (called per job) or a call made as the rule is read
            envs = [Path(value.strip("\"'")).name] if value[0] in "\"'" else _env_function(value.removesuffix("()"))
            script_path = (RULES / script.group(1)).resolve().relative_to(ROOT)
            found += [(rule, str(script_path), env) for env in envs]
    return found


# ---------------------------------------------------------------------------------------------
# Imports, followed through src/cotdyn.


def _module_file(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _is_optional(node: ast.Try) -> bool:
    names = set()
    for handler in node.handlers:
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        names |= {k.id for k in kinds if isinstance(k, ast.Name)}
    return bool(names & {"ImportError", "ModuleNotFoundError"})


def _imports(tree: ast.AST, package: str) -> list[tuple[str, list[str]]]:
    """(absolute module, names imported from it) for every import outside an optional try block."""
    found = []

    def visit(node):
        if isinstance(node, ast.Try) and _is_optional(node):
            for child in node.handlers + node.orelse + node.finalbody:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(parts + ([node.module] if node.module else []))
            else:
                module = node.module
            if module != "__future__":
                found.append((module, [alias.name for alias in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


@cache
def _parsed(path: Path, package: str) -> list[tuple[str, list[str]]]:
    return _imports(ast.parse(path.read_text(), str(path)), package)


def closure(script: str, never_run: dict[str, str]) -> tuple[set[str], dict[str, str]]:
    """The cotdyn modules a script reaches, and each top-level third-party import -> the first
    cotdyn module (or the script) that imports it."""
    found: dict[str, str] = {}
    seen: set[str] = set()
    queue: list[tuple[str, Path, str]] = [("<script>", ROOT / script, "")]

    def reach(module: str):
        parts = module.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ first
            name = ".".join(parts[:i])
            path = _module_file(name)
            if path and name not in seen and name not in never_run:
                seen.add(name)
                queue.append((name, path, name if path.name == "__init__.py" else name.rpartition(".")[0]))

    while queue:
        name, path, package = queue.pop()
        for module, names in _parsed(path, package):
            top = module.split(".")[0]
            if top == "cotdyn":
                reach(module)
                for n in names:  # `from cotdyn.pkg import submodule`
                    if _module_file(f"{module}.{n}"):
                        reach(f"{module}.{n}")
            elif top not in sys.stdlib_module_names and f"{name}:{top}" not in never_run:
                found.setdefault(top, name)
    return seen, found


def third_party(script: str, never_run: dict[str, str]) -> dict[str, str]:
    return closure(script, never_run)[1]


# ---------------------------------------------------------------------------------------------
# Backends, as declared.


def own_backends() -> list[registry.BackendSpec]:
    """cotdyn's own backends (a test may have registered others in this process)."""
    return [registry.REGISTRY[name] for name, origin in registry.ORIGINS.items() if origin.distribution == "cotdyn"]


@cache
def backend_modules(name: str) -> frozenset[str]:
    """The cotdyn modules a backend's build function imports: the backend's own code."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(registry.REGISTRY[name].build)))
    return frozenset(m for m, _ in _imports(tree, "") if m.startswith("cotdyn."))


def declared_never_run(env: str) -> dict[str, str]:
    """The modules of backends whose declaration does not run them in ``env`` (and that no backend
    running there uses), with the reason."""
    runs_here = {d.name for d in own_backends() if env.removesuffix(".yaml") in d.environments}
    used_here = set().union(*(backend_modules(n) for n in runs_here))
    found = {}
    for declared in own_backends():
        if declared.name in runs_here:
            continue
        for module in sorted(backend_modules(declared.name) - used_here):
            found[module] = f"backend {declared.name} runs in {', '.join(declared.environments)} (its declaration)"
    return found


def declared_environments() -> list[str]:
    return sorted({f"{env}.yaml" for declared in own_backends() for env in declared.environments})


def never_run(env: str) -> dict[str, str]:
    return {**declared_never_run(env), **NEVER_RUN.get(env, {})}


@cache
def _distributions() -> dict[str, list[str]]:
    return metadata.packages_distributions()


def distribution(import_name: str) -> str:
    names = _distributions().get(import_name) or [NOT_INSTALLED.get(import_name, import_name)]
    return canonical(names[0])


# ---------------------------------------------------------------------------------------------
# Environments and the lock.


def env_pins(env: str) -> dict[str, str]:
    """Distribution -> pinned version of an envs/*.yaml (its pip section; `-e ..` is cotdyn)."""
    spec = yaml.safe_load((ENVS / env).read_text())
    pins = {}
    for dep in spec["dependencies"]:
        for line in dep.get("pip", []) if isinstance(dep, dict) else []:
            if line.startswith("-"):
                continue
            req = Requirement(line)
            (specifier,) = req.specifier  # every pip line pins one exact version
            assert specifier.operator == "==", f"{env}: {line} is not an exact pin"
            pins[canonical(req.name)] = specifier.version
    return pins


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not name==version"
            pins[canonical(name)] = version.strip()
    return pins


RULE_ENVS = rules()


def test_every_rule_with_a_script_is_checked():
    names = {rule for rule, _, _ in RULE_ENVS}
    assert {
        "hypotheses",
        "audit",
        "math_shepherd",
        "infogain_cell",
        "reference",
        "continuations",
        "prepare_model",
    } <= names, names
    assert {env for _, _, env in RULE_ENVS} == {p.name for p in ENVS.glob("*.yaml")}


def test_gpu_jobs_get_the_cuda_environments():
    assert _env_function("generation_env") == [
        "generate-cpu.yaml",
        "generate-cuda.yaml",
        "generate-vllm.yaml",
    ]
    assert registry.environment_for({"backend": "transformers", "device": "cuda:0"}) == "../../envs/generate-cuda.yaml"
    assert registry.environment_for({"backend": "vllm"}) == "../../envs/generate-vllm.yaml"
    assert _env_function("infogain_env") == ["generate-cpu.yaml", "generate-cuda.yaml"]
    cpu, cuda = env_pins("generate-cpu.yaml"), env_pins("generate-cuda.yaml")
    assert cpu == cuda  # the same packages at the same versions; only torch's build differs
    pip = next(
        d["pip"]
        for d in yaml.safe_load((ENVS / "generate-cuda.yaml").read_text())["dependencies"]
        if isinstance(d, dict)
    )
    assert not any("whl/cpu" in line or "requirements.lock" in line for line in pip)


def test_the_closure_follows_transitive_and_function_level_imports():
    model = third_party("workflow/scripts/prepare_model.py", {})  # via cotdyn.generation.backends.transformers
    assert {"torch", "transformers", "tqdm"} <= set(model), model
    problems = third_party("workflow/scripts/problems.py", {})  # read_hub's and answers' lazy imports
    assert {"datasets", "math_verify", "numpy"} <= set(problems), problems
    # provenance.cuda_device's `try: import torch / except ImportError` is optional: the manifest,
    # without the backends that never run in analysis.yaml, needs no torch.
    manifest = third_party("workflow/scripts/manifest.py", never_run("analysis.yaml"))
    assert "torch" not in manifest and "snakemake" in manifest, manifest


@pytest.mark.parametrize("rule,script,env", RULE_ENVS, ids=[f"{r}-{e}" for r, _, e in RULE_ENVS])
def test_a_rules_environment_lists_what_its_script_imports(rule, script, env):
    listed = set(env_pins(env))
    imports = third_party(script, never_run(env))
    missing = sorted(
        f"{distribution(top)} (import {top}, in {where})"
        for top, where in imports.items()
        if distribution(top) not in listed
    )
    assert not missing, f"rule {rule} ({script}) runs in envs/{env}, which lacks: {'; '.join(missing)}"


def test_every_never_run_entry_is_still_needed():
    stale = []
    for env, entries in NEVER_RUN.items():
        scripts = {script for _, script, e in RULE_ENVS if e == env}
        for entry in entries:
            without = {k: v for k, v in never_run(env).items() if k != entry}
            needed = any(set(third_party(s, without)) - set(third_party(s, never_run(env))) for s in scripts)
            if not needed:
                stale.append(f"{env}: {entry}")
    assert not stale, f"NEVER_RUN entries that change nothing (remove them): {stale}"


@pytest.mark.parametrize("env", sorted(p.name for p in ENVS.glob("*.yaml")))
def test_environment_pins_are_the_locks(env):
    """One version per package everywhere: an environment pins what requirements.lock pins (the
    public version: torch 2.13.0 is the lock's 2.13.0+cpu), unless declared above with its reason."""
    lock = lock_pins()
    wrong = []
    for name, version in env_pins(env).items():
        if name not in lock:
            if name not in NOT_IN_LOCK.get(env, set()):
                wrong.append(f"{name}=={version} is not in requirements.lock")
        elif Version(version).public != Version(lock[name]).public and (env, name) not in OTHER_THAN_LOCK:
            wrong.append(f"{name}=={version}, requirements.lock has {lock[name]}")
    assert not wrong, f"envs/{env}: {'; '.join(wrong)}"


def test_the_lock_pins_every_dependency_of_pyproject():
    """Every distribution pyproject.toml names (core and extras but vllm) is in the lock."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [
        r for extra, reqs in project["optional-dependencies"].items() if extra != "vllm" for r in reqs
    ]
    lock = lock_pins()
    missing = []
    for line in requirements:
        req = Requirement(line)
        name = canonical(req.name)
        if name == "cotdyn":
            continue
        if name not in lock:
            missing.append(f"{line} (not in the lock)")
        elif not req.specifier.contains(Version(lock[name]), prereleases=True):
            missing.append(f"{line} (the lock has {lock[name]})")
    assert not missing, f"requirements.lock does not satisfy pyproject.toml: {missing}; run scripts/lock.sh"


@pytest.mark.parametrize("declared", own_backends(), ids=lambda d: d.name)
def test_a_backends_environments_pin_the_packages_it_declares_in_their_range(declared):
    """What a backend declares it needs is in every environment its declaration runs it in, at a
    version in the declared range, and the range admits requirements.lock's version where the lock
    pins the package (the test environment, in which every backend's tests build it)."""
    lock = lock_pins()
    wrong = []
    for dependency in declared.requires:
        name = canonical(dependency.package)
        if name in lock and not SpecifierSet(dependency.versions).contains(lock[name], prereleases=True):
            wrong.append(f"{dependency.requirement}, but requirements.lock has {name}=={lock[name]}")
        for env in declared.environments:
            pinned = env_pins(f"{env}.yaml").get(name)
            if pinned is None or not SpecifierSet(dependency.versions).contains(pinned, prereleases=True):
                wrong.append(f"envs/{env}.yaml pins {name}=={pinned}, not in {dependency.requirement}")
    assert not wrong, f"backend {declared.name}: {'; '.join(wrong)}"


def test_a_backends_own_modules_count_only_where_its_declaration_runs_it():
    assert backend_modules("vllm") == {"cotdyn.generation.backends.vllm"}
    assert "cotdyn.generation.backends.vllm" in never_run("generate-cpu.yaml")  # openai_compat uses its helpers only
    assert "cotdyn.generation.backends.openai_compat" not in never_run("generate-cpu.yaml")
    assert set(never_run("analysis.yaml")) >= {"cotdyn.generation.backends.transformers"}
    # the closure follows the registry's discovery to cotdyn's own declarations and every backend's module
    seen, found = closure("workflow/scripts/reference.py", never_run("generate-vllm.yaml"))
    assert "cotdyn.generation.backends.builtin" in seen and "vllm" in found, sorted(found)
