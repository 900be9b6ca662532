"""The answer types a benchmark is graded by (docs/design.md section 4)."""

ANSWER_TYPES = ("number", "boxed", "choice", "string")
