"""Answer-distribution trajectories and their dynamical profiles (seed 002).

Seed 002 (Gonzalez i Catala et al., "Answer-Distribution Trajectories") tracks, at each checkpoint
k = 0..K of one reasoning trace, the empirical distribution p_k over parsed final answers of N
sampled continuations (Appendix A.4), and summarises the path (p_0, ..., p_K) by a dynamical
profile (section 4.1): exploration S_eff, revision N_switch / N_return, motion V / PR / R_direct,
commitment t_commit(tau). Orienting the path to the gold answer gives four success and four failure
mechanisms (section 4.2). Appendix B fixes the tables and figures built on top: the variance
decomposition (Table 1), objective-conditioned profiles (Table 2), mechanism shares by model
(Figure 2) and the entropy-profile-matched disagreement curve (Figure 3).

Choices the seed leaves open, taken once here and used everywhere below:

- A "state" is a dict answer -> probability. Unparseable answers are the explicit class ``NULL``
  (Appendix A.1: "mapped to a special null answer category"); with ``null_class=False`` they are
  dropped instead and a checkpoint whose samples are all null becomes the empty state ``{}``.
- Metrics use only checkpoints with a nonempty state (Appendix B, "common trace processing"); K is
  the number of steps between consecutive observed checkpoints, so K = (observed checkpoints) - 1.
- Dominant sets D_k = argmax_a p_k(a) are sets: answers within ``TIE_TOL`` of the maximum are
  co-dominant (ties count as dominant, section 4.2). The null class is an answer like any other: it
  can be dominant, switch, return and commit.
- "Per step" (Table 1: N_switch/step, N_return/step, V/step) divides by K.
- Undefined values are float NaN (never None): PR and R_direct when V = 0 (or K = 0); t_commit when
  no answer holds p >= tau through the last checkpoint, or when K = 0; every "per step" value when
  K = 0. Summaries omit NaN (Appendix B).
- Gold dominance counts an answer class as gold when ``answers.equivalent`` says so under the
  variant's equivalence, as correctness does (``traces`` with the cell's benchmark); without a
  benchmark it compares strings.
- Commitment time is in the seed's token units: t_commit = (tokens at k_commit - tokens at the first
  observed checkpoint) / (tokens at the last - tokens at the first), the time axis of Figure 3;
  ``t_commit_index`` = k_commit / K is the checkpoint-index version.
- "Realized endpoint correctness" (section 4.2, Figure 2) is the trace's own final answer's
  correctness: records column ``chain_correct`` by default. With the registered ``correct`` (the
  majority answer of the last prefix) a fragile success or stochastic miss could only arise through a
  tie or a dominant null class, so that column is available via ``outcome=`` but is not the default.

The package follows that path: ``states`` (samples -> answer-distribution states), ``metrics`` (section 4.1),
``mechanisms`` (section 4.2), ``profiles`` (traces and the profile table), ``tables`` (Tables 1-2,
Figure 2), ``disagreement`` (Figure 3). Every public name is importable from here.
"""

from cotdyn.methods.dynamics.disagreement import (
    GRID,
    NormalizedProfile,
    disagreement_curve,
    disagreement_pairs,
    normalized_profile,
)
from cotdyn.methods.dynamics.mechanisms import FAILURE_MECHANISMS, SUCCESS_MECHANISMS, gold_dominance, mechanism
from cotdyn.methods.dynamics.metrics import (
    dominant_set,
    entropy,
    step_lengths,
    total_variation,
    trajectory_metrics,
)
from cotdyn.methods.dynamics.profiles import (
    PROFILE_COLUMNS,
    RECORD_COLUMNS,
    Trace,
    profile_table,
    profiles_from_traces,
    trace_mechanism,
    traces,
)
from cotdyn.methods.dynamics.states import (
    NULL,
    SAMPLE_COLUMNS,
    SUM_TOL,
    TIE_TOL,
    State,
    checkpoint_positions,
    distributions,
    endpoint_null_shares,
    observed_states,
)
from cotdyn.methods.dynamics.tables import (
    PROFILE_METRICS,
    condition_means,
    mechanism_shares,
    objective_profiles,
    variance_decomposition,
)

__all__ = [
    "FAILURE_MECHANISMS",
    "GRID",
    "NULL",
    "NormalizedProfile",
    "PROFILE_COLUMNS",
    "PROFILE_METRICS",
    "RECORD_COLUMNS",
    "SAMPLE_COLUMNS",
    "SUCCESS_MECHANISMS",
    "SUM_TOL",
    "State",
    "TIE_TOL",
    "Trace",
    "checkpoint_positions",
    "endpoint_null_shares",
    "condition_means",
    "disagreement_curve",
    "disagreement_pairs",
    "distributions",
    "dominant_set",
    "entropy",
    "gold_dominance",
    "mechanism",
    "mechanism_shares",
    "normalized_profile",
    "objective_profiles",
    "observed_states",
    "profile_table",
    "profiles_from_traces",
    "step_lengths",
    "total_variation",
    "trace_mechanism",
    "traces",
    "trajectory_metrics",
    "variance_decomposition",
]
