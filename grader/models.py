"""The result model: one object that every view (terminal, JSON, HTML, Gradescope, CSV, JUnit) renders.

Views are pure functions of a :class:`GradeResult`; nothing here knows how it will be shown.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Status = Literal["passed", "failed", "error", "timeout", "skipped"]
Scoring = Literal["mistakes", "checks"]
FAILING: frozenset[Status] = frozenset({"failed", "error", "timeout"})  # a check that did not pass nor was skipped
Visibility = Literal["visible", "after_due_date", "after_published", "hidden"]

SCHEMA_VERSION = 2


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Heatmap(_Strict):
    """A T x T attention matrix to draw (query i down, key j across)."""

    title: str = Field(description="What the matrix is, e.g. 'your weights'.")
    kind: Literal["weights", "difference"] = Field(description="Colour scale to use.")
    data: list[list[float | None]] = Field(description="Row-major values; None for non-finite entries.")
    causal: bool = Field(default=True, description="Whether the strict upper triangle is masked.")


class Counterexample(_Strict):
    """The smallest input on which a check failed, with enough to rebuild it."""

    shape: dict[str, int] = Field(description="B, T, d, d_k, d_v (or the parameters of the input).")
    dtype: str = Field(description="Dtype of the failing input.")
    seed: int = Field(description="Seed to pass to --seed to rebuild this input.")
    params: dict[str, float | int | bool | str] = Field(default_factory=dict, description="Other input parameters.")

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in {**self.shape, **self.params}.items()]
        return f"{', '.join(parts)} ({self.dtype}, seed {self.seed})"


CauseKind = Literal["mutation", "known", "crash", "contract", "own", "departure"]


class SourceLine(_Strict):
    """Where in the student's code a cause shows: the line to look at (issue 28)."""

    file: str = Field(description="The file, relative to the submission (for a notebook, the notebook's name).")
    line: int = Field(description="1-based line in that file; for a notebook, the line in its cell.")
    code: str = Field(description="The source text of that line, stripped.")
    cell: int | None = Field(
        default=None,
        description="For a notebook, the cell's number as the notebook shows it: its execution count, or its place.",
    )
    cell_label: str | None = Field(
        default=None,
        description="For a notebook, how the student finds that cell: 'In [7]' (its execution count, shown beside "
        "it in Jupyter, VS Code and Colab) or 'cell 4' (its place, counting every cell from 1, markdown included).",
    )
    context: dict[int, str] = Field(
        default_factory=dict, description="The lines around it (number -> text), for showing it in place."
    )


class Departure(_Strict):
    """The first value of the student's computation that leaves the lecture's, and the stage it should have been."""

    stage: str = Field(description="The lecture's stage due there: Q, K, V, scores, scaled, masked, weights or out.")
    description: str = Field(description="How the value differs from that stage, in the lecture's words.")
    expected: list[list[float | None]] | None = Field(
        default=None,
        description="The stage on the grader's probe (batch 0, its top-left 8 x 8 at most); None: not finite.",
    )
    produced: list[list[float | None]] | None = Field(
        default=None, description="What the student's line produced on the same probe."
    )
    causal: bool = Field(default=True, description="The causal flag of the traced call.")


class Diagnosis(_Strict):
    """One root cause of the failing checks: a change to the correct head, a known bug, or a crash."""

    id: str = Field(description="Identifier of the cause, e.g. 'no_scaling' or 'crash:causal_self_attention'.")
    title: str = Field(description="Short name of the cause.")
    hint: str = Field(description="Targeted advice citing the lecture.")
    cites: str = Field(description="The lecture result it violates.")
    kind: CauseKind = Field(
        default="known",
        description="'mutation': one change of the correct head that, with the other causes, reproduces the head "
        "exactly; 'known': a known bug of another contract function matched on every probe; 'crash': the same "
        "student failure stopped several checks; 'contract': a breach of the calling contract (a function not "
        "defined, what the head returns, its dtype, no autograd graph) seen directly; 'own': the failure of a check "
        "whose property belongs to no other check (another function's, the APIs used, the speed, the student's "
        "tests) that no known bug matches: the check's own observation is the cause; 'departure': no named cause "
        "matches, and the first value of the student's computation that leaves the lecture's is the cause.",
    )
    explains: list[str] = Field(default_factory=list, description="Ids of the failing checks this cause explains.")
    detail: str | None = Field(
        default=None,
        description="Full text of a crash, shown once for every check it stopped; for a change found beside such "
        "a crash, where the head was seen to run.",
    )
    deduction: float | None = Field(
        default=None,
        description="Points this cause costs counted by mistakes (its price in the rubric's [mistakes], 0 when it "
        "breaks no graded check), set whenever the named causes explain every failing check: charged when scoring "
        "is 'mistakes', shown beside the cause when the per-check count stands instead; None when a failing check "
        "no cause explains leaves the grade counted by checks.",
    )
    where: SourceLine | None = Field(
        default=None, description="The student's line this cause shows at (issue 28); None when none was found."
    )
    departure: Departure | None = Field(
        default=None, description="What the grader saw there: the value that left the lecture's computation."
    )


class DiagnosisError(_Strict):
    """The grader's own exception inside the diagnosis (issue 35): never the student's fault, never silent. The
    passes that finished kept their causes; what the failed ones would have named is missing, so the score
    counted over the causes found is provisional (README, "When the diagnosis could not finish")."""

    type: str = Field(description="The exception's class, e.g. 'IndexError'.")
    message: str = Field(description="The exception's message (its first 500 characters).")
    passes: list[str] = Field(
        default_factory=list, description="The diagnosis's passes that raised, in order, e.g. 'search', 'point'."
    )
    traceback: list[str] = Field(
        default_factory=list, description="The last frames of the first exception, innermost last (for a bug report)."
    )


class DiagnosisProof(_Strict):
    """The diagnosis's proof that it is complete (issue 35): with the changes its walk found applied to the head in
    the worker, every property check that failed passes; those that passed had passed without them."""

    changes: int = Field(description="How many changes (the walk's interventions, one per mistake) the proof applies.")
    checks: list[str] = Field(
        default_factory=list,
        description="The failing property checks run again on the head with the changes applied, every one of "
        "which passed.",
    )
    not_provable: list[str] = Field(
        default_factory=list,
        description="Failing checks that cannot be run with the changes (gradient_blocks: a changed value carries "
        "no gradient), each explained only by causes at the changes' lines.",
    )


class Panel(_Strict):
    """The student's matrix next to the reference's on the same input."""

    label: str = Field(description="What distinguishes this panel, e.g. 'h = 0.5'.")
    yours: Heatmap | None = Field(description="The student's matrix; None when it could not be computed.")
    reference: Heatmap | None = Field(description="The reference's matrix on the same input.")
    problem: str | None = Field(default=None, description="Why a matrix is missing ('could not be computed: ...').")
    max_abs_diff: float | None = Field(default=None, description="Largest |yours - reference| (NaN counts as inf).")


class SentenceVisual(_Strict):
    """The head on a short real sentence with fixed-seed embeddings and sinusoidal positions."""

    text: str = Field(description="The sentence as shipped with the package.")
    tokens: list[str] = Field(description="Whitespace tokens, the axis labels.")
    shape: dict[str, int] = Field(description="B, T, d, d_k, d_v of the input.")
    seed: int = Field(description="Seed of the embeddings and projections.")
    panel: Panel = Field(description="Causal weights: yours and the reference's.")


class KernelVisual(_Strict):
    """The masked Gaussian positional kernel (Example 7.4) for several bandwidths."""

    T: int = Field(description="Sequence length.")
    panels: list[Panel] = Field(description="One panel per bandwidth.")


class ScalePoint(_Strict):
    """Score statistics at one d_k (Exercise 3); None where a value is missing or not finite."""

    d_k: int
    raw_std: float | None = None
    scaled_std: float | None = None
    raw_max_weight: float | None = None
    scaled_max_weight: float | None = None


class ScaleVisual(_Strict):
    """Raw versus scaled score std and the typical largest weight against d_k (Exercise 3, Lemma 5.5)."""

    T: int
    n_samples: int
    seed: int
    yours: list[ScalePoint] = Field(description="The student's score_scale_statistics, one point per d_k.")
    reference: list[ScalePoint] = Field(description="The reference's, same arguments.")
    problem: str | None = Field(default=None, description="Why the student's points are missing or incomplete.")


class Visuals(_Strict):
    """Everything the visualisation section draws."""

    sentence: SentenceVisual | None = None
    kernels: KernelVisual | None = None
    scale: ScaleVisual | None = None
    problems: list[str] = Field(default_factory=list, description="Parts that could not be built at all.")


class CheckResult(_Strict):
    """The verdict of one check on one submission."""

    id: str = Field(description="Check identifier, e.g. 'causal_mask'.")
    title: str = Field(description="The property checked, in one line.")
    cites: str = Field(description="The lecture result the property comes from.")
    status: Status = Field(description="Outcome of the check.")
    score: float = Field(description="Points earned.")
    max_score: float = Field(description="Points available.")
    extra_credit: bool = Field(default=False, description="Points count on top of the maximum.")
    visibility: Visibility = Field(default="visible", description="When the student may see this check.")
    message: str = Field(description="Explanation: the property, what happened, what to do.")
    counterexample: Counterexample | None = Field(default=None, description="Smallest failing input.")
    reproduce: str | None = Field(default=None, description="One command that reruns this check alone.")
    seed: int = Field(description="Base seed the check ran with.")
    duration_s: float = Field(description="Wall time of the check in seconds.")
    heatmaps: list[Heatmap] = Field(default_factory=list, description="Matrices to draw for a failure.")
    notes: list[str] = Field(default_factory=list, description="Advice that costs no points.")
    causes: list[str] = Field(
        default_factory=list, description="Ids of the diagnosis entries (root causes) that explain this failure."
    )


class StudentOutput(_Strict):
    """What the submission printed, capped."""

    text: str = Field(default="", description="Captured stdout and stderr, truncated to the cap.")
    truncated: bool = Field(default=False, description="Whether output past the cap was dropped.")
    bytes_dropped: int = Field(default=0, description="How many bytes were dropped.")


class GradeResult(_Strict):
    """Everything the grader concluded about one submission."""

    schema_version: int = Field(default=SCHEMA_VERSION, description="Version of this JSON layout.")
    submission: str = Field(description="The submission as given on the command line.")
    seed: int = Field(description="Base seed; rerun with --seed to reproduce.")
    score: float = Field(
        description="Points earned (extra credit included): the larger of score_by_checks and the score by mistakes."
    )
    max_score: float = Field(description="Points available (extra credit excluded).")
    scoring: Scoring = Field(
        default="checks",
        description="'mistakes': the named causes explain every failing check and each cost its price once "
        "(the diagnosis entries' deduction); 'checks': the sum of the per-check scores.",
    )
    score_by_checks: float | None = Field(
        default=None, description="Sum of the per-check scores (the evidence); equal to score when scoring is 'checks'."
    )
    scoring_note: str | None = Field(default=None, description="How the score was counted, or why not by mistakes.")
    checks: list[CheckResult] = Field(description="One verdict per check, in rubric order.")
    protections: list[str] = Field(default_factory=list, description="Isolation measures that were active.")
    absent_protections: list[str] = Field(
        default_factory=list,
        description="Protections of the Linux sandbox that the platform it ran on lacks (Windows: seccomp, Landlock, "
        "sandbox uid, namespaces, rlimits); empty where none is missing.",
    )
    devices: list[str] = Field(default_factory=list, description="Devices the checks ran on.")
    output: StudentOutput = Field(default_factory=StudentOutput, description="What the submission printed.")
    diagnosis: list[Diagnosis] = Field(
        default_factory=list, description="Root causes of the failing checks, most checks explained first."
    )
    diagnosis_error: DiagnosisError | None = Field(
        default=None,
        description="The grader's own exception inside the diagnosis, when it could not finish: the score is then "
        "provisional (counted over the causes found, never below the per-check sum), and a batch regrades it. "
        "None when the diagnosis finished.",
    )
    diagnosis_complete: DiagnosisProof | None = Field(
        default=None,
        description="Set when the diagnosis is proven complete: with its changes applied, the head passes every "
        "property check it failed (those that cannot be run so are listed). None otherwise (nothing failed, or "
        "no proof).",
    )
    rubric: str = Field(description="Name of the rubric used.")
    duration_s: float = Field(description="Total wall time in seconds.")
    notes: list[str] = Field(default_factory=list, description="Remarks about reading the submission.")
    visuals: Visuals | None = Field(default=None, description="Data for the report's visualisation section.")

    @model_validator(mode="after")
    def _by_checks_known(self) -> GradeResult:
        if self.score_by_checks is None:
            self.score_by_checks = self.score
        return self

    @property
    def provisional(self) -> bool:
        """Whether the score may change once the grader's own error is fixed (``diagnosis_error``)."""
        return self.diagnosis_error is not None

    @property
    def percent(self) -> float:
        return 100.0 * self.score / self.max_score if self.max_score else 0.0


# -- the class similarity report (instructor only; grader/similarity.py computes it) ------------------


class SimilarPair(_Strict):
    """Two submissions whose code matches, ranked against every pair of the class."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use: a grade never uses it

    a: str = Field(description="One submission's id (the smaller).")
    b: str = Field(description="The other's id.")
    similarity: float = Field(description="0 to 1: the larger of the normalised and verbatim matches.")
    normalised: float = Field(description="Mean share of both heads' normalised code in passages they share.")
    verbatim: float = Field(description="The same on the raw text (no identifier normalisation).")
    share_a: float = Field(description="Share of a's code in the passages drawn (the larger match).")
    share_b: float = Field(description="Share of b's code in the passages drawn.")
    z: float = Field(description="Robust z: (similarity - median) / scale, over the class's matching pairs.")
    evidence: float = Field(description="z, plus the rare-mistake bonus when the two share a rare cause.")
    flagged: bool = Field(description="An outlier of this class (evidence at or above the cut-off), or copies.")
    copies: bool = Field(
        default=False, description="Copies of one code: each has nearly all its own code in passages the other shares."
    )
    group: int | None = Field(default=None, description="The group (1-based) both belong to, when copies in one.")
    rare_causes: list[str] = Field(default_factory=list, description="Cause ids both share, rare in this class.")
    rare_words: str = Field(default="", description="Those causes in words, with how many heads hold each.")
    slices_a: list[tuple[int, int]] = Field(default_factory=list, description="Matching character ranges of a.")
    slices_b: list[tuple[int, int]] = Field(default_factory=list, description="Matching character ranges of b.")
    lines_a: list[tuple[int, int]] = Field(default_factory=list, description="Matching 1-based line ranges of a.")
    lines_b: list[tuple[int, int]] = Field(default_factory=list, description="Matching 1-based line ranges of b.")


class SimilarGroup(_Strict):
    """Three or more submissions that are copies of one code: a ring, told apart from a skeleton many follow."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use: a grade never uses it

    id: int = Field(description="1-based, largest group first.")
    members: list[str] = Field(description="The submissions' ids, sorted.")
    least_share: float = Field(description="The least share of its own code any linked member has in the other's.")


class SimilarityMember(_Strict):
    """A submission drawn in a flagged pair: its compared code, score and causes."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use: a grade never uses it

    id: str
    code: str = Field(description="The code compared: what the grader kept of the submission.")
    href: str | None = Field(default=None, description="Its report, relative to the class folder.")
    score: float | None = None
    max_score: float | None = None
    causes: list[tuple[str, str]] = Field(default_factory=list, description="(id, title) of its diagnosis.")


class ClassSimilarity(_Strict):
    """The class similarity report: the distribution of every pair and the pairs above its floor."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # built on first use: a grade never uses it

    submissions: int
    graded: int = Field(description="Submissions with a stored result (their causes count).")
    pairs_total: int
    pairs_matching: int = Field(description="Pairs sharing any passage after the boilerplate is removed.")
    spread_over: Literal["matching", "all"] = Field(
        default="matching",
        description="Which pairs the median and MAD are of: those that match (a class with enough of them), or "
        "every pair, the unmatched at 0 (a small class).",
    )
    median: float = Field(description="Median similarity of the pairs that share any passage.")
    mad: float = Field(description="Their median absolute deviation.")
    scale: float = Field(description="1.4826 MAD, at least scale_floor.")
    scale_floor: float = Field(default=0.05, description="The least spread assumed: pairs this close are alike.")
    q1: float
    q3: float
    max_similarity: float
    histogram: list[int] = Field(description="Pairs per similarity bin of equal width over [0, 1].")
    library: str = Field(description="The matcher and its version.")
    noise: int
    verbatim_noise: int
    common: int = Field(description="A passage in more than this many submissions is nobody's.")
    common_dropped: int = Field(description="Fingerprints dropped for being that common (normalised pass).")
    wide: int = Field(default=10, description="A passage in more than this many submissions is the class's.")
    copy_share: float = Field(default=0.9, description="Copies: the least share of own code each has in the other's.")
    copy_min: int = Field(default=60, description="Copies: the least own code they share, in normalised characters.")
    floor: int = Field(default=0, description="The class's median code length: a shorter head is measured on it.")
    groups: list[SimilarGroup] = Field(default_factory=list, description="Rings: three or more copies of one code.")
    boilerplate_files: int
    rare_max: int = Field(description="A cause held by at most this many heads is rare.")
    z_flag: float
    rare_bonus: float
    pairs: list[SimilarPair] = Field(description="Pairs above the floor, strongest evidence first.")
    members: dict[str, SimilarityMember] = Field(default_factory=dict, description="The flagged pairs' heads.")
    notes: list[str] = Field(default_factory=list)
    duration_s: float = 0.0
