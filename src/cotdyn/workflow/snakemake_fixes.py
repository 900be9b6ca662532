"""Where the installed Snakemake reports what is not so, and the workflow's correction of it.

Each correction is applied as the workflow is read (workflow/rules/common.smk), and only while the
fault it corrects is still there, so an upgrade that fixes Snakemake leaves Snakemake's own code in
place. tests/test_workflow_logic.py checks each fault's detection and correction; tests/test_reruns.py
checks what a user then sees.
"""

from __future__ import annotations


def params_union_keeps_unchanged_files() -> bool:
    """Whether Snakemake's union of two params comparisons names a file whose params did not change:
    ``ParamsChange.__or__`` (Snakemake 9.27.1) returns its right side whenever the left is empty, even
    when the right is empty too (no param changed) and only names the file it compared. Each job's
    comparison then ends with its last output named, and ``snakemake --list-changes params`` lists
    one output of every job of a finished study, although a dry run (whose params trigger reads the
    comparison's truth value, not its files) plans nothing."""
    from snakemake.persistence import ParamsChange

    return bool(list(ParamsChange() | ParamsChange(files={"unchanged"})))


def list_only_changed_params() -> bool:
    """Correct the union above so that it names a file only when that file's params changed; True
    when the correction was applied (the fault is there)."""
    from snakemake.persistence import ParamsChange

    if not params_union_keeps_unchanged_files():
        return False

    def union(self, other):
        changed = [c for c in (self, other) if c]  # a comparison that found no change adds nothing
        if len(changed) < 2:
            return changed[0] if changed else ParamsChange()
        return ParamsChange(
            only_old=self.only_old | other.only_old,
            only_new=self.only_new | other.only_new,
            files=self.files | other.files,
        )

    ParamsChange.__or__ = union
    return True


def git_sources_refuse_source_files() -> bool:
    """Whether a git source's ``join`` refuses a SourceFile: Snakemake 9.27.1's code trigger joins a
    rule's script (a ``LocalSourceFile``) to the rule's folder, and ``LocalGitFile.join`` and
    ``HostingProviderFile.join`` take a string only (the base class takes both), so a workflow read
    from a git tag (docs/deployment.md) stops with a TypeError as its DAG is built."""
    from snakemake.sourcecache import LocalGitFile, LocalSourceFile

    try:
        LocalGitFile(".", "workflow/rules", tag="v").join(LocalSourceFile("../scripts/a.py"))
    except TypeError:
        return True
    return False


def join_source_files_in_git_sources() -> bool:
    """Let the git sources' ``join`` take a SourceFile as the base class's does; True when the
    correction was applied (the fault is there)."""
    from snakemake.sourcecache import HostingProviderFile, LocalGitFile, SourceFile

    if not git_sources_refuse_source_files():
        return False
    for cls in (LocalGitFile, HostingProviderFile):
        join = cls.join

        def taking_source_files(self, path, join=join):
            return join(self, path.get_path_or_uri(secret_free=False) if isinstance(path, SourceFile) else path)

        cls.join = taking_source_files
    return True
