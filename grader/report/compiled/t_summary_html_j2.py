# Made by `python -m grader.report.compiled` from grader/report/templates/summary.html.j2: do not edit.
FINGERPRINT = "ab9d0a95df950c4ca50d5d9d0258df61563a841abb30760b3de206b1be0c2a44"
from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'summary.html.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_rubric = resolve('rubric')
    l_0_stats = resolve('stats')
    l_0_by_status = resolve('by_status')
    l_0_notes = resolve('notes')
    l_0_bins = resolve('bins')
    l_0_checks = resolve('checks')
    l_0_causes = resolve('causes')
    l_0_problems = resolve('problems')
    l_0_slowest = resolve('slowest')
    l_0_rows = resolve('rows')
    try:
        t_1 = environment.filters['length']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'length' found.")
    try:
        t_2 = environment.filters['replace']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'replace' found.")
    try:
        t_3 = environment.filters['safe']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'safe' found.")
    try:
        t_4 = environment.tests['none']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No test named 'none' found.")
    pass
    yield '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>Class overview — '
    yield escape((undefined(name='rubric') if l_0_rubric is missing else l_0_rubric))
    yield '</title>\n<style>\n'
    template = environment.get_template('_style.css.j2', 'summary.html.j2')
    gen = template.root_render_func(template.new_context(context.get_all(), True, {}))
    try:
        for event in gen:
            yield event
    finally: gen.close()
    yield '.hist rect{fill:var(--accent)}\n.hist text{text-anchor:middle}\n.rate{display:inline-block;width:120px;height:10px;background:var(--soft);border:1px solid var(--line);border-radius:5px;overflow:hidden;vertical-align:middle;margin-right:6px}\n.rate>span{display:block;height:100%;background:var(--pass)}\n.st-graded{color:var(--pass)}.st-did_not_import,.st-raised_every_call,.st-raised_in_some_checks,.st-invalid,.st-grader_error{color:var(--fail)}\n</style>\n</head>\n<body>\n<main>\n<header class="top">\n  <h1>Class overview</h1>\n  <p class="muted">'
    yield escape((undefined(name='rubric') if l_0_rubric is missing else l_0_rubric))
    yield '</p>\n  <div class="scorebox">\n    <div class="score">'
    yield escape(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'submissions'))
    yield ' <small>submissions</small></div>\n'
    if (not t_4(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'mean'))):
        pass
        yield '    <div class="score">'
        yield escape(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'mean'))
        yield '% <small>mean</small></div>\n    <div class="score">'
        yield escape(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'median'))
        yield '% <small>median</small></div>\n    <div class="score">'
        yield escape(environment.getattr((undefined(name='stats') if l_0_stats is missing else l_0_stats), 'full'))
        yield ' <small>full marks</small></div>\n'
    yield '  </div>\n  <p>\n'
    def t_5(fiter):
        for (l_1_status, l_1_count, l_1_meaning) in fiter:
            if l_1_count:
                yield (l_1_status, l_1_count, l_1_meaning)
    for (l_1_status, l_1_count, l_1_meaning) in t_5((undefined(name='by_status') if l_0_by_status is missing else l_0_by_status)):
        _loop_vars = {}
        pass
        yield '    <span class="chip'
        yield escape((' warn' if (l_1_status != 'graded') else cond_expr_undefined("the inline if-expression on line 31 in 'summary.html.j2' evaluated to false and no else section was defined.")))
        yield '" title="'
        yield escape(l_1_meaning)
        yield '"><span class="st st-'
        yield escape(l_1_status)
        yield '">'
        yield escape(l_1_count)
        yield '</span> '
        yield escape(t_2(context.eval_ctx, l_1_status, '_', ' '))
        yield '</span>\n'
    l_1_status = l_1_count = l_1_meaning = missing
    yield '  </p>\n  <nav class="toc"><a href="#histogram">Scores</a><a href="#checks">Checks</a><a href="#patterns">Root causes</a><a href="#problems">Slow and raising</a><a href="#all">All reports</a></nav>\n</header>\n\n'
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
                yield escape((Markup(' style="fill:#fff"') if (environment.getattr(l_1_b, 'y') <= 12) else cond_expr_undefined("the inline if-expression on line 49 in 'summary.html.j2' evaluated to false and no else section was defined.")))
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
                yield escape((', ' if (not environment.getattr(l_2_loop, 'last')) else cond_expr_undefined("the inline if-expression on line 85 in 'summary.html.j2' evaluated to false and no else section was defined.")))
            l_2_loop = l_2_sid = l_2_href = missing
            yield escape((', …' if (environment.getattr(l_1_c, 'count') > t_1(environment.getattr(l_1_c, 'examples'))) else cond_expr_undefined("the inline if-expression on line 85 in 'summary.html.j2' evaluated to false and no else section was defined.")))
            yield '</td>\n  </tr>\n'
        l_1_loop = l_1_c = missing
        yield '  </tbody>\n</table>\n'
    else:
        pass
        yield '<p class="muted">No readable submission failed a check.</p>\n'
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
            yield escape(t_2(context.eval_ctx, environment.getattr(l_1_r, 'status'), '_', ' '))
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
        yield escape(t_2(context.eval_ctx, environment.getattr(l_1_r, 'status'), '_', ' '))
        yield '</td></tr>\n'
    l_1_r = missing
    yield '  </tbody>\n</table>\n\n<h2 id="all">All reports</h2>\n<div class="scroll">\n<table>\n  <thead><tr><th>Id</th><th>Submitted by</th><th>Score</th><th>%</th><th>Counted by</th><th>Status</th><th>Time</th></tr></thead>\n  <tbody>\n'
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
        yield escape(t_2(context.eval_ctx, environment.getattr(l_1_r, 'status'), '_', ' '))
        yield '</td><td class="pts">'
        yield escape(environment.getattr(l_1_r, 'duration'))
        yield '</td></tr>\n'
    l_1_r = missing
    yield '  </tbody>\n</table>\n</div>\n\n<footer>\n  <dl>\n    <dt>Grades</dt><dd><a href="grades.csv">grades.csv</a> (id, score, max_score, scoring, score_by_checks, points per check, status). The score is the grade; counted by mistakes, it is more than the sum of the check columns (score_by_checks).</dd>\n    <dt>Statuses</dt><dd>'
    l_1_loop = missing
    for (l_1_status, l_1_count, l_1_meaning), l_1_loop in LoopContext((undefined(name='by_status') if l_0_by_status is missing else l_0_by_status), undefined):
        _loop_vars = {}
        pass
        yield '<strong>'
        yield escape(t_2(context.eval_ctx, l_1_status, '_', ' '))
        yield '</strong>: '
        yield escape(l_1_meaning)
        yield escape(('; ' if (not environment.getattr(l_1_loop, 'last')) else cond_expr_undefined("the inline if-expression on line 133 in 'summary.html.j2' evaluated to false and no else section was defined.")))
    l_1_loop = l_1_status = l_1_count = l_1_meaning = missing
    yield '</dd>\n  </dl>\n</footer>\n</main>\n</body>\n</html>\n'

blocks = {}
debug_info = '6=46&8=48&20=55&22=57&23=59&24=62&25=64&26=66&30=69&31=77&37=89&39=92&44=101&46=104&47=108&48=114&49=120&50=132&53=138&63=150&65=154&66=158&67=160&68=168&76=172&81=176&83=180&84=190&85=195&96=213&100=216&101=220&112=238&113=242&123=256&124=260&133=287'