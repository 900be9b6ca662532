"""The answer types a benchmark is graded by (docs/reference.md section 4)."""

ANSWER_TYPES = ("number", "boxed", "choice", "string")

# How the answer of a number or boxed text is found when it has no box (docs/reference.md section 4):
# the registered rule reads the final number; the sensitivity variant reads the expression of a
# closing "the final answer is ...".
REGISTERED_EXTRACTION = "final_number"
EXTRACTIONS = ("final_number", "final_statement")

# How two answers are compared: the registered rule (equal normalized strings) and math-verify.
EQUIVALENCES = ("normalized", "math_verify")

# How a numeric answer is written into its class (docs/reference.md section 4; cotdyn.grading.canonical):
# ``as_written`` is the rule of plans v1-v3 (which do not name it): the normalized spelling, so 0.50
# and \frac{1}{2} are two classes; ``canonical`` (plan v4) writes each value in one form.
AS_WRITTEN = "as_written"
CANONICAL = "canonical"
ANSWER_FORMS = (AS_WRITTEN, CANONICAL)
