"""The reference's Exercise 3 measurements made ahead (grader/oracle.py, issue 37): the report's plot reads them
only while the reference is the source they were made from, and they are what it measures."""

from __future__ import annotations

import importlib.util
import math
import shutil
from pathlib import Path

from grader import library
from grader.checks._exercises import stats_seed
from grader.oracle import MEASURED_FILE, LiveOracle, measured_ahead, measurement_key
from grader.rubric import load_rubric
from grader.visuals import SCALE_DKS, SCALE_SAMPLES, SCALE_T


def test_the_stored_measurements_are_what_the_reference_measures_today() -> None:
    module = library.load_reference()
    stored = measured_ahead(module)
    assert stored, f"{MEASURED_FILE} was made from another reference: run `python -m grader.visuals`"
    seed = stats_seed(load_rubric(None).seed)
    for d_k in SCALE_DKS:
        live = dict(module.score_scale_statistics(d_k, T=SCALE_T, n_samples=SCALE_SAMPLES, seed=seed))
        ahead = stored[measurement_key(d_k, SCALE_T, SCALE_SAMPLES, seed)]
        # a reduction's order follows torch's thread count: the last bits of a std differ (3e-15 seen in CI)
        assert ahead.keys() == live.keys()
        assert all(math.isclose(ahead[k], live[k], rel_tol=1e-12) for k in live), (ahead, live)


def test_an_edited_reference_is_measured(tmp_path: Path) -> None:
    source = library.reference_path()
    edited = tmp_path / source.name
    edited.write_text(source.read_text() + "\n# edited\n")
    shutil.copy(source.with_name(MEASURED_FILE), tmp_path)
    spec = importlib.util.spec_from_file_location("_edited_reference", edited)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert measured_ahead(module) == {}
    seed = stats_seed(load_rubric(None).seed)
    got = LiveOracle(module).statistics(16, T=SCALE_T, n_samples=SCALE_SAMPLES, seed=seed)
    assert got == dict(module.score_scale_statistics(16, T=SCALE_T, n_samples=SCALE_SAMPLES, seed=seed))
