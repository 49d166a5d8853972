"""JUnit XML: one testcase per check, in the dialect pytest, Jenkins, GitLab and GitHub reporters read.

    <testsuites name="step4-grader" tests=.. failures=.. errors=.. skipped=.. time=..>
      <testsuite name="RUBRIC" ...>
        <properties> submission, score, max_score, percent, scoring, score_by_checks, [scoring_note], seed </properties>
        <testcase classname="step4.CHECK_ID" name="CHECK_ID: TITLE" time="0.123">
          <failure message="first line" type="failed">the whole message</failure>
        </testcase>
        [<testcase classname="step4.grader" name="diagnosis"><error type="EXCEPTION">the grader's own
          exception inside the diagnosis (issue 35): the score is provisional</error></testcase>]
        <system-out>what the submission printed</system-out>

Mapping of the closed status set: failed and timeout are ``<failure>`` (the code did not meet the
property within its budget), error is ``<error>`` (the code crashed, or the grader did), skipped is
``<skipped>``. A pure function of the result: no timestamp or host name, so the same result gives
the same bytes. ``score`` is the grade's total (``GradeResult.score``): when the grade counts mistakes
(``scoring`` = mistakes) it is more than ``score_by_checks``, the sum of the testcases' points.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from grader.models import FAILING, CheckResult, GradeResult
from grader.report import wording

# XML 1.0 forbids most control characters even when escaped; student output may contain any of them.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` with characters XML 1.0 cannot hold replaced by U+FFFD (ElementTree escapes the rest)."""
    return _NOT_XML.sub("\ufffd", text)


def _counts(checks: list[CheckResult], grader_errors: int = 0) -> dict[str, str]:
    failures = sum(c.status in ("failed", "timeout") for c in checks)
    errors = sum(c.status == "error" for c in checks) + grader_errors
    skipped = sum(c.status == "skipped" for c in checks)
    return {
        "tests": str(len(checks) + grader_errors),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": str(skipped),
    }


def _testcase(parent: ET.Element, check: CheckResult, result: GradeResult) -> None:
    case = ET.SubElement(
        parent,
        "testcase",
        classname=f"step4.{check.id}",
        name=xml_text(f"{check.id}: {check.title}"),
        time=f"{check.duration_s:.3f}",
    )
    cause = wording.check_where(result, check) if check.status in FAILING else None
    if cause is not None and cause.where is not None:  # where the student edits (issue 28): file and line
        case.set("file", xml_text(cause.where.file))
        case.set("line", str(cause.where.line))
    first_line = check.message.splitlines()[0] if check.message else check.status
    points = f"{check.score:g}/{check.max_score:g} points"
    if check.status in ("failed", "timeout"):
        tag = "failure"
    elif check.status == "error":
        tag = "error"
    elif check.status == "skipped":
        ET.SubElement(case, "skipped", message=xml_text(first_line))
        return
    else:
        return
    node = ET.SubElement(case, tag, message=xml_text(first_line), type=check.status)
    at = f"\n{wording.where_line(cause)}" if cause is not None else ""
    node.text = xml_text(f"{wording.text(check)}{at}\n({points}; {check.cites})")


def _diagnosis_error(suite: ET.Element, result: GradeResult) -> None:
    """The grader's own exception inside the diagnosis (issue 35) as one errored test case, so that a CI run
    that reads the report goes red on it too."""
    failed = wording.diagnosis_error_line(result)
    if result.diagnosis_error is None or failed is None:
        return
    case = ET.SubElement(suite, "testcase", name="diagnosis", classname="step4.grader", time="0.000")
    node = ET.SubElement(case, "error", message=xml_text(failed), type=result.diagnosis_error.type)
    node.text = xml_text("\n".join(result.diagnosis_error.traceback))


def render_junit(result: GradeResult) -> str:
    """The JUnit XML document for ``result`` (UTF-8 text with an XML declaration)."""
    counts = _counts(result.checks, grader_errors=int(result.diagnosis_error is not None))
    total_time = f"{result.duration_s:.3f}"
    root = ET.Element("testsuites", {"name": "step4-grader", **counts, "time": total_time})
    suite = ET.SubElement(root, "testsuite", {"name": xml_text(result.rubric), **counts, "time": total_time})
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("submission", result.submission),
        ("score", f"{result.score:g}"),
        ("max_score", f"{result.max_score:g}"),
        ("percent", f"{result.percent:.1f}"),
        ("scoring", result.scoring),
        ("score_by_checks", f"{result.score if result.score_by_checks is None else result.score_by_checks:g}"),
        *((("scoring_note", result.scoring_note),) if result.scoring_note else ()),
        *((("diagnosis_complete", proven),) if (proven := wording.diagnosis_complete_line(result)) else ()),
        ("seed", str(result.seed)),
    ):
        ET.SubElement(props, "property", name=name, value=xml_text(value))
    for check in result.checks:
        _testcase(suite, check, result)
    _diagnosis_error(suite, result)
    if result.output.text:
        out = ET.SubElement(suite, "system-out")
        dropped = f"\n[... {result.output.bytes_dropped} more bytes dropped]" if result.output.truncated else ""
        out.text = xml_text(result.output.text + dropped)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
