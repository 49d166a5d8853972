import grader


def test_public_api_is_small_and_sorted() -> None:
    assert grader.__all__ == sorted(grader.__all__)
    assert grader.__all__ == ["CheckResult", "GradeResult", "Rubric", "check", "grade", "load_rubric"]
