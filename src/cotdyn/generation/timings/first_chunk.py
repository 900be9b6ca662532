"""A first timing where the ledger has none: the phase's first chunk of real work, timed as it is
generated and cached like every other chunk, forecasts the rest of the phase at its rate."""

from __future__ import annotations

from cotdyn.generation.timings.estimates import duration


def first_chunk_text(seconds: float, rows: int, pending_rows: int) -> tuple[float, str]:
    """The rest of a phase at its first chunk's rate: that chunk drew ``rows`` of the phase's
    ``pending_rows`` rows (samples not in the cache) in ``seconds``. An estimate, not a bound: chunks
    follow the request order, so later ones may hold longer prompts (later prefixes) or rows that stop
    sooner."""
    rest = max(pending_rows - rows, 0)
    remaining = seconds / rows * rest if rows else float("nan")
    return remaining, (
        f"no timing of this model on this machine yet; its first {rows:,} of {pending_rows:,} pending rows "
        f"took {duration(seconds).removeprefix('about ')}, so {duration(remaining)} for the other {rest:,} "
        "at that rate"
    )
