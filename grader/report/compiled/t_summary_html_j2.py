# Made by `python -m grader.report.compiled` from grader/report/templates/summary.html.j2: do not edit.
FINGERPRINT = "109822ba6813ff971ba74fdea5ca27ab773bd11961b5546ac50b51af01442048"
from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'summary.html.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_script_hash = resolve('script_hash')
    l_0_rubric = resolve('rubric')
    l_0_counted = resolve('counted')
    l_0_stats = resolve('stats')
    l_0_by_status = resolve('by_status')
    l_0_attempted = resolve('attempted')
    l_0_notes = resolve('notes')
    l_0_lowest = resolve('lowest')
    l_0_bins = resolve('bins')
    l_0_checks = resolve('checks')
    l_0_causes = resolve('causes')
    l_0_provisional = resolve('provisional')
    l_0_problems = resolve('problems')
    l_0_slowest = resolve('slowest')
    l_0_left = resolve('left')
    l_0_pending = resolve('pending')
    l_0_rows = resolve('rows')
    l_0_script = resolve('script')
    try:
        t_1 = environment.filters['join']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'join' found.")
    try:
        t_2 = environment.filters['length']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'length' found.")
    try:
        t_3 = environment.filters['replace']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'replace' found.")
    try:
        t_4 = environment.filters['safe']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'safe' found.")
    try:
        t_5 = environment.tests['none']
    except KeyError:
        @internalcode
        def t_5(*unused):
            raise TemplateRuntimeError("No test named 'none' found.")
    pass
    yield '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; img-src data:; script-src \''
    yield escape((undefined(name='script_hash') if l_0_script_hash is missing else l_0_script_hash))
    yield '\'">\n<title>Class overview — '
    yield escape((undefined(name='rubric') if l_0_rubric is missing else l_0_rubric))
    yield '</title>\n<style>\n'
    template = environment.get_template('_style.css.j2', 'summary.html.j2')
    gen = template.root_render_func(template.new_context(context.get_all(), True, {}))
    try:
        for event in gen:
            yield event
    finally: gen.close()
    yield '.hist rect{fill:var(--accent)}\n.hist text{text-anchor:middle}\n.rate{display:inline-block;width:120px;height:10px;background:var(--soft);border:1px solid var(--line);border-radius:5px;overflow:hidden;vertical-align:middle;margin-right:6px}\n.rate>span{display:block;height:100%;background:var(--pass)}\n.st-graded{color:var(--pass)}\n#help-table th a{color:inherit;text-decoration:none;border-bottom:1px dotted var(--muted)}\n.flag{display:inline-block;border-radius:10px;padding:0 7px;margin:1px 3px 1px 0;font-size:.8rem;border:1px solid var(--line);background:var(--soft)}\n.flag-hostile{border-color:#e5a3a0;background:#fdecea;color:var(--fail);font-weight:600}\n.flag-provisional{border-color:#e2b17a;background:#fff4e5}.st-did_not_import,.st-raised_every_call,.st-raised_in_some_checks,.st-invalid,.st-grader_error{color:var(--fail)}\n</style>\n</head>\n<body>\n<main>\n<header class="top">\n  <h1>Class overview</h1>\n  <p class="muted">'
    yield escape((undefined(name='rubric') if l_0_rubric is missing else l_0_rubric))
    yield '</p>\n  <div class="scorebox">\n    <div class="score">'
    yield escape(environment.getattr((undefined(name='counted') if l_0_counted is missing else l_0_counted), 'students'))
    yield ' <small>students</small></div>\n    <div class="score">'
    yield escape(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'submissions'))
    yield ' <small>submissions</small></div>\n'
    if (not t_5(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'mean'))):
        pass
        yield '    <div class="score">'
        yield escape(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'mean'))
        yield '% <small>mean</small></div>\n    <div class="score">'
        yield escape(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'median'))
        yield '% <small>median</small></div>\n    <div class="score">'
        yield escape(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'full'))
        yield ' <small>full marks</small></div>\n'
    yield '  </div>\n  <p>\n'
    def t_6(fiter):
        for (l_1_status, l_1_count, l_1_meaning) in fiter:
            if l_1_count:
                yield (l_1_status, l_1_count, l_1_meaning)
    for (l_1_status, l_1_count, l_1_meaning) in t_6((undefined(name='by_status') if l_0_by_status is missing else l_0_by_status)):
        _loop_vars = {}
        pass
        yield '    <span class="chip'
        yield escape((' warn' if (l_1_status != 'graded') else cond_expr_undefined("the inline if-expression on line 37 in 'summary.html.j2' evaluated to false and no else section was defined.")))
        yield '" title="'
        yield escape(l_1_meaning)
        yield '"><span class="st st-'
        yield escape(l_1_status)
        yield '">'
        yield escape(l_1_count)
        yield '</span> '
        yield escape(t_3(context.eval_ctx, l_1_status, '_', ' '))
        yield '</span>\n'
    l_1_status = l_1_count = l_1_meaning = missing
    yield '  </p>\n  <nav class="toc"><a href="#help">Look at first</a><a href="#histogram">Scores</a><a href="#checks">Checks</a><a href="#patterns">Root causes</a><a href="#provisional">Provisional</a>'
    if (undefined(name='attempted') if l_0_attempted is missing else l_0_attempted):
        pass
        yield '<a href="#hostile">Hostile attempts</a>'
    yield '<a href="#problems">Slow and raising</a><a href="#uncounted">Not graded, not counted</a>'
    if environment.getattr((undefined(name='counted') if l_0_counted is missing else l_0_counted), 'overrides'):
        pass
        yield '<a href="#overrides">Overrides</a>'
    yield '<a href="#all">All reports</a></nav>\n</header>\n\n'
    if (undefined(name='notes') if l_0_notes is missing else l_0_notes):
        pass
        yield '<div class="callout warn">\n'
        for l_1_note in (undefined(name='notes') if l_0_notes is missing else l_0_notes):
            _loop_vars = {}
            pass
            yield '<p>'
            yield escape(l_1_note)
            yield '</p>'
        l_1_note = missing
        yield '</div>\n'
    yield '\n<h2 id="help">Students to look at first</h2>\n'
    if environment.getattr((undefined(name='counted') if l_0_counted is missing else l_0_counted), 'help'):
        pass
        yield '<p class="muted small">The '
        yield escape((undefined(name='lowest') if l_0_lowest is missing else l_0_lowest))
        yield ' lowest grades, and every student whose grade is provisional, whose code tried what it does not own, whose code did not run to a verdict or whose grade was overridden; lowest first. Click a column\'s name to sort by it (again, from the other end).</p>\n<div class="scroll">\n<table id="help-table" data-sorted="score">\n  <thead><tr><th><a href="#sort=student">Student</a></th><th><a href="#sort=score">Score</a></th><th><a href="#sort=status">Status</a></th><th><a href="#sort=-flags">Why</a></th><th>Submitted by</th></tr></thead>\n  <tbody>\n'
        for l_1_h in environment.getattr((undefined(name='counted') if l_0_counted is missing else l_0_counted), 'help'):
            _loop_vars = {}
            pass
            yield '  <tr data-student="'
            yield escape(environment.getattr(l_1_h, 'student'))
            yield '" data-score="'
            yield escape(environment.getattr(l_1_h, 'percent'))
            yield '" data-status="'
            yield escape(environment.getattr(l_1_h, 'status'))
            yield '" data-flags="'
            yield escape(environment.getattr(l_1_h, 'flags'))
            yield '"><td><a href="'
            yield escape(environment.getattr(l_1_h, 'href'))
            yield '">'
            yield escape(environment.getattr(l_1_h, 'student'))
            yield '</a></td><td class="pts">'
            yield escape(environment.getattr(l_1_h, 'score'))
            yield ' ('
            yield escape(environment.getattr(l_1_h, 'percent'))
            yield '%)</td><td class="st st-'
            yield escape(environment.getattr(l_1_h, 'status'))
            yield '">'
            yield escape(t_3(context.eval_ctx, environment.getattr(l_1_h, 'status'), '_', ' '))
            yield '</td><td class="small">'
            for l_2_r in environment.getattr(l_1_h, 'reasons'):
                _loop_vars = {}
                pass
                yield '<span class="flag'
                yield escape((' flag-hostile' if context.call(environment.getattr(l_2_r, 'startswith'), 'hostile', _loop_vars=_loop_vars) else cond_expr_undefined("the inline if-expression on line 57 in 'summary.html.j2' evaluated to false and no else section was defined.")))
                yield escape((' flag-provisional' if context.call(environment.getattr(l_2_r, 'startswith'), 'provisional', _loop_vars=_loop_vars) else cond_expr_undefined("the inline if-expression on line 57 in 'summary.html.j2' evaluated to false and no else section was defined.")))
                yield '">'
                yield escape(l_2_r)
                yield '</span>'
            l_2_r = missing
            yield '</td><td class="small">'
            yield escape(environment.getattr(l_1_h, 'who'))
            yield '</td></tr>\n'
        l_1_h = missing
        yield '  </tbody>\n</table>\n</div>\n'
    else:
        pass
        yield '<p class="muted">No student graded yet.</p>\n'
    yield '\n<h2 id="histogram">Score distribution</h2>\n'
    if environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'readable'):
        pass
        yield '<svg class="chart hist" viewBox="0 0 520 150" width="520" height="150" role="img" aria-label="Histogram of scores in percent">\n'
        for l_1_b in (undefined(name='bins') if l_0_bins is missing else l_0_bins):
            _loop_vars = {}
            pass
            yield '  <g><title>'
            yield escape(environment.getattr(l_1_b, 'label'))
            yield ': '
            yield escape(environment.getattr(l_1_b, 'count'))
            yield ' submission'
            yield escape(('' if (environment.getattr(l_1_b, 'count') == 1) else 's'))
            yield '</title>\n  <rect x="'
            yield escape((environment.getattr(l_1_b, 'x') + 4))
            yield '" y="'
            yield escape(environment.getattr(l_1_b, 'y'))
            yield '" width="44" height="'
            yield escape(environment.getattr(l_1_b, 'height'))
            yield '"></rect>\n'
            if environment.getattr(l_1_b, 'count'):
                pass
                yield '<text x="'
                yield escape((environment.getattr(l_1_b, 'x') + 26))
                yield '" y="'
                yield escape(((environment.getattr(l_1_b, 'y') - 3) if (environment.getattr(l_1_b, 'y') > 12) else (environment.getattr(l_1_b, 'y') + 12)))
                yield '" class="v"'
                yield escape((Markup(' style="fill:#fff"') if (environment.getattr(l_1_b, 'y') <= 12) else cond_expr_undefined("the inline if-expression on line 72 in 'summary.html.j2' evaluated to false and no else section was defined.")))
                yield '>'
                yield escape(environment.getattr(l_1_b, 'count'))
                yield '</text>'
            yield '  <text x="'
            yield escape((environment.getattr(l_1_b, 'x') + 26))
            yield '" y="145" class="axis">'
            yield escape(environment.getattr(l_1_b, 'label'))
            yield '</text></g>\n'
        l_1_b = missing
        yield '</svg>\n<p class="muted small">Percent of the maximum score, over the '
        yield escape(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'readable'))
        yield ' readable submissions.'
        if environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'by_mistakes'):
            pass
            yield ' '
            yield escape(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'by_mistakes'))
            yield ' of them counted by mistakes: their named causes explain every failing check and each cost its price once, so their score is more than the sum of their check points (the “Counted by” column below).'
        yield '</p>\n'
    else:
        pass
        yield '<p class="muted">No submission could be graded.</p>\n'
    yield '\n<h2 id="checks">Pass rate per check</h2>\n<div class="scroll">\n<table class="checks">\n  <thead><tr><th>Check</th><th>Points</th><th>Passed</th><th>Other outcomes</th></tr></thead>\n  <tbody>\n'
    for l_1_c in (undefined(name='checks') if l_0_checks is missing else l_0_checks):
        _loop_vars = {}
        pass
        yield '  <tr>\n    <td><code>'
        yield escape(environment.getattr(l_1_c, 'id'))
        yield '</code><div class="title">'
        yield escape(environment.getattr(l_1_c, 'title'))
        yield '</div></td>\n    <td class="pts">'
        yield escape(environment.getattr(l_1_c, 'points'))
        yield '</td>\n    <td class="pts"><span class="rate"><span style="width:'
        yield escape(environment.getattr(l_1_c, 'rate'))
        yield '%"></span></span>'
        yield escape(environment.getattr(l_1_c, 'passed'))
        yield ' / '
        yield escape(environment.getattr(l_1_c, 'ran'))
        yield ' ('
        yield escape(environment.getattr(l_1_c, 'rate'))
        yield '%)</td>\n    <td class="small">'
        yield escape((environment.getattr(l_1_c, 'others') or '—'))
        yield '</td>\n  </tr>\n'
    l_1_c = missing
    yield '  </tbody>\n</table>\n</div>\n\n<h2 id="patterns">Most common failure patterns: root causes</h2>\n'
    if (undefined(name='causes') if l_0_causes is missing else l_0_causes):
        pass
        yield '<p class="muted small">Each submission counted once under every root cause its report names (a crash, a change to the correct head, a known bug), not by the exact set of checks it failed.</p>\n<table>\n  <thead><tr><th>Root cause</th><th>Submissions</th><th>Examples</th></tr></thead>\n  <tbody>\n'
        l_1_loop = missing
        for l_1_c, l_1_loop in LoopContext((undefined(name='causes') if l_0_causes is missing else l_0_causes), undefined):
            _loop_vars = {}
            pass
            yield '  <tr>\n    <td><strong>'
            yield escape(environment.getattr(l_1_c, 'title'))
            yield '</strong>'
            if environment.getattr(l_1_c, 'id'):
                pass
                yield ' <span class="chip">'
                yield escape(environment.getattr(l_1_c, 'id'))
                yield '</span>'
            yield '<div class="title">'
            yield escape(environment.getattr(l_1_c, 'hint'))
            yield '</div></td>\n    <td class="pts">'
            yield escape(environment.getattr(l_1_c, 'count'))
            yield ' ('
            yield escape(environment.getattr(l_1_c, 'share'))
            yield '%)</td>\n    <td class="small">'
            l_2_loop = missing
            for (l_2_sid, l_2_href), l_2_loop in LoopContext(environment.getattr(l_1_c, 'examples'), undefined):
                _loop_vars = {}
                pass
                yield '<a href="'
                yield escape(l_2_href)
                yield '">'
                yield escape(l_2_sid)
                yield '</a>'
                yield escape((', ' if (not environment.getattr(l_2_loop, 'last')) else cond_expr_undefined("the inline if-expression on line 108 in 'summary.html.j2' evaluated to false and no else section was defined.")))
            l_2_loop = l_2_sid = l_2_href = missing
            yield escape((', …' if (environment.getattr(l_1_c, 'count') > t_2(environment.getattr(l_1_c, 'examples'))) else cond_expr_undefined("the inline if-expression on line 108 in 'summary.html.j2' evaluated to false and no else section was defined.")))
            yield '</td>\n  </tr>\n'
        l_1_loop = l_1_c = missing
        yield '  </tbody>\n</table>\n'
    else:
        pass
        yield '<p class="muted">No readable submission failed a check.</p>\n'
    yield '\n<h2 id="provisional">Provisional grades</h2>\n'
    if (undefined(name='provisional') if l_0_provisional is missing else l_0_provisional):
        pass
        yield '<p class="muted small">A timeout (a busy machine can cause one) or the grader\'s own error: look at these before you trust them, and grade them again with <code>grade batch SUBMISSIONS --out OUT --regrade '
        l_1_loop = missing
        for l_1_r, l_1_loop in LoopContext((undefined(name='provisional') if l_0_provisional is missing else l_0_provisional), undefined):
            _loop_vars = {}
            pass
            yield escape(environment.getattr(l_1_r, 'id'))
            yield escape((' ' if (not environment.getattr(l_1_loop, 'last')) else cond_expr_undefined("the inline if-expression on line 119 in 'summary.html.j2' evaluated to false and no else section was defined.")))
        l_1_loop = l_1_r = missing
        yield '</code> (or <code>--retry timeouts</code>).</p>\n<table>\n  <thead><tr><th>Id</th><th>Status</th><th>Score</th><th>First problem</th></tr></thead>\n  <tbody>\n'
        for l_1_r in (undefined(name='provisional') if l_0_provisional is missing else l_0_provisional):
            _loop_vars = {}
            pass
            yield '  <tr><td><a href="'
            yield escape(environment.getattr(l_1_r, 'href'))
            yield '">'
            yield escape(environment.getattr(l_1_r, 'id'))
            yield '</a></td><td class="st st-'
            yield escape(environment.getattr(l_1_r, 'status'))
            yield '">'
            yield escape(t_3(context.eval_ctx, environment.getattr(l_1_r, 'status'), '_', ' '))
            yield '</td><td class="pts">'
            yield escape(environment.getattr(l_1_r, 'score'))
            yield '</td><td class="small">'
            yield escape(environment.getattr(l_1_r, 'headline'))
            yield '</td></tr>\n'
        l_1_r = missing
        yield '  </tbody>\n</table>\n'
    else:
        pass
        yield '<p class="muted">None: no grade timed out or met the grader\'s own error.</p>\n'
    yield '\n'
    if (undefined(name='attempted') if l_0_attempted is missing else l_0_attempted):
        pass
        yield '<h2 id="hostile">Hostile attempts</h2>\n<p class="muted small">What these submissions\' code tried beyond what it owns, as their workers counted it (the sandbox denied every read and write outside their folders). For you only: no student\'s report, nor any classmate\'s, says it.</p>\n<table>\n  <thead><tr><th>Id</th><th>Attempts</th><th>What</th></tr></thead>\n  <tbody>\n'
        for l_1_a in (undefined(name='attempted') if l_0_attempted is missing else l_0_attempted):
            _loop_vars = {}
            pass
            yield '  <tr><td><a href="'
            yield escape(environment.getattr(l_1_a, 'href'))
            yield '">'
            yield escape(environment.getattr(l_1_a, 'id'))
            yield '</a></td><td class="pts">'
            yield escape(environment.getattr(l_1_a, 'total'))
            yield '</td><td class="small">'
            yield escape(environment.getattr(l_1_a, 'words'))
            yield '</td></tr>\n'
        l_1_a = missing
        yield '  </tbody>\n</table>\n'
    yield '\n<h2 id="problems">Slowest and raising submissions</h2>\n<h3>Timed out, raised or unreadable</h3>\n'
    if (undefined(name='problems') if l_0_problems is missing else l_0_problems):
        pass
        yield '<table>\n  <thead><tr><th>Id</th><th>Status</th><th>Time</th><th>First problem</th></tr></thead>\n  <tbody>\n'
        for l_1_r in (undefined(name='problems') if l_0_problems is missing else l_0_problems):
            _loop_vars = {}
            pass
            yield '  <tr><td><a href="'
            yield escape(environment.getattr(l_1_r, 'href'))
            yield '">'
            yield escape(environment.getattr(l_1_r, 'id'))
            yield '</a></td><td class="st st-'
            yield escape(environment.getattr(l_1_r, 'status'))
            yield '">'
            yield escape(t_3(context.eval_ctx, environment.getattr(l_1_r, 'status'), '_', ' '))
            yield '</td><td class="pts">'
            yield escape(environment.getattr(l_1_r, 'duration'))
            yield '</td><td class="small">'
            yield escape(environment.getattr(l_1_r, 'headline'))
            yield '</td></tr>\n'
        l_1_r = missing
        yield '  </tbody>\n</table>\n'
    else:
        pass
        yield '<p class="muted">None: every submission ran to a verdict on every check.</p>\n'
    yield '<h3 style="margin-top:18px">Slowest</h3>\n<table>\n  <thead><tr><th>Id</th><th>Time</th><th>Score</th><th>Status</th></tr></thead>\n  <tbody>\n'
    for l_1_r in (undefined(name='slowest') if l_0_slowest is missing else l_0_slowest):
        _loop_vars = {}
        pass
        yield '  <tr><td><a href="'
        yield escape(environment.getattr(l_1_r, 'href'))
        yield '">'
        yield escape(environment.getattr(l_1_r, 'id'))
        yield '</a></td><td class="pts">'
        yield escape(environment.getattr(l_1_r, 'duration'))
        yield '</td><td class="pts">'
        yield escape(environment.getattr(l_1_r, 'score'))
        yield '</td><td class="st st-'
        yield escape(environment.getattr(l_1_r, 'status'))
        yield '">'
        yield escape(t_3(context.eval_ctx, environment.getattr(l_1_r, 'status'), '_', ' '))
        yield '</td></tr>\n'
    l_1_r = missing
    yield '  </tbody>\n</table>\n\n<h2 id="uncounted">Not graded, not counted</h2>\n'
    if (((undefined(name='left') if l_0_left is missing else l_0_left) or (undefined(name='pending') if l_0_pending is missing else l_0_pending)) or environment.getattr((undefined(name='counted') if l_0_counted is missing else l_0_counted), 'superseded')):
        pass
        if (undefined(name='left') if l_0_left is missing else l_0_left):
            pass
            yield '<h3>Not graded</h3>\n<table>\n  <thead><tr><th>Entry</th><th>Why</th></tr></thead>\n  <tbody>\n'
            for l_1_x in (undefined(name='left') if l_0_left is missing else l_0_left):
                _loop_vars = {}
                pass
                yield '<tr><td class="mono">'
                yield escape(environment.getattr(l_1_x, 'name'))
                yield '</td><td class="small">'
                yield escape(environment.getattr(l_1_x, 'reason'))
                yield '</td></tr>'
            l_1_x = missing
            yield '  </tbody>\n</table>\n'
        if (undefined(name='pending') if l_0_pending is missing else l_0_pending):
            pass
            yield '<h3 style="margin-top:18px">Not graded yet</h3>\n<p class="small">'
            yield escape(t_2((undefined(name='pending') if l_0_pending is missing else l_0_pending)))
            yield ' student'
            yield escape(('' if (t_2((undefined(name='pending') if l_0_pending is missing else l_0_pending)) == 1) else 's'))
            yield ' (the run is under way or was interrupted; run it again to grade the rest): '
            yield escape(t_1(context.eval_ctx, (undefined(name='pending') if l_0_pending is missing else l_0_pending), ', '))
            yield '</p>\n'
        if environment.getattr((undefined(name='counted') if l_0_counted is missing else l_0_counted), 'superseded'):
            pass
            yield '<h3 style="margin-top:18px">Superseded submissions</h3>\n<p class="muted small">Students who handed in more than once are graded on their '
            yield escape(environment.getattr((undefined(name='counted') if l_0_counted is missing else l_0_counted), 'pick'))
            yield ' submission (<code>--pick latest|best</code>); the others are graded too, listed here and in <a href="superseded.csv">superseded.csv</a>, and not counted.</p>\n<table>\n  <thead><tr><th>Submission</th><th>Student</th><th>Score</th><th>Handed in</th><th>Counted instead</th></tr></thead>\n  <tbody>\n'
            for l_1_x in environment.getattr((undefined(name='counted') if l_0_counted is missing else l_0_counted), 'superseded'):
                _loop_vars = {}
                pass
                yield '  <tr><td><a href="'
                yield escape(environment.getattr(l_1_x, 'href'))
                yield '">'
                yield escape(environment.getattr(l_1_x, 'id'))
                yield '</a></td><td>'
                yield escape(environment.getattr(l_1_x, 'student'))
                yield '</td><td class="pts">'
                yield escape(environment.getattr(l_1_x, 'score'))
                yield '</td><td class="small">'
                yield escape((environment.getattr(l_1_x, 'submitted_at') or 'unknown'))
                if environment.getattr(l_1_x, 'dated_by'):
                    pass
                    yield ' ('
                    yield escape(environment.getattr(l_1_x, 'dated_by'))
                    yield ')'
                yield '</td><td><a href="'
                yield escape(environment.getattr(l_1_x, 'counted_href'))
                yield '">'
                yield escape(environment.getattr(l_1_x, 'counted'))
                yield '</a></td></tr>\n'
            l_1_x = missing
            yield '  </tbody>\n</table>\n'
    else:
        pass
        yield '<p class="muted">Every entry of the folder was graded, and every student handed in once.</p>\n'
    yield '\n'
    if environment.getattr((undefined(name='counted') if l_0_counted is missing else l_0_counted), 'overrides'):
        pass
        yield '<h2 id="overrides">Overrides</h2>\n<p class="muted small">From the overrides file (student, check or total, points, reason); every export applies them.</p>\n<table>\n  <thead><tr><th>Student</th><th>Of</th><th>Points</th><th>Reason</th></tr></thead>\n  <tbody>\n'
        for l_1_x in environment.getattr((undefined(name='counted') if l_0_counted is missing else l_0_counted), 'overrides'):
            _loop_vars = {}
            pass
            yield '  <tr><td><a href="'
            yield escape(environment.getattr(l_1_x, 'href'))
            yield '">'
            yield escape(environment.getattr(l_1_x, 'student'))
            yield '</a></td><td><code>'
            yield escape(environment.getattr(l_1_x, 'what'))
            yield '</code></td><td class="pts">'
            yield escape(environment.getattr(l_1_x, 'before'))
            yield ' → '
            yield escape(environment.getattr(l_1_x, 'after'))
            yield '</td><td class="small">'
            yield escape(environment.getattr(l_1_x, 'reason'))
            yield '</td></tr>\n'
        l_1_x = missing
        yield '  </tbody>\n</table>\n'
    yield '\n<h2 id="all">All reports</h2>\n<div class="scroll">\n<table>\n  <thead><tr><th>Id</th><th>Submitted by</th><th>Score</th><th>%</th><th>Counted by</th><th>Status</th><th>Time</th></tr></thead>\n  <tbody>\n'
    for l_1_r in (undefined(name='rows') if l_0_rows is missing else l_0_rows):
        _loop_vars = {}
        pass
        yield '  <tr><td><a href="'
        yield escape(environment.getattr(l_1_r, 'href'))
        yield '">'
        yield escape(environment.getattr(l_1_r, 'id'))
        yield '</a></td><td class="small">'
        yield escape(environment.getattr(l_1_r, 'who'))
        yield '</td><td class="pts">'
        yield escape(environment.getattr(l_1_r, 'score'))
        yield '</td><td class="pts">'
        yield escape(environment.getattr(l_1_r, 'percent'))
        yield '</td><td class="small"'
        if environment.getattr(l_1_r, 'scoring_note'):
            pass
            yield ' title="'
            yield escape(environment.getattr(l_1_r, 'scoring_note'))
            yield '"'
        yield '>'
        yield escape(environment.getattr(l_1_r, 'scoring'))
        yield '</td><td class="st st-'
        yield escape(environment.getattr(l_1_r, 'status'))
        yield '">'
        yield escape(t_3(context.eval_ctx, environment.getattr(l_1_r, 'status'), '_', ' '))
        yield '</td><td class="pts">'
        yield escape(environment.getattr(l_1_r, 'duration'))
        yield '</td></tr>\n'
    l_1_r = missing
    yield '  </tbody>\n</table>\n</div>\n\n<footer>\n  <dl>\n    <dt>Grades</dt><dd><a href="grades.csv">grades.csv</a> (one row per student: id, score, max_score, scoring, score_by_checks, points per check, status, the submission counted, when, a note). The score is the grade, overrides applied; counted by mistakes, it is more than the sum of the check columns (score_by_checks). <a href="gradebook.csv">gradebook.csv</a>: name, e-mail, id, rounded score, max, late, status (<code>grade gradebook OUT --format canvas|moodle</code> for an LMS\'s columns).</dd>\n    <dt>Statuses</dt><dd>'
    l_1_loop = missing
    for (l_1_status, l_1_count, l_1_meaning), l_1_loop in LoopContext((undefined(name='by_status') if l_0_by_status is missing else l_0_by_status), undefined):
        _loop_vars = {}
        pass
        yield '<strong>'
        yield escape(t_3(context.eval_ctx, l_1_status, '_', ' '))
        yield '</strong>: '
        yield escape(l_1_meaning)
        yield escape(('; ' if (not environment.getattr(l_1_loop, 'last')) else cond_expr_undefined("the inline if-expression on line 228 in 'summary.html.j2' evaluated to false and no else section was defined.")))
    l_1_loop = l_1_status = l_1_count = l_1_meaning = missing
    yield '</dd>\n  </dl>\n</footer>\n</main>\n<script>'
    yield escape(t_4((undefined(name='script') if l_0_script is missing else l_0_script)))
    yield '</script>\n</body>\n</html>\n'

blocks = {}
debug_info = '6=60&7=62&9=64&25=71&27=73&28=75&29=77&30=80&31=82&32=84&36=87&37=95&40=107&43=115&45=118&50=127&51=130&56=132&57=136&67=175&69=178&70=182&71=188&72=194&73=206&76=212&86=224&88=228&89=232&90=234&91=242&99=246&104=250&106=254&107=264&108=269&118=287&119=291&123=298&124=302&132=320&138=323&139=327&147=338&151=341&152=345&163=363&164=367&170=381&171=383&176=386&180=396&182=399&184=405&186=408&190=410&191=414&200=439&206=442&207=446&218=461&219=465&228=492&232=502'