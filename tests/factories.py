"""The tests' records frames come from the package's one factory (``cotdyn.records.factory``, which the
calibration simulator uses too), bound here to the registered plan's epsilon: ``records_frame`` holds
every contract column and every declared signal's column, derived where the signal has a ``derive``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from cotdyn.plan.load import load_plan
from cotdyn.records import factory

# The registered epsilon, read from the plan (a registered value lives there only).
EPSILON = float(load_plan(Path(__file__).resolve().parents[1] / "preregistration" / "plan.yaml")["protocol"]["epsilon"])

# Every records frame a test builds (cotdyn.records.factory.records_frame's arguments).
records_frame = partial(factory.records_frame, epsilon=EPSILON)
