"""cotdyn's own ranking signals, declared: seed 003 Appendix F.1's four, which plans v1 to v4 register.

cotdyn's package metadata names each as an entry point of group ``cotdyn.signals`` (pyproject.toml), as
a lab's plugin package names its own: ``cotdyn.protocol.signals.discover`` finds these the way it finds
theirs. Importing this module declares the four, in this order (the order of ``SIGNALS``). Each is a
field of the trajectory summary, so none has a ``derive``.
"""

from __future__ import annotations

from cotdyn.protocol.signals import Signal, register_signal

# Distinct dashes as well as colours: curves that coincide (a small cell) stay distinguishable.
MONOTONE = Signal("monotone", True, "monotone flag", "the monotone flag", "#4477aa", "-", registered=True)
VIOLATIONS = Signal("violations", False, "-violations", "-violations", "#228833", (0, (6, 3)), registered=True)
FINAL_ENTROPY = Signal(
    "final_entropy", False, "-final entropy", "-final entropy", "#ee6677", (0, (1, 2)), registered=True
)
COHERENCE = Signal("coherence", True, "coherence C", "coherence C", "#aa3377", (0, (6, 2, 1, 2)), registered=True)

for _declared in (MONOTONE, VIOLATIONS, FINAL_ENTROPY, COHERENCE):
    register_signal(_declared)
