"""grading: answer extraction, normalization and equivalence, and the benchmark registry.

Importing the package finds the declared benchmarks (``registry.discover``: the entry points of group
``cotdyn.benchmarks``, cotdyn's own included) before any module of it reads the registry.
"""

from cotdyn.grading import registry

registry.discover()
