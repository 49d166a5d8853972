"""JUnit XML for CI: one testcase per check, the counts CI servers read, escaping, and the CLI hook."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader.cli import main
from grader.library import known_heads
from grader.models import CheckResult, GradeResult, StudentOutput
from grader.report.junit import render_junit


def _check(cid: str, status: str, message: str = "", **kw: object) -> CheckResult:
    data = dict(
        id=cid,
        title=f"{cid} holds",
        cites="Proposition 4.3",
        status=status,
        score=0.0,
        max_score=2.0,
        message=message or f"{cid} {status}",
        seed=7,
        duration_s=0.25,
    )
    return CheckResult.model_validate(data | kw)


def _result(checks: list[CheckResult], output: str = "") -> GradeResult:
    return GradeResult(
        submission="attention_head.py",
        seed=7,
        score=sum(c.score for c in checks),
        max_score=sum(c.max_score for c in checks),
        checks=checks,
        rubric="Step 4 <test>",
        duration_s=1.5,
        output=StudentOutput(text=output),
    )


def test_one_testcase_per_check_with_pytest_style_counts() -> None:
    result = _result(
        [
            _check("interface", "passed", score=2.0),
            _check("causal_mask", "failed", "causal_mask FAILED: weights[0, 0, 1] = 0.43.\nReproduce: grade x"),
            _check("determinism", "timeout", "did not finish within 20 s"),
            _check("gradient_blocks", "error", "RuntimeError: boom"),
            _check("fused_kernel", "skipped", "Optional: not defined"),
        ]
    )
    root = ET.fromstring(render_junit(result))
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "Step 4 <test>"
    for node in (root, suite):
        assert (node.get("tests"), node.get("failures"), node.get("errors"), node.get("skipped")) == (
            "5",
            "2",
            "1",
            "1",
        )
        assert node.get("time") == "1.500"
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == [f"step4.{c.id}" for c in result.checks]
    assert all(c.get("time") == "0.250" for c in cases)
    assert list(cases[0]) == []  # passed: no child
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("type") == "failed"
    assert failure.get("message") == "causal_mask FAILED: weights[0, 0, 1] = 0.43."  # the first line
    assert failure.text is not None and "Reproduce: grade x" in failure.text and "0/2 points" in failure.text
    assert cases[2].find("failure") is not None and cases[2].find("failure").get("type") == "timeout"  # type: ignore[union-attr]
    assert cases[3].find("error") is not None
    assert cases[4].find("skipped") is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["score"] == "2" and props["max_score"] == "10" and props["seed"] == "7"


def test_student_text_is_escaped_and_made_xml_safe() -> None:
    nasty = 'x < y && "q" \x00\x1b[31m </failure><injected/>'
    result = _result([_check("interface", "failed", nasty)], output=f"printed {nasty}\x07")
    text = render_junit(result)
    root = ET.fromstring(text)  # parses: control characters replaced, markup escaped
    assert root.find(".//injected") is None
    failure = root.find(".//failure")
    assert failure is not None and failure.text is not None and "</failure><injected/>" in failure.text
    assert "\ufffd" in failure.text and "\x00" not in text
    out = root.find(".//system-out")
    assert out is not None and out.text is not None and out.text.startswith("printed x < y")


def test_same_result_same_bytes() -> None:
    result = _result([_check("interface", "failed")])
    assert render_junit(result) == render_junit(result.model_copy(deep=True))


def test_cli_writes_junit_and_fails_under_threshold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chaff = next(h for h in known_heads("chaff") if h.id == "no_mask")
    head = tmp_path / "attention_head.py"
    head.write_text(chaff.source())
    report = tmp_path / "report.xml"
    code = main(
        [
            str(head),
            "--junit",
            str(report),
            "--fail-under",
            "80",
            "--only",
            "interface",
            "causal_mask",
            "--quiet",
        ]
    )
    assert code == 1  # 5 / 13 points
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "1"
    failed = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert [c.get("classname") for c in failed] == ["step4.causal_mask"]
    assert "--only causal_mask --seed" in (failed[0].find("failure").text or "")  # type: ignore[union-attr]
