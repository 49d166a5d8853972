"""How one submission of a class ended, in one word: the status column of grades.csv and the class overview.

The words and their meanings live here, below both the batch runner (which decides them, in
:func:`grader.batch.submission_status`) and the overview page (which shows them), so that a view never
imports the runner. A check's own status (passed, failed, error, timeout, skipped) is another, finer set.
"""

from __future__ import annotations

from typing import Literal, get_args

SubmissionStatus = Literal[
    "graded",
    "timeout",
    "did_not_import",
    "raised_every_call",
    "raised_in_some_checks",
    "invalid",
    "grader_error",
]
SUBMISSION_STATUSES: tuple[SubmissionStatus, ...] = get_args(SubmissionStatus)
SUBMISSION_STATUS_MEANING: dict[SubmissionStatus, str] = {
    "graded": "every check ran to a verdict",
    "timeout": "at least one check ran out of time",
    "did_not_import": "the module raised (or its worker died) while being imported: no function of it could be "
    "called, and every check stopped on that error",
    "raised_every_call": "the module imported, but causal_self_attention raised on every call: every check that "
    "needs an answer from it stopped with an error",
    "raised_in_some_checks": "the code raised, returned something unusable or its worker died in some checks; "
    "the others ran to a verdict",
    "invalid": "the submission could not be read (no attention_head.py, bad zip or notebook)",
    "grader_error": "the grader itself failed (or its diagnosis could not finish: the score is provisional); rerun "
    "to retry (not fingerprinted)",
}
RAISED: tuple[SubmissionStatus, ...] = ("did_not_import", "raised_every_call", "raised_in_some_checks")
# Written by graders before the three statuses above: a stored outcome with it is classified again from its
# result.json (nothing is regraded for it).
LEGACY_STATUSES = frozenset({"crashed"})
