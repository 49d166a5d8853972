"""The result model: one object that every view (terminal, JSON, HTML, Gradescope, CSV, JUnit) renders.

Views are pure functions of a :class:`GradeResult`; nothing here knows how it will be shown.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

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


class Mismatch(_Strict):
    """Where two tensors disagreed beyond the tolerance (``grader.compare.Mismatch`` as data; it words itself).
    A number that is not finite (a NaN, a relative difference where 0 was expected) is None."""

    what: str = Field(description="What was compared, e.g. 'out (causal=True)'.")
    n_bad: int = Field(description="How many elements are outside the tolerance.")
    n_total: int = Field(description="How many elements were compared.")
    max_abs: float | None = Field(description="The greatest absolute difference.")
    abs_index: list[int] = Field(description="Where it is.")
    max_rel: float | None = Field(description="The greatest relative difference.")
    rel_index: list[int] = Field(description="Where it is.")
    got: float | None = Field(description="The value at the greatest absolute difference.")
    expected: float | None = Field(description="What was expected there.")
    rtol: float = Field(description="The relative tolerance allowed.")
    atol: float = Field(description="The absolute tolerance allowed.")


StopKind = Literal["raised", "timeout", "breach", "not_defined", "uninstalled", "not_imported"]


class Stop(_Strict):
    """What the student's code did that stopped a check, one of its cases or one of its groups of cases (issue 51:
    the diagnosis reads this, never the check's words)."""

    kind: StopKind = Field(
        description="'raised': the code raised (or its worker died); 'timeout': it ran past the time limit; 'breach': "
        "what it returned breaks the contract; 'not_defined': a contract function is missing; 'uninstalled': a "
        "function was left out because it needs a package the grader does not install; 'not_imported': the module "
        "raised while it was imported."
    )
    text: str = Field(description="The failure as the head reported it (the exception's line and traceback).")
    function: str | None = Field(default=None, description="The contract function, for not_defined and uninstalled.")
    package: str | None = Field(default=None, description="The package it needs, for uninstalled.")
    advice: str | None = Field(default=None, description="What to use instead, for uninstalled.")
    scope: Literal["check", "case", "also"] = Field(
        default="check",
        description="'check': it stopped the whole check; 'case': the failing case (or group of cases) the check "
        "reports; 'also': a later group of cases of a check that runs every group (numerical_stability).",
    )
    group: str | None = Field(default=None, description="The group of cases it stopped, e.g. 'float16 inputs'.")
    overflow: bool = Field(default=False, description="The exception says a value overflowed the dtype.")
    shape_of: str | None = Field(default=None, description="For a breach: the returned value of the wrong shape.")
    undifferentiable: bool = Field(default=False, description="For a breach: a returned value has no autograd graph.")


class Unobserved(_Strict):
    """The head answered finite inputs with non-finite values during a check (issue 30): what was seen, where."""

    said: str = Field(description="What was seen, e.g. 'every entry of out and weights is NaN'.")
    causal: bool = Field(description="The causal flag of that call.")
    counterexample: Counterexample = Field(description="The smallest such input.")
    failed_for_it: bool = Field(
        description="True: the check's pass was not observed, and it failed for this; False: it failed on its own, "
        "and this is a note."
    )


class SourceSpot(_Strict):
    """A line of the submission's source that a check found (the forbidden API's first use)."""

    line: int
    code: str


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
    # What established this cause, as data for the diagnosis's other rules (issue 51: they read it, never the
    # words above); never serialised: the views read the fields.
    _facts: dict[str, object] = PrivateAttr(default_factory=dict)

    def with_facts(self, **facts: object) -> Diagnosis:
        """This cause carrying ``facts`` about what established it."""
        copy = self.model_copy()
        copy._facts = {**self._facts, **facts}
        return copy

    def fact(self, name: str) -> object:
        """A fact about what established this cause (None when it has none of that name)."""
        return self._facts.get(name)


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


class DiagnosisStep(_Strict):
    """One rule of the diagnosis's engine over one submission: how often it ran, what it cost and whether it
    changed anything (issue 51: the result says which rules did what; a report can show how the causes were
    found)."""

    name: str = Field(description="The rule, e.g. 'crashes', 'search', 'point', 'prove'.")
    says: str = Field(
        default="", description="What the rule does, in words (the report's 'how these causes were found')."
    )
    runs: int = Field(description="How many times it ran.")
    changed: int = Field(description="How many of those runs answered something else than finding nothing.")
    raised: int = Field(default=0, description="How many raised (the grader's own error, recorded apart).")
    seconds: float = Field(description="Its wall time, all runs together.")

    def plus(self, other: DiagnosisStep) -> DiagnosisStep:
        """This pass's runs and ``other``'s, counted together."""
        return self.model_copy(
            update={
                "runs": self.runs + other.runs,
                "changed": self.changed + other.changed,
                "raised": self.raised + other.raised,
                "seconds": round(self.seconds + other.seconds, 4),
            }
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


class Mutant(_Strict):
    """One small change of the student's own head (mutation testing, as mutmut makes them) and whether their tests
    caught it (some test failed, errored or timed out on it)."""

    file: str = Field(description="The student's file the change is in.")
    line: int = Field(description="1-based line of the change.")
    before: str = Field(description="The code changed, as written.")
    after: str = Field(description="What the mutation wrote instead.")
    caught: bool = Field(description="Whether some test of the student's failed on the changed head.")


class OwnTests(_Strict):
    """The student's own tests run on their own head, counted as pytest counts them, then on mutations of that
    head (the student kit's student_tests: the kit has no correct head or known bugs to run them on)."""

    passed: int = Field(description="Tests that passed on the student's head.")
    failed: int = Field(description="Tests that failed or errored on it.")
    skipped: int = Field(description="Tests skipped (pytest.skip, xfail).")
    failing: list[str] = Field(default_factory=list, description="The failing tests' ids, as pytest names them.")
    asserts: str = Field(
        default="",
        description="What the first failing test says it asserts: its docstring's first line, if it has one.",
    )
    mutants: int = Field(default=0, description="Mutations of the head the tests were run on (0: none were run).")
    caught: int = Field(default=0, description="Of those, how many some test caught.")
    survived: list[Mutant] = Field(default_factory=list, description="The mutations no test caught.")


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
    message: str = Field(
        description="Explanation: the property, what happened, what to do (the smallest failing input and the "
        "reproduce command are fields of their own)."
    )
    counterexample: Counterexample | None = Field(default=None, description="Smallest failing input.")
    reproduce: str | None = Field(default=None, description="One command that reruns this check alone.")
    mismatch: Mismatch | None = Field(default=None, description="The numeric comparison that failed, if one did.")
    stopped: list[Stop] = Field(
        default_factory=list,
        description="What the student's code did that stopped this check (group None, first) or some of its cases "
        "or groups.",
    )
    absent: list[Stop] = Field(
        default_factory=list,
        description="Contract functions this check found missing (not_defined) or left out for a package "
        "(uninstalled), besides what stopped it.",
    )
    unobserved: Unobserved | None = Field(
        default=None, description="Non-finite outputs on finite inputs seen during this check (issue 30)."
    )
    found_at: SourceSpot | None = Field(default=None, description="The source line the check found (forbidden_api).")
    seed: int = Field(description="Base seed the check ran with.")
    duration_s: float = Field(description="Wall time of the check in seconds.")
    heatmaps: list[Heatmap] = Field(default_factory=list, description="Matrices to draw for a failure.")
    notes: list[str] = Field(default_factory=list, description="Advice that costs no points.")
    advice: str | None = Field(
        default=None,
        description="The check's own advice on a failure (what usually makes it): part of the message only when no "
        "named cause explains the check; where one does, its hint speaks instead (issue 53: a check's words never "
        "contradict its cause).",
    )
    causes: list[str] = Field(
        default_factory=list, description="Ids of the diagnosis entries (root causes) that explain this failure."
    )
    pending: str | None = Field(
        default=None,
        description="Why this check's points are not graded by this edition, when they are not (the student kit's "
        "student_tests: graded on submission). Its points count in the result's max_score, never in its score; "
        "its status is what this edition observed.",
    )
    own_tests: OwnTests | None = Field(
        default=None, description="The student's tests on their own head and its mutations (the student kit)."
    )


class LimitHit(_Strict):
    """A limit of the sandbox the submission ran into (issue 53.7): said where the student looks, with the cap."""

    limit: Literal["memory"] = Field(description="Which limit: 'memory' (the rubric's limits.memory_mb).")
    cap_mb: int = Field(description="The cap, in MiB.")
    tried_bytes: int | None = Field(
        default=None, description="The largest allocation that failed, in bytes, when the error said it."
    )


class StudentOutput(_Strict):
    """What the submission printed, capped."""

    text: str = Field(default="", description="Captured stdout and stderr, truncated to the cap.")
    truncated: bool = Field(default=False, description="Whether output past the cap was dropped.")
    bytes_dropped: int = Field(default=0, description="How many bytes were dropped.")


class Attempts(_Strict):
    """What the submission's own code tried beyond what it owns, as its workers counted it (issue 54): for the
    instructor's class overview, never quoted to anyone else. Where the file-system layer is active (see
    ``protections``) every read and write counted here was denied."""

    reads: int = Field(default=0, description="Opens or listings of paths outside what the worker may read.")
    writes: int = Field(default=0, description="Writes, removals or renames outside the worker's own work dir.")
    commands: int = Field(default=0, description="Shell commands and programs started (os.system, subprocess, exec).")
    connections: int = Field(default=0, description="Network connections or listening sockets asked for.")

    @property
    def total(self) -> int:
        return self.reads + self.writes + self.commands + self.connections

    def words(self) -> str:
        """'20 reads outside its folder, 4 commands' ("" when none)."""
        parts = [
            (self.reads, "read outside its folder", "reads outside its folder"),
            (self.writes, "write outside its work dir", "writes outside its work dir"),
            (self.commands, "command run", "commands run"),
            (self.connections, "network connection", "network connections"),
        ]
        return ", ".join(f"{n} {one if n == 1 else many}" for n, one, many in parts if n)


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
    limits_hit: list[LimitHit] = Field(
        default_factory=list, description="Limits of the sandbox the submission ran into (its calls failed there)."
    )
    attempts: Attempts = Field(
        default_factory=Attempts,
        description="What the submission's code tried beyond what it owns (reads and writes outside its folders, "
        "commands, network), counted by its workers; the class overview flags it.",
    )
    diagnosis: list[Diagnosis] = Field(
        default_factory=list, description="Root causes of the failing checks, most checks explained first."
    )
    diagnosis_error: DiagnosisError | None = Field(
        default=None,
        description="The grader's own exception inside the diagnosis, when it could not finish: the score is then "
        "provisional (counted over the causes found, never below the per-check sum), and a batch regrades it. "
        "None when the diagnosis finished.",
    )
    diagnosis_steps: list[DiagnosisStep] = Field(
        default_factory=list,
        description="The diagnosis's rules in the order they first ran, with what each did and cost (empty when "
        "nothing failed).",
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
    def pending_points(self) -> float:
        """Points of max_score that this edition cannot grade (the checks with ``pending``)."""
        return sum(c.max_score for c in self.checks if c.pending is not None and not c.extra_credit)

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
