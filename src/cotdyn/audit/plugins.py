"""The plugins a study ran, installed where it is audited (issue 65).

The study manifest pins each plugin whose code the analysis runs (``plugins``:
``cotdyn.provenance.manifests.study_plugins``), with its package and version. The audit re-derives
with that code, so each must be installed here at the version the study ran: otherwise the audit
refuses the study before it reads its config (whose benchmark kinds a missing package's
would leave unknown), naming the plugin, its package, its version and the fix, instead of a
re-derivation that fails without naming the package or differs from the study in its rows.
"""

from __future__ import annotations

from cotdyn.files.terminal import printable
from cotdyn.plugins import installed_version


def pinned_plugin_problems(manifest: dict) -> list[str]:
    """Each pinned plugin not installed here at its pinned version."""
    pinned = manifest.get("plugins", {})
    if not isinstance(pinned, dict):
        return [f"manifest plugins: expected an object, got a {type(pinned).__name__}"]
    problems = []
    for kind, plugins in sorted(pinned.items()):
        for name, where in sorted(plugins.items()) if isinstance(plugins, dict) else [(None, None)]:
            package, version = (where.get("package"), where.get("version")) if isinstance(where, dict) else (None, None)
            if not isinstance(package, str) or not isinstance(version, str):
                problems.append(f"manifest plugins.{printable(kind)}: expected each a package and a version")
                continue
            found = installed_version(package)
            if found != version:
                state = "not installed" if found is None else f"{found} is installed"
                problems.append(
                    f"{printable(kind)} plugin '{printable(name)}' comes from {printable(package)} "
                    f"{printable(version)} (the study manifest's plugins), {state} here: "
                    f"pip install '{printable(package)}=={printable(version)}' and audit again"
                )
    return problems
