"""The chain-level ranking signals, each declared once (seed 003 Appendix F.1; docs/reference.md section 6).

A signal is a column of records.parquet read as a score, oriented so that a higher score means
"more likely correct". Its declaration is the one place that says how it is derived, read, drawn
and named in captions, and whether a registered analysis reads it. The exploratory ranking, the
label coupling, the risk-coverage figure and the captions loop over ``SIGNALS``; the plan-fixed
secondary selective accuracy reads only the signals declared ``registered``, so declaring a new
signal never adds a row to a registered analysis (that takes a new plan version).

Signals are found through packaging entry points of group ``cotdyn.signals`` (``discover``, run as
``cotdyn.protocol`` is imported), cotdyn's own four (``cotdyn.protocol.builtin_signals``) as a lab's
plugin package's: an entry point names a declared ``Signal`` (or a module whose import registers one)
and ``ORIGINS`` records its package. To add a signal: declare it with a ``derive`` (computed per
chain from its summarized trajectory and per-prefix answers when the records are built) in a package
of one's own, name it under that group, and test it. A study computes cotdyn's own signals and the
plugin signals its config names (``signals``; ``study_signals``), never every installed one: a
study made before a package was installed is the same study after. A plugin's signal is
never ``registered``: which signals a registered analysis reads is fixed by the plan version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cotdyn import plugins
from cotdyn.protocol.trajectory import Trajectory

PrefixAnswers = Sequence[Sequence[str | None]]


@dataclass(frozen=True)
class Signal:
    name: str  # the records column, and the signal's name in tables
    higher_is_correct: bool  # False: the column is negated to read as a score
    label: str  # legend text in figures
    phrase: str  # how a caption names it
    color: str
    dash: str | tuple
    # Read by the plan-fixed secondary selective accuracy: plans v1 to v3 fix these four signals.
    registered: bool = False
    # None: a field of the trajectory summary, written by the records table itself.
    derive: Callable[[Trajectory, PrefixAnswers], Any] | None = None

    def score(self, records) -> Any:
        """The signal's score per row of a records frame (higher = predicted correct)."""
        values = records[self.name].to_numpy(dtype=float)
        return values if self.higher_is_correct else -values


SIGNALS: dict[str, Signal] = {}
GROUP = "cotdyn.signals"  # the entry-point group a package declares its signals under
OWN = "cotdyn"  # the one distribution whose signals may be registered
ORIGINS: dict[str, plugins.Plugin] = {}  # signal -> the entry point (and package) it was found through
BROKEN: dict[str, plugins.PluginError] = {}  # signal -> why its plugin could not be loaded


def register_signal(signal: Signal) -> Signal:
    """Add one declaration to ``SIGNALS``: a name no other signal has."""
    if signal.name in SIGNALS:
        raise ValueError(f"signal '{signal.name}' is declared already")
    SIGNALS[signal.name] = signal
    return signal


def _found(plugin: plugins.Plugin, declared: object) -> None:
    """Register what a signal entry point names (if its module did not), refusing a plugin's
    ``registered`` signal: a registered analysis reads the signals its plan version fixes."""
    where = f"{GROUP} plugin '{plugin.name}' from {plugin.package}"
    try:
        if plugin.name not in SIGNALS and isinstance(declared, Signal) and declared.name == plugin.name:
            register_signal(declared)
    except ValueError as error:
        raise plugins.PluginError(f"{where}: {error}") from None
    if plugin.name not in SIGNALS:
        raise plugins.PluginError(f"{where} declares no signal of that name ({plugin.value})")
    if SIGNALS[plugin.name].registered and plugin.distribution != OWN:
        del SIGNALS[plugin.name]
        raise plugins.PluginError(
            f"{where} is declared registered; only the plan version fixes the signals a registered "
            "analysis reads (declare it with registered=False)"
        )


def discover() -> None:
    """Load every signal plugin (group ``cotdyn.signals``) not yet loaded, recording its package;
    cotdyn's own first, so its four lead ``SIGNALS``. A plugin that fails is kept in ``BROKEN`` and
    refused where a study names it (``study_signals``)."""
    plugins.discover(GROUP, _found, ORIGINS, BROKEN)


def package_of(name: str) -> str:
    """The distribution (name and version) a signal comes from, as ``cotdyn ls`` lists it."""
    return plugins.package_of(ORIGINS, name)


def registered_signals() -> list[Signal]:
    """The signals a registered analysis reads (plans v1 to v3: the four of seed 003 Appendix F.2)."""
    return [s for s in SIGNALS.values() if s.registered]


def own_signals() -> list[Signal]:
    """cotdyn's own signals, which every study computes (a registered analysis reads them)."""
    return [s for name, s in SIGNALS.items() if name in ORIGINS and ORIGINS[name].distribution == OWN]


def study_signals(named: Sequence[str] = ()) -> list[Signal]:
    """The signals a study computes: cotdyn's own, then the plugin signals its config names
    (``signals``), in that order. A named signal that is not installed, or whose plugin is broken,
    is a ``PluginError`` naming it; an installed signal that is not named is no part of the study."""
    chosen = own_signals()
    for name in named:
        if name in BROKEN:
            raise BROKEN[name]
        if name not in SIGNALS:
            installed = ", ".join(n for n in SIGNALS if SIGNALS[n] not in chosen) or "none"
            raise plugins.PluginError(
                f"config signals: '{name}' is not installed (plugin signals installed: {installed}); install "
                f"the package that declares it under the entry-point group {GROUP}, or remove it from signals"
            )
        if SIGNALS[name] not in chosen:
            chosen.append(SIGNALS[name])
    return chosen


def in_records(columns) -> list[Signal]:
    """The signals a records frame carries (its columns: the study's signals), in ``SIGNALS``' order."""
    return [s for s in SIGNALS.values() if s.name in columns]


def derived_columns(t: Trajectory, prefix_answers: PrefixAnswers, study: Sequence[Signal]) -> dict[str, Any]:
    """The records columns of the study's signals that are not fields of the trajectory summary."""
    return {s.name: s.derive(t, prefix_answers) for s in study if s.derive is not None}


def caption_list(signals: Sequence[Signal] | None = None) -> str:
    """The signals as a caption names them: "a, b, c and d"."""
    phrases = [s.phrase for s in (SIGNALS.values() if signals is None else signals)]
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]
