"""The tests' records frames come from the package's one factory (``cotdyn.records.factory``, which the
calibration simulator uses too), bound here to the registered plan's epsilon: ``records_frame`` holds
every contract column and every declared signal's column, derived where the signal has a ``derive``.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from cotdyn.plan.load import load_plan
from cotdyn.records import factory

# The registered epsilon, read from the plan (a registered value lives there only).
EPSILON = float(load_plan(Path(__file__).resolve().parents[1] / "preregistration" / "plan.yaml")["protocol"]["epsilon"])

# Every records frame a test builds (cotdyn.records.factory.records_frame's arguments).
records_frame = partial(factory.records_frame, epsilon=EPSILON)


def without_assumed_effects(text: str) -> str:
    """A plan's text without its assumed_effects section (plan v5 on), for tests of other parts:
    `cotdyn register` would simulate the section's power table (minutes at the panel's scale), and
    refuse a plan below its min_power without --underpowered. tests/test_power.py registers tables."""
    return re.sub(r"^assumed_effects:\n(?:  .*\n)*", "", text, flags=re.M)
