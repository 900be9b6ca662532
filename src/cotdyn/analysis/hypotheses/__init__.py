"""The registered analysis: H1-H5, Holm and computed verdicts (seed 003 sections 3.4, 4; docs/reference.md section 5).

``analyze`` turns per-problem records into the ``hypotheses.json`` structure of docs/reference.md section 11;
``write_analysis`` writes it with the paper-shaped tables and the forest plot. Every criterion is
read from the plan and every verdict is computed here. Excluded problems are counted and enter no
statistic. A statistic that is undefined on a cell (an empty group, a constant label, a missing
cell) is reported as null together with a reason, never as a number.

Modules: ``inputs`` (records contract, plan settings, one cell's arrays), ``cells`` (H1, H2, H3,
H5 per cell), ``verdicts`` (H4, Holm, verdicts), ``outputs`` (tables, JSON, figure) and ``run``
(``analyze``, which ties them together).
"""

from cotdyn.analysis.hypotheses.cells import H3_BUCKETS, MISSING_CELL, violation_buckets
from cotdyn.analysis.hypotheses.inputs import RECORD_COLUMNS, Settings, panel_cells, read_records, registered_cells
from cotdyn.analysis.hypotheses.outputs import json_ready, table_rows, write_analysis
from cotdyn.analysis.hypotheses.run import analyze
from cotdyn.analysis.hypotheses.verdicts import ESTIMATION_VERDICTS, VERDICTS, cell_verdict, combine_verdicts

__all__ = [
    "ESTIMATION_VERDICTS", "H3_BUCKETS", "MISSING_CELL", "RECORD_COLUMNS", "Settings", "VERDICTS", "analyze",
    "cell_verdict",
    "combine_verdicts", "json_ready", "panel_cells", "read_records", "registered_cells", "table_rows",
    "violation_buckets", "write_analysis",
]  # fmt: skip
