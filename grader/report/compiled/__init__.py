"""The report templates, compiled ahead (grader/report/_precompiled.py); `python -m grader.report.compiled` makes
them again."""
