# cotdyn's workflow lives in workflow/Snakefile (the workflow catalog's layout, and the file a deployed
# study's module names, docs/deployment.md); this file runs it at the repository's root. Included as
# the `include:` directive does, but keeping its `rule all` the default target (the directive resets it).
workflow.include("workflow/Snakefile", overwrite_default_target=True)
