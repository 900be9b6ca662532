"""Plugins found through packaging entry points, cotdyn's own included (issue 50).

A package declares its plugins in its metadata, under one group per kind (``cotdyn.backends``,
``cotdyn.benchmarks``, ``cotdyn.signals``), as inspect_ai finds model providers::

    [project.entry-points."cotdyn.backends"]
    my_backend = "my_lab_backends.mine:build"

The entry point only says which module to import: importing it runs the plugin's own declaration
(``register_backend`` and the like), which stays the one place that describes it. This module loads
a group's entry points, records the distribution (name and version) each comes from, so that a
listing and a manifest can name it, and turns a plugin that fails to import into a ``PluginError``
naming the plugin, its package and the cause, instead of an ImportError from deep inside it. A
plugin's declared dependency is checked by ``check_dependency`` (inspect_ai's
``pip_dependency_error``): a ``MissingDependency`` names the package, the range and the fix.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Callable


class PluginError(ImportError):
    """A plugin that cannot be used: it does not import, or its declaration is wrong."""


class MissingDependency(PluginError):
    """A plugin's declared dependency is not installed, or not at a version in its range."""


@dataclass(frozen=True)
class Plugin:
    """One entry point of a group, with the distribution that declares it."""

    group: str
    name: str
    value: str  # "module" or "module:attribute"
    distribution: str | None  # the package's name in its metadata; None if the entry point has none
    version: str | None

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].strip()

    @property
    def package(self) -> str:
        """``name version``, as a listing shows where a plugin comes from."""
        return f"{self.distribution} {self.version}" if self.distribution else "(no distribution)"


def _plugin(group: str, point: metadata.EntryPoint) -> Plugin:
    dist = getattr(point, "dist", None)
    name = dist.metadata["Name"] if dist is not None else None
    return Plugin(group, point.name, point.value, name, dist.version if dist is not None else None)


def entry_points(group: str) -> tuple[list[Plugin], dict[str, PluginError]]:
    """The group's entry points by name, and the names two packages declare differently. The same
    declaration met twice (one distribution seen on two sys.path entries, as an editable install can
    be) counts once; a name declared differently is refused, naming both packages, since either
    could silently win; the refusal is raised where that name is used, not at import, so the group's
    other plugins stay usable."""
    found: dict[str, Plugin] = {}
    clashes: dict[str, PluginError] = {}
    for point in metadata.entry_points(group=group):
        plugin = _plugin(group, point)
        earlier = found.get(plugin.name)
        if earlier is None:
            found[plugin.name] = plugin
        elif earlier.value != plugin.value:
            clashes[plugin.name] = PluginError(
                f"{group}: '{plugin.name}' is declared by {earlier.package} ({earlier.value}) and by "
                f"{plugin.package} ({plugin.value}); uninstall one of them"
            )
    return [found[name] for name in sorted(found) if name not in clashes], clashes


def load(plugin: Plugin) -> object:
    """Import the plugin's module (running its declaration) and return what its entry point names.
    Any failure becomes one ``PluginError`` naming the plugin, its package and the cause."""
    try:
        return metadata.EntryPoint(plugin.name, plugin.value, plugin.group).load()
    except PluginError:
        raise
    except Exception as error:  # an import error, or any error the plugin's module raises as it loads
        raise PluginError(
            f"{plugin.group} plugin '{plugin.name}' from {plugin.package} failed to load "
            f"({plugin.value}): {type(error).__name__}: {error}"
        ) from error


def discover(group: str, found: Callable[[Plugin, object], None], origins: dict, broken: dict) -> None:
    """Load every plugin of ``group`` not yet in ``origins`` or ``broken``, cotdyn's own first (so its
    declaration order leads a registry). ``found(plugin, loaded)`` registers what the entry point
    names, raising PluginError where it cannot. Each plugin is then recorded in ``origins`` (its
    package), or in ``broken`` with its error: one broken plugin does not hide the others, and its
    error is raised where it is used."""
    declared, clashes = entry_points(group)
    broken.update({name: error for name, error in clashes.items() if name not in origins})
    for plugin in sorted(declared, key=lambda p: p.distribution != "cotdyn"):
        if plugin.name in origins or plugin.name in broken:
            continue
        try:
            found(plugin, load(plugin))
        except PluginError as error:
            broken[plugin.name] = error
        else:
            origins[plugin.name] = plugin


def package_of(origins: dict, name: str) -> str:
    """The distribution (name and version) a registry's entry came from, as ``cotdyn ls`` lists it."""
    origin = origins.get(name)
    return origin.package if origin else "(registered in-process, no entry point)"


@dataclass(frozen=True)
class Dependency:
    """A package a plugin needs: its distribution name, the versions it works with (a PEP 440
    range, "" for any) and the module whose import shows it is there."""

    package: str
    versions: str = ""
    module: str = ""

    @property
    def requirement(self) -> str:
        return f"{self.package}{self.versions}"


def installed_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def importable(module: str) -> bool:
    """Whether ``module`` imports, without importing it: one already imported counts, a stand-in put
    in sys.modules (a test's, whose ``__spec__`` is None) included."""
    if module in sys.modules:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or is not a package
        return False


def dependency_problem(dependency: Dependency) -> str | None:
    """What is wrong with the dependency here (None when it is fine): its distribution installed at a
    version in range, and its module importable. A module already imported without a distribution
    (a test's stand-in) has no version to check, and is taken as it is."""
    from packaging.specifiers import SpecifierSet

    version = installed_version(dependency.package)
    if version is None:
        return None if dependency.module in sys.modules else "not installed"
    if dependency.versions and not SpecifierSet(dependency.versions).contains(version, prereleases=True):
        return f"version {version} is installed"
    if dependency.module and not importable(dependency.module):
        return f"its module '{dependency.module}' is not importable"
    return None


def check_dependency(dependency: Dependency, who: str) -> None:
    """Raise ``MissingDependency`` naming ``who`` (e.g. "backend vllm"), the requirement and the fix."""
    problem = dependency_problem(dependency)
    if problem:
        raise MissingDependency(
            f"{who} needs {dependency.requirement} ({problem}): pip install '{dependency.requirement}', "
            "or run it in the environment its declaration names"
        )
