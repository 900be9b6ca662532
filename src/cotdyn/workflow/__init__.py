"""The workflow's logic, called by the glue in ``workflow/rules/common.smk``.

A Snakefile is not linted or unit-tested as a module is, so what the rules need beyond Snakemake's
own directives lives here: the study a config describes (``study``: config typing, plan loading,
cells and variants), the checks a run makes before it plans (``checks``), the paths and targets
(``paths``), the rules' params (``params``: code hashes, model entries), the seal check on raw files
(``seals``), the cluster requests (``requests``), the conda environments (``environments``) and what
a run prints before its first job (``start``). Each takes Snakemake's ``workflow`` object, where it
reads one, as a plain argument, so a test hands it a stand-in. No workflow script imports this
package: a rule's code hash follows its script and what the script imports, not this glue.
"""
