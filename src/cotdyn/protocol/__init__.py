"""protocol: the registered protocol's definitions, and the ranking signals.

Importing the package finds the declared signals (``signals.discover``: the entry points of group
``cotdyn.signals``, cotdyn's own included) before any module of it reads them.
"""

from cotdyn.protocol import signals

signals.discover()
