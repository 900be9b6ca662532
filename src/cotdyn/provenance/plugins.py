"""The plugins a study's analysis runs, pinned in its manifests (issue 65).

Its own module, apart from ``cotdyn.provenance.manifests``: it reads the benchmark and signal
registries, and a job whose modules read a registry runs, and hashes, that group's plugins
(``cotdyn.provenance.code``); the generation jobs, which import the manifests' file hashing, do not.
"""

from __future__ import annotations

from cotdyn.provenance.manifests import PACKAGES


def study_plugins(config: dict) -> dict[str, dict[str, dict[str, str | None]]]:
    """The plugins, other than cotdyn's own, whose code the study's analysis runs: the benchmarks its
    config's entries name (their extraction and normalization) and the signals its ``signals`` names
    (their derivation), each with the package and version it came from. An installed plugin the
    config does not name is not here: it is no part of the study."""
    from cotdyn.grading import registry
    from cotdyn.protocol import signals

    named = {
        "benchmarks": (registry.ORIGINS, [entry.get("kind") for entry in config.get("benchmarks", {}).values()]),
        "signals": (signals.ORIGINS, list(config.get("signals", ()))),
    }
    pinned = {}
    for kind, (origins, names) in named.items():
        found = {name: origins[name] for name in names if name in origins}
        pinned[kind] = {
            name: {"package": plugin.distribution, "version": plugin.version}
            for name, plugin in sorted(found.items())
            if plugin.distribution and plugin.distribution not in PACKAGES
        }
    return pinned


def plugin_packages(config: dict) -> tuple[str, ...]:
    """The distributions of ``study_plugins``, whose versions a cell manifest records beside cotdyn's."""
    found = {p["package"] for kind in study_plugins(config).values() for p in kind.values() if p["package"]}
    return tuple(sorted(found))
