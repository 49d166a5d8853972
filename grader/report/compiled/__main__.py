from grader.report._precompiled import compile_all

compile_all()
