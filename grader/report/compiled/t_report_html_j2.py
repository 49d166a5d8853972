# Made by `python -m grader.report.compiled` from grader/report/templates/report.html.j2: do not edit.
FINGERPRINT = "80cbed4d8d47db661e061b50b7636d6a96453436c396390fed6fb033950b1547"
from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'report.html.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_score_line = resolve('score_line')
    l_0_r = resolve('r')
    l_0_viridis = resolve('viridis')
    l_0_diverging = resolve('diverging')
    l_0_percent = resolve('percent')
    l_0_diagnosis_error_line = resolve('diagnosis_error_line')
    l_0_pending_line = resolve('pending_line')
    l_0_scoring_line = resolve('scoring_line')
    l_0_tally = resolve('tally')
    l_0_problems = resolve('problems')
    l_0_withheld_problems = resolve('withheld_problems')
    l_0_w = resolve('w')
    l_0_sentence = resolve('sentence')
    l_0_checks = resolve('checks')
    l_0_visuals_problem = resolve('visuals_problem')
    l_0_visuals = resolve('visuals')
    l_0_s = resolve('s')
    l_0_sentence_maps = resolve('sentence_maps')
    l_0_kernel_panels = resolve('kernel_panels')
    l_0_all_kernel_maps = resolve('all_kernel_maps')
    l_0_sc = resolve('sc')
    l_0_charts = resolve('charts')
    l_0_scale_rows = resolve('scale_rows')
    l_0_output_note = resolve('output_note')
    l_0_output_text = resolve('output_text')
    l_0_output_cut = resolve('output_cut')
    l_0_draw = missing
    try:
        t_1 = environment.filters['code']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'code' found.")
    try:
        t_2 = environment.filters['dictsort']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'dictsort' found.")
    try:
        t_3 = environment.filters['join']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'join' found.")
    try:
        t_4 = environment.filters['length']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'length' found.")
    try:
        t_5 = environment.filters['lower']
    except KeyError:
        @internalcode
        def t_5(*unused):
            raise TemplateRuntimeError("No filter named 'lower' found.")
    try:
        t_6 = environment.filters['min']
    except KeyError:
        @internalcode
        def t_6(*unused):
            raise TemplateRuntimeError("No filter named 'min' found.")
    try:
        t_7 = environment.filters['sig']
    except KeyError:
        @internalcode
        def t_7(*unused):
            raise TemplateRuntimeError("No filter named 'sig' found.")
    try:
        t_8 = environment.tests['none']
    except KeyError:
        @internalcode
        def t_8(*unused):
            raise TemplateRuntimeError("No test named 'none' found.")
    pass
    l_0_draw = context.vars['draw'] = environment.get_template('_macros.j2', 'report.html.j2')._get_default_module(context)
    context.exported_vars.discard('draw')
    yield '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; img-src data:">\n<title>'
    yield escape((undefined(name='score_line') if l_0_score_line is missing else l_0_score_line))
    yield ' · Step 4 feedback for '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'submission'))
    yield '</title>\n<style>\n'
    template = environment.get_template('_style.css.j2', 'report.html.j2')
    gen = template.root_render_func(template.new_context(context.get_all(), True, {'all_kernel_maps': l_0_all_kernel_maps, 'draw': l_0_draw, 's': l_0_s, 'sc': l_0_sc, 'sentence': l_0_sentence}))
    try:
        for event in gen:
            yield event
    finally: gen.close()
    yield '</style>\n</head>\n<body>\n<svg width="0" height="0" style="position:absolute" aria-hidden="true" focusable="false">\n<defs>\n<linearGradient id="g-weights">'
    l_1_loop = missing
    for l_1_c, l_1_loop in LoopContext((undefined(name='viridis') if l_0_viridis is missing else l_0_viridis), undefined):
        _loop_vars = {}
        pass
        yield '<stop offset="'
        yield escape((environment.getattr(l_1_loop, 'index0') / (t_4((undefined(name='viridis') if l_0_viridis is missing else l_0_viridis)) - 1)))
        yield '" stop-color="'
        yield escape(l_1_c)
        yield '"/>'
    l_1_loop = l_1_c = missing
    yield '</linearGradient>\n<linearGradient id="g-diff">'
    l_1_loop = missing
    for l_1_c, l_1_loop in LoopContext((undefined(name='diverging') if l_0_diverging is missing else l_0_diverging), undefined):
        _loop_vars = {}
        pass
        yield '<stop offset="'
        yield escape((environment.getattr(l_1_loop, 'index0') / (t_4((undefined(name='diverging') if l_0_diverging is missing else l_0_diverging)) - 1)))
        yield '" stop-color="'
        yield escape(l_1_c)
        yield '"/>'
    l_1_loop = l_1_c = missing
    yield '</linearGradient>\n<pattern id="p-masked" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#eef0f3"/><path d="M0 0V6" stroke="#b8bec8" stroke-width="2"/></pattern>\n<pattern id="p-nonfinite" width="8" height="8" patternUnits="userSpaceOnUse"><rect width="8" height="8" fill="#222"/><path d="M1 1L7 7M7 1L1 7" stroke="#fff" stroke-width="1.2"/></pattern>\n</defs>\n</svg>\n<main>\n<header class="top">\n<h1>Project Step 4 feedback: your causal self-attention head</h1>\n<div class="muted small">'
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'rubric'))
    yield '</div>\n<div class="scorebox">\n<div class="score">'
    yield escape(t_7(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'score')))
    yield ' <small>/ '
    yield escape(t_7(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'max_score')))
    yield ' points ('
    yield escape(('%.1f' % (undefined(name='percent') if l_0_percent is missing else l_0_percent)))
    yield '%)'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'pending_points'):
        pass
        yield ', '
        yield escape(t_7(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'pending_points')))
        yield ' pending'
    yield '</small></div>\n<div class="bar" role="img" aria-label="'
    yield escape(('%.1f' % (undefined(name='percent') if l_0_percent is missing else l_0_percent)))
    yield ' percent"><span style="width:'
    yield escape(('%.1f' % t_6(environment, [(undefined(name='percent') if l_0_percent is missing else l_0_percent), 100])))
    yield '%"></span></div>\n</div>\n'
    if (undefined(name='diagnosis_error_line') if l_0_diagnosis_error_line is missing else l_0_diagnosis_error_line):
        pass
        yield '<p class="diagnosis-error" role="alert"><strong>'
        yield escape((undefined(name='diagnosis_error_line') if l_0_diagnosis_error_line is missing else l_0_diagnosis_error_line))
        yield '</strong></p>'
    if (undefined(name='pending_line') if l_0_pending_line is missing else l_0_pending_line):
        pass
        yield '<p class="small pending"><strong>'
        yield escape((undefined(name='pending_line') if l_0_pending_line is missing else l_0_pending_line))
        yield '</strong></p>'
    if (undefined(name='scoring_line') if l_0_scoring_line is missing else l_0_scoring_line):
        pass
        yield '<p class="small scoring scoring-'
        yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'scoring'))
        yield '">'
        yield escape((undefined(name='scoring_line') if l_0_scoring_line is missing else l_0_scoring_line))
        if (environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'scoring') == 'mistakes'):
            pass
            yield ' <a href="#diagnosis">Causes and what each cost</a>.'
        yield '</p>'
    yield '<p class="small">\n'
    def t_9(fiter):
        for (l_1_status, l_1_n) in fiter:
            if l_1_n:
                yield (l_1_status, l_1_n)
    l_1_loop = missing
    for (l_1_status, l_1_n), l_1_loop in LoopContext(t_9(context.call(environment.getattr((undefined(name='tally') if l_0_tally is missing else l_0_tally), 'items'))), undefined):
        _loop_vars = {}
        pass
        yield '<span class="st st-'
        yield escape(l_1_status)
        yield '">'
        yield escape(environment.getitem(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'STATUS_GLYPH'), l_1_status))
        yield ' '
        yield escape(l_1_n)
        yield ' '
        yield escape(t_5(environment.getitem(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'STATUS_LABEL'), l_1_status)))
        yield '</span>'
        if (not environment.getattr(l_1_loop, 'last')):
            pass
            yield ' · '
    l_1_loop = l_1_status = l_1_n = missing
    yield '</p>\n<dl class="meta">\n<dt>Submission</dt><dd class="mono">'
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'submission'))
    yield '</dd>\n<dt>Seed</dt><dd class="mono">'
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'seed'))
    yield ' <span class="muted">(the same seed draws the same inputs; each failure\'s Reproduce line reruns it)</span></dd>\n<dt>Devices</dt><dd>'
    t_10 = 1
    for l_1_d in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'devices'):
        _loop_vars = {}
        pass
        yield '<span class="chip">'
        yield escape(l_1_d)
        yield '</span>'
        t_10 = 0
    l_1_d = missing
    if t_10:
        pass
        yield '<span class="muted">not recorded</span>'
    yield '</dd>\n<dt>Protections</dt><dd>'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'protections'):
        pass
        yield escape(t_4(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'protections')))
        yield ' active while your code ran (<a href="#run">listed below</a>)'
    else:
        pass
        yield '<span class="chip warn">none recorded</span>'
    yield '</dd>\n<dt>Grading time</dt><dd>'
    yield escape(('%.1f' % environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'duration_s')))
    yield ' s</dd>\n</dl>\n<nav class="toc" aria-label="Sections">\n<a href="#checks">Checks</a>\n'
    if (undefined(name='problems') if l_0_problems is missing else l_0_problems):
        pass
        yield '<a href="#failures">What went wrong ('
        yield escape(t_4((undefined(name='problems') if l_0_problems is missing else l_0_problems)))
        if (undefined(name='withheld_problems') if l_0_withheld_problems is missing else l_0_withheld_problems):
            pass
            yield '; '
            yield escape((undefined(name='withheld_problems') if l_0_withheld_problems is missing else l_0_withheld_problems))
            yield ' more hidden'
        yield ')</a>'
    yield '<a href="#visuals">Visualisations</a>\n<a href="#output">Your output</a>\n<a href="#reading">How to read this</a>\n</nav>\n</header>\n\n'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'diagnosis'):
        pass
        yield '<section aria-labelledby="diagnosis">\n<h2 id="diagnosis">Root causes</h2>\n'
        l_0_sentence = context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'causes_sentence'), (undefined(name='r') if l_0_r is missing else l_0_r))
        context.vars['sentence'] = l_0_sentence
        context.exported_vars.add('sentence')
        if (undefined(name='sentence') if l_0_sentence is missing else l_0_sentence):
            pass
            yield '<p><strong>'
            yield escape((undefined(name='sentence') if l_0_sentence is missing else l_0_sentence))
            yield '</strong></p>'
        l_1_loop = missing
        for l_1_d, l_1_loop in LoopContext(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'diagnosis'), undefined):
            _loop_vars = {}
            pass
            yield '<div class="callout warn" id="cause-'
            yield escape(environment.getattr(l_1_loop, 'index'))
            yield '">\n<p><strong>'
            yield escape(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'cause_line'), (undefined(name='r') if l_0_r is missing else l_0_r), environment.getattr(l_1_d, 'id'), _loop_vars=_loop_vars))
            yield '</strong>'
            if context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'price'), (undefined(name='r') if l_0_r is missing else l_0_r), l_1_d, _loop_vars=_loop_vars):
                pass
                yield ' <span class="chip deduction">'
                yield escape(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'price'), (undefined(name='r') if l_0_r is missing else l_0_r), l_1_d, _loop_vars=_loop_vars))
                yield '</span>'
            yield '</p>\n'
            if environment.getattr(l_1_d, 'where'):
                pass
                yield '<p class="where"><strong>'
                yield escape(t_1(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'where_line'), l_1_d, _loop_vars=_loop_vars)))
                yield '</strong></p>\n'
                if environment.getattr(environment.getattr(l_1_d, 'where'), 'context'):
                    pass
                    yield '<pre class="source" aria-label="your code around line '
                    yield escape(environment.getattr(environment.getattr(l_1_d, 'where'), 'line'))
                    yield '">'
                    for (l_2_n, l_2_text) in t_2(environment.getattr(environment.getattr(l_1_d, 'where'), 'context')):
                        _loop_vars = {}
                        pass
                        yield '<span class="src-line'
                        yield escape((' src-hl' if (l_2_n == environment.getattr(environment.getattr(l_1_d, 'where'), 'line')) else ''))
                        yield '">'
                        yield escape(('%4d' % l_2_n))
                        yield '  '
                        yield escape(l_2_text)
                        yield '</span>'
                    l_2_n = l_2_text = missing
                    yield '</pre>\n'
            if environment.getattr(l_1_d, 'departure'):
                pass
                if context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'seen_line'), l_1_d, _loop_vars=_loop_vars):
                    pass
                    yield '<p>'
                    yield escape(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'seen_line'), l_1_d, _loop_vars=_loop_vars))
                    yield '</p>'
                if (environment.getattr(environment.getattr(l_1_d, 'departure'), 'expected') or environment.getattr(environment.getattr(l_1_d, 'departure'), 'produced')):
                    pass
                    yield '<div class="stages">\n'
                    for (l_2_label, l_2_m) in ((context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'stage_caption'), environment.getattr(environment.getattr(l_1_d, 'departure'), 'stage'), _loop_vars=_loop_vars), environment.getattr(environment.getattr(l_1_d, 'departure'), 'expected')), ('What this line produced', environment.getattr(environment.getattr(l_1_d, 'departure'), 'produced'))):
                        _loop_vars = {}
                        pass
                        if l_2_m:
                            pass
                            yield '<figure class="stage"><figcaption class="small">'
                            yield escape(l_2_label)
                            yield ' (batch 0)</figcaption>\n<table class="matrix small mono">'
                            for l_3_row in l_2_m:
                                _loop_vars = {}
                                pass
                                yield '<tr>'
                                for l_4_v in l_3_row:
                                    _loop_vars = {}
                                    pass
                                    yield '<td>'
                                    yield escape(('–' if t_8(l_4_v) else t_7(l_4_v)))
                                    yield '</td>'
                                l_4_v = missing
                                yield '</tr>'
                            l_3_row = missing
                            yield '</table>\n</figure>\n'
                    l_2_label = l_2_m = missing
                    yield '</div>\n'
            yield '<p>'
            yield escape(environment.getattr(l_1_d, 'hint'))
            yield '</p>\n<p class="small muted">'
            yield escape(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'explains_line'), (undefined(name='r') if l_0_r is missing else l_0_r), environment.getattr(l_1_d, 'id'), _loop_vars=_loop_vars))
            yield '</p>\n'
            if environment.getattr(l_1_d, 'detail'):
                pass
                yield '<pre>'
                yield escape(environment.getattr(l_1_d, 'detail'))
                yield '</pre>'
            yield '</div>\n'
        l_1_loop = l_1_d = missing
        if context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'unexplained_line'), (undefined(name='r') if l_0_r is missing else l_0_r)):
            pass
            yield '<p class="callout warn">'
            yield escape(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'unexplained_line'), (undefined(name='r') if l_0_r is missing else l_0_r)))
            yield '</p>'
        if context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'diagnosis_complete_line'), (undefined(name='r') if l_0_r is missing else l_0_r)):
            pass
            yield '<p class="diagnosis-complete"><strong>'
            yield escape(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'diagnosis_complete_line'), (undefined(name='r') if l_0_r is missing else l_0_r)))
            yield '</strong></p>'
        yield '<p class="small muted">A change or a known bug is named only when your head behaves exactly like it on every input we probed. It is a strong hint, not a verdict: the checks below are what count.</p>\n'
        if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'diagnosis_steps'):
            pass
            yield '<details class="how-found"><summary>How these causes were found: '
            yield escape(t_4(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'diagnosis_steps')))
            yield ' steps, in the order they ran</summary>\n<ol class="small">\n'
            for l_1_st in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'diagnosis_steps'):
                _loop_vars = {}
                pass
                yield '<li><span class="mono">'
                yield escape(environment.getattr(l_1_st, 'name'))
                yield '</span>: '
                yield escape((environment.getattr(l_1_st, 'says') or 'a step of the diagnosis'))
                yield ' — '
                if environment.getattr(l_1_st, 'raised'):
                    pass
                    yield "<strong>raised</strong> (the grader's own error: what it would have found is missing)"
                elif environment.getattr(l_1_st, 'changed'):
                    pass
                    yield '<strong>found something</strong>'
                else:
                    pass
                    yield 'found nothing'
                if (environment.getattr(l_1_st, 'runs') > 1):
                    pass
                    yield ', '
                    yield escape(environment.getattr(l_1_st, 'runs'))
                    yield ' runs'
                yield ' ('
                yield escape(('%.2f' % environment.getattr(l_1_st, 'seconds')))
                yield ' s)</li>\n'
            l_1_st = missing
            yield '</ol>\n</details>\n'
        yield '</section>\n'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'notes'):
        pass
        yield '<div class="callout">'
        for l_1_n in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'notes'):
            _loop_vars = {}
            pass
            yield '<p>'
            yield escape(l_1_n)
            yield '</p>'
        l_1_n = missing
        yield '</div>\n'
    yield '\n<section aria-labelledby="checks">\n<h2 id="checks">Checks</h2>\n<div class="scroll">\n<table class="checks">\n<thead><tr><th>Status</th><th>Check</th><th>Points</th><th>Lecture result</th><th>What happened</th></tr></thead>\n<tbody>\n'
    for l_1_cv in (undefined(name='checks') if l_0_checks is missing else l_0_checks):
        l_1_crash = resolve('crash')
        l_1_c = missing
        _loop_vars = {}
        pass
        l_1_c = environment.getattr(l_1_cv, 'check')
        _loop_vars['c'] = l_1_c
        yield '<tr class="row-'
        yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'status'))
        yield '">\n<td><span class="st st-'
        yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'status'))
        yield '">'
        yield escape(environment.getattr(l_1_cv, 'glyph'))
        yield ' '
        yield escape(environment.getattr(l_1_cv, 'label'))
        yield '</span></td>\n<td><span class="mono">'
        yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'id'))
        yield '</span>'
        if (not environment.getattr(l_1_cv, 'withheld')):
            pass
            yield '<div class="title">'
            yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'title'))
            yield '</div>'
        yield '</td>\n<td class="pts">'
        yield escape(environment.getattr(l_1_cv, 'points'))
        yield '</td>\n'
        if environment.getattr(l_1_cv, 'withheld'):
            pass
            yield '<td class="cite muted">—</td>\n<td class="msg muted">'
            yield escape(environment.getattr(l_1_cv, 'withheld_note'))
            yield '</td>\n'
        else:
            pass
            yield '<td class="cite">'
            yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'cites'))
            yield '</td>\n'
            l_1_crash = context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'stopped_by'), (undefined(name='r') if l_0_r is missing else l_0_r), (undefined(name='c') if l_1_c is missing else l_1_c), _loop_vars=_loop_vars)
            _loop_vars['crash'] = l_1_crash
            yield '<td class="msg">'
            if (undefined(name='crash') if l_1_crash is missing else l_1_crash):
                pass
                yield 'Could not run: see <a href="#cause-'
                yield escape(environment.getitem(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'cause_numbers'), (undefined(name='r') if l_0_r is missing else l_0_r), _loop_vars=_loop_vars), (undefined(name='crash') if l_1_crash is missing else l_1_crash)))
                yield '">cause ('
                yield escape(environment.getitem(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'cause_numbers'), (undefined(name='r') if l_0_r is missing else l_0_r), _loop_vars=_loop_vars), (undefined(name='crash') if l_1_crash is missing else l_1_crash)))
                yield ')</a>'
            else:
                pass
                yield escape(t_1(environment.getattr(l_1_cv, 'headline')))
                if context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'is_problem'), (undefined(name='c') if l_1_c is missing else l_1_c), _loop_vars=_loop_vars):
                    pass
                    yield ' <a href="#'
                    yield escape(environment.getattr(l_1_cv, 'anchor'))
                    yield '">details</a>'
                elif environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'pending'):
                    pass
                    for l_2_ln in context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'body_lines'), (undefined(name='c') if l_1_c is missing else l_1_c), _loop_vars=_loop_vars):
                        _loop_vars = {}
                        pass
                        yield '<div class="small">'
                        yield escape(l_2_ln)
                        yield '</div>'
                    l_2_ln = missing
                if environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'causes'):
                    pass
                    yield '<div class="small">'
                    yield escape(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'pointer'), (undefined(name='r') if l_0_r is missing else l_0_r), (undefined(name='c') if l_1_c is missing else l_1_c), _loop_vars=_loop_vars))
                    yield '</div>'
            for l_2_n in environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'notes'):
                _loop_vars = {}
                pass
                yield '<div class="small muted">Note: '
                yield escape(t_1(l_2_n))
                yield '</div>'
            l_2_n = missing
            yield '</td>\n'
        yield '</tr>\n'
    l_1_cv = l_1_c = l_1_crash = missing
    yield '</tbody>\n</table>\n</div>\n</section>\n\n'
    if (undefined(name='problems') if l_0_problems is missing else l_0_problems):
        pass
        yield '<section aria-labelledby="failures">\n<h2 id="failures">What went wrong</h2>\n<p class="small muted">Each failing check, on the smallest input that shows the problem. The reproduce command reruns exactly this check on exactly these inputs.</p>\n'
        for l_1_cv in (undefined(name='problems') if l_0_problems is missing else l_0_problems):
            l_1_c = l_1_crash = missing
            _loop_vars = {}
            pass
            l_1_c = environment.getattr(l_1_cv, 'check')
            _loop_vars['c'] = l_1_c
            yield '<article class="card card-'
            yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'status'))
            yield '" id="'
            yield escape(environment.getattr(l_1_cv, 'anchor'))
            yield '">\n<h3><span class="st st-'
            yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'status'))
            yield '">'
            yield escape(environment.getattr(l_1_cv, 'glyph'))
            yield ' '
            yield escape(environment.getattr(l_1_cv, 'label'))
            yield '</span> <span class="mono">'
            yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'id'))
            yield '</span> <span class="muted small">· '
            yield escape(environment.getattr(l_1_cv, 'points'))
            yield ' '
            yield escape(('point' if (environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'max_score') == 1) else 'points'))
            yield '</span></h3>\n<div class="cites">Tests '
            yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'cites'))
            yield ': '
            yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'title'))
            yield '</div>\n'
            l_1_crash = context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'stopped_by'), (undefined(name='r') if l_0_r is missing else l_0_r), (undefined(name='c') if l_1_c is missing else l_1_c), _loop_vars=_loop_vars)
            _loop_vars['crash'] = l_1_crash
            if (undefined(name='crash') if l_1_crash is missing else l_1_crash):
                pass
                yield '<p class="headline">Could not run: see <a href="#cause-'
                yield escape(environment.getitem(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'cause_numbers'), (undefined(name='r') if l_0_r is missing else l_0_r), _loop_vars=_loop_vars), (undefined(name='crash') if l_1_crash is missing else l_1_crash)))
                yield '">cause ('
                yield escape(environment.getitem(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'cause_numbers'), (undefined(name='r') if l_0_r is missing else l_0_r), _loop_vars=_loop_vars), (undefined(name='crash') if l_1_crash is missing else l_1_crash)))
                yield ')</a>, shown once above.</p>\n'
            else:
                pass
                yield '<p class="headline">'
                yield escape(t_1(environment.getattr(l_1_cv, 'headline')))
                yield '</p>\n'
                if environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'causes'):
                    pass
                    yield '<p class="small"><a href="#diagnosis">'
                    yield escape(context.call(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'pointer'), (undefined(name='r') if l_0_r is missing else l_0_r), (undefined(name='c') if l_1_c is missing else l_1_c), _loop_vars=_loop_vars))
                    yield '</a></p>'
                for l_2_line in environment.getattr(l_1_cv, 'explanation'):
                    _loop_vars = {}
                    pass
                    yield '<p>'
                    yield escape(t_1(l_2_line))
                    yield '</p>'
                l_2_line = missing
                if environment.getattr(l_1_cv, 'comparison'):
                    pass
                    yield '<h4>Expected vs got</h4>\n<pre>'
                    yield escape(t_3(context.eval_ctx, environment.getattr(l_1_cv, 'comparison'), '\n'))
                    yield '</pre>\n'
            if (environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'counterexample') and (not (undefined(name='crash') if l_1_crash is missing else l_1_crash))):
                pass
                yield '<h4>Smallest failing input</h4>\n<div class="cx">'
                for (l_2_k, l_2_v) in context.call(environment.getattr(environment.getattr(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'counterexample'), 'shape'), 'items'), _loop_vars=_loop_vars):
                    _loop_vars = {}
                    pass
                    yield '<span>'
                    yield escape(l_2_k)
                    yield '='
                    yield escape(l_2_v)
                    yield '</span>'
                l_2_k = l_2_v = missing
                for (l_2_k, l_2_v) in context.call(environment.getattr(environment.getattr(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'counterexample'), 'params'), 'items'), _loop_vars=_loop_vars):
                    _loop_vars = {}
                    pass
                    yield '<span>'
                    yield escape(l_2_k)
                    yield '='
                    yield escape(l_2_v)
                    yield '</span>'
                l_2_k = l_2_v = missing
                yield '<span>'
                yield escape(environment.getattr(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'counterexample'), 'dtype'))
                yield '</span><span>seed '
                yield escape(environment.getattr(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'counterexample'), 'seed'))
                yield '</span></div>\n'
            if environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'reproduce'):
                pass
                yield '<h4>Reproduce</h4>\n<pre>'
                yield escape(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'reproduce'))
                yield '</pre>\n'
            for l_2_n in environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'notes'):
                _loop_vars = {}
                pass
                yield '<p class="small muted">Note: '
                yield escape(t_1(l_2_n))
                yield '</p>'
            l_2_n = missing
            if environment.getattr(l_1_cv, 'heatmaps'):
                pass
                yield '<h4>Attention weights on this input'
                if (environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'counterexample') and (context.call(environment.getattr(environment.getattr(environment.getattr((undefined(name='c') if l_1_c is missing else l_1_c), 'counterexample'), 'shape'), 'get'), 'B', 1, _loop_vars=_loop_vars) > 1)):
                    pass
                    yield ' (the batch element that fails)'
                yield '</h4>\n<div class="maps">\n'
                for l_2_m in environment.getattr(l_1_cv, 'heatmaps'):
                    _loop_vars = {}
                    pass
                    yield escape(context.call(environment.getattr((undefined(name='draw') if l_0_draw is missing else l_0_draw), 'heatmap'), l_2_m, _loop_vars=_loop_vars))
                l_2_m = missing
                yield '</div>\n'
                yield escape(context.call(environment.getattr((undefined(name='draw') if l_0_draw is missing else l_0_draw), 'legend'), environment.getattr(l_1_cv, 'heatmaps'), _loop_vars=_loop_vars))
                yield '\n'
            yield '</article>\n'
        l_1_cv = l_1_c = l_1_crash = missing
        yield '</section>\n'
    yield '\n<section aria-labelledby="visuals">\n<h2 id="visuals">Visualisations</h2>\n<p>Your head on real text and on controlled positional kernels, drawn next to the instructor\'s reference. These cost no points; they show what your functions compute.</p>\n'
    if (undefined(name='visuals_problem') if l_0_visuals_problem is missing else l_0_visuals_problem):
        pass
        yield '<p class="bad">'
        yield escape((undefined(name='visuals_problem') if l_0_visuals_problem is missing else l_0_visuals_problem))
        yield '</p>'
    if ((not (undefined(name='visuals') if l_0_visuals is missing else l_0_visuals)) and (not (undefined(name='visuals_problem') if l_0_visuals_problem is missing else l_0_visuals_problem))):
        pass
        yield '<p class="muted">No visualisation data in this result (the grader ran without it).</p>'
    if (undefined(name='visuals') if l_0_visuals is missing else l_0_visuals):
        pass
        for l_1_p in environment.getattr((undefined(name='visuals') if l_0_visuals is missing else l_0_visuals), 'problems'):
            _loop_vars = {}
            pass
            yield '<p class="bad">'
            yield escape(l_1_p)
            yield '</p>'
        l_1_p = missing
        if environment.getattr((undefined(name='visuals') if l_0_visuals is missing else l_0_visuals), 'sentence'):
            pass
            l_0_s = environment.getattr((undefined(name='visuals') if l_0_visuals is missing else l_0_visuals), 'sentence')
            context.vars['s'] = l_0_s
            context.exported_vars.add('s')
            yield '<h3>A short sentence</h3>\n<p>The sentence <q>'
            yield escape(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'text'))
            yield '</q>, one token per word. Each token gets a random embedding (fixed seed '
            yield escape(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'seed'))
            yield '; the same word always gets the same vector), plus a sinusoidal position vector (Section 6.2), so a repeated word still gets a different row at each position. Projections are random too: d='
            yield escape(environment.getattr(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'shape'), 'd'))
            yield ', d_k='
            yield escape(environment.getattr(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'shape'), 'd_k'))
            yield ', d_v='
            yield escape(environment.getattr(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'shape'), 'd_v'))
            yield '.</p>\n<div class="callout warn small"><strong>Nothing here is learned.</strong> The embeddings and projections are random, so any column, stripe or diagonal you see is an accident of the seed, and another seed would draw another pattern. Read the picture for its structure, not its meaning: a blank upper triangle, a first row of (1, 0, …, 0), and each row sharing one unit of weight among its permitted tokens (Section 9.2 explains these features).</div>\n'
            if environment.getattr(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'panel'), 'problem'):
                pass
                yield '<p class="bad">Your head: '
                yield escape(environment.getattr(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'panel'), 'problem'))
                yield '</p>'
            yield '<div class="maps">'
            for l_1_m in (undefined(name='sentence_maps') if l_0_sentence_maps is missing else l_0_sentence_maps):
                _loop_vars = {}
                pass
                yield escape(context.call(environment.getattr((undefined(name='draw') if l_0_draw is missing else l_0_draw), 'heatmap'), l_1_m, _loop_vars=_loop_vars))
            l_1_m = missing
            yield '</div>\n'
            if (not t_8(environment.getattr(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'panel'), 'max_abs_diff'))):
                pass
                yield '<p class="small">'
                if (environment.getattr(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'panel'), 'max_abs_diff') <= 1e-09):
                    pass
                    yield '<span class="ok">✓ Your weights match the reference\'s</span> (largest difference '
                    yield escape(t_7(environment.getattr(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'panel'), 'max_abs_diff'), 2))
                    yield ').'
                else:
                    pass
                    yield '<span class="bad">✗ Your weights differ from the reference\'s</span> by up to '
                    yield escape(t_7(environment.getattr(environment.getattr((undefined(name='s') if l_0_s is missing else l_0_s), 'panel'), 'max_abs_diff'), 3))
                    yield '.'
                yield '</p>\n'
            yield escape(context.call(environment.getattr((undefined(name='draw') if l_0_draw is missing else l_0_draw), 'legend'), (undefined(name='sentence_maps') if l_0_sentence_maps is missing else l_0_sentence_maps)))
            yield '\n'
        if environment.getattr((undefined(name='visuals') if l_0_visuals is missing else l_0_visuals), 'kernels'):
            pass
            yield '<h3>Gaussian positional kernels</h3>\n<p>Weights proportional to exp(−(i−j)²/(2h²)) on the permitted keys j ≤ i, each row normalised (Example 7.4, Exercise 7), for T='
            yield escape(environment.getattr(environment.getattr((undefined(name='visuals') if l_0_visuals is missing else l_0_visuals), 'kernels'), 'T'))
            yield ' and several bandwidths h. A small h keeps each query on itself (a diagonal); a large h spreads it evenly over its prefix (a running mean). Unlike the sentence above, this pattern has a known mathematical cause.</p>\n<div class="kernels">\n'
            for (l_1_p, l_1_maps) in (undefined(name='kernel_panels') if l_0_kernel_panels is missing else l_0_kernel_panels):
                _loop_vars = {}
                pass
                yield '<div class="kernel">\n<h4>'
                yield escape(environment.getattr(l_1_p, 'label'))
                yield '</h4>\n'
                if environment.getattr(l_1_p, 'problem'):
                    pass
                    yield '<p class="bad small">Yours: '
                    yield escape(environment.getattr(l_1_p, 'problem'))
                    yield '</p>'
                yield '<div class="maps">'
                for l_2_m in l_1_maps:
                    _loop_vars = {}
                    pass
                    yield escape(context.call(environment.getattr((undefined(name='draw') if l_0_draw is missing else l_0_draw), 'heatmap'), l_2_m, _loop_vars=_loop_vars))
                l_2_m = missing
                yield '</div>\n'
                if (not t_8(environment.getattr(l_1_p, 'max_abs_diff'))):
                    pass
                    yield '<p class="small">'
                    if (environment.getattr(l_1_p, 'max_abs_diff') <= 1e-09):
                        pass
                        yield '<span class="ok">✓ matches</span>'
                    else:
                        pass
                        yield '<span class="bad">✗ differs by up to '
                        yield escape(t_7(environment.getattr(l_1_p, 'max_abs_diff'), 3))
                        yield '</span>'
                    yield '</p>'
                yield '</div>\n'
            l_1_p = l_1_maps = missing
            yield '</div>\n'
            l_0_all_kernel_maps = []
            context.vars['all_kernel_maps'] = l_0_all_kernel_maps
            context.exported_vars.add('all_kernel_maps')
            for (l_1_p, l_1_maps) in (undefined(name='kernel_panels') if l_0_kernel_panels is missing else l_0_kernel_panels):
                _loop_vars = {}
                pass
                for l_2_m in l_1_maps:
                    l_2__ = missing
                    _loop_vars = {}
                    pass
                    l_2__ = context.call(environment.getattr((undefined(name='all_kernel_maps') if l_0_all_kernel_maps is missing else l_0_all_kernel_maps), 'append'), l_2_m, _loop_vars=_loop_vars)
                    _loop_vars['_'] = l_2__
                l_2_m = l_2__ = missing
            l_1_p = l_1_maps = missing
            yield escape(context.call(environment.getattr((undefined(name='draw') if l_0_draw is missing else l_0_draw), 'legend'), (undefined(name='all_kernel_maps') if l_0_all_kernel_maps is missing else l_0_all_kernel_maps)))
            yield '\n'
        if environment.getattr((undefined(name='visuals') if l_0_visuals is missing else l_0_visuals), 'scale'):
            pass
            l_0_sc = environment.getattr((undefined(name='visuals') if l_0_visuals is missing else l_0_visuals), 'scale')
            context.vars['sc'] = l_0_sc
            context.exported_vars.add('sc')
            yield '<h3>Score scale (Exercise 3)</h3>\n<p>Unit-variance random queries and keys, T='
            yield escape(environment.getattr((undefined(name='sc') if l_0_sc is missing else l_0_sc), 'T'))
            yield ', '
            yield escape(environment.getattr((undefined(name='sc') if l_0_sc is missing else l_0_sc), 'n_samples'))
            yield ' samples, seed '
            yield escape(environment.getattr((undefined(name='sc') if l_0_sc is missing else l_0_sc), 'seed'))
            yield ', causal entries only. A raw score q·k has standard deviation about √d_k (Lemma 5.5), so for large d_k the softmax saturates and one key takes almost all the weight (Proposition 5.1). Dividing by √d_k keeps the std near 1 whatever d_k is. Exact agreement with theory is not expected: these are finite samples.</p>\n'
            if environment.getattr((undefined(name='sc') if l_0_sc is missing else l_0_sc), 'problem'):
                pass
                yield '<p class="bad">Yours: '
                yield escape(environment.getattr((undefined(name='sc') if l_0_sc is missing else l_0_sc), 'problem'))
                yield '</p>'
            yield '<div class="legend">\n<span><svg width="26" height="10" aria-hidden="true"><path d="M0 5H26" stroke="#c85a00" stroke-width="2"/><rect x="9.5" y="1.5" width="7" height="7" fill="#c85a00"/></svg>raw (yours)</span>\n<span><svg width="26" height="10" aria-hidden="true"><path d="M0 5H26" stroke="#1f64a8" stroke-width="2"/><circle cx="13" cy="5" r="4" fill="#1f64a8"/></svg>scaled by 1/√d_k (yours)</span>\n<span><svg width="26" height="16" aria-hidden="true"><path d="M0 8H26" stroke="#555" stroke-width="1.5" stroke-dasharray="5 4"/><circle cx="13" cy="8" r="7" fill="none" stroke="#555" stroke-width="1.5"/></svg>large rings, dashed: reference</span>\n<span><svg width="26" height="10" aria-hidden="true"><path d="M0 5H26" stroke="#777" stroke-dasharray="2 3"/></svg>theory: √d_k and 1</span>\n</div>\n<div class="charts">'
            for l_1_c in (undefined(name='charts') if l_0_charts is missing else l_0_charts):
                _loop_vars = {}
                pass
                yield escape(context.call(environment.getattr((undefined(name='draw') if l_0_draw is missing else l_0_draw), 'chart'), l_1_c, _loop_vars=_loop_vars))
            l_1_c = missing
            yield '</div>\n<div class="scroll">\n<table class="num small">\n<thead><tr><th>d_k</th><th>√d_k</th><th></th><th>raw std</th><th>scaled std</th><th>raw max weight</th><th>scaled max weight</th></tr></thead>\n<tbody>\n'
            for l_1_row in (undefined(name='scale_rows') if l_0_scale_rows is missing else l_0_scale_rows):
                _loop_vars = {}
                pass
                yield '<tr><td>'
                yield escape(environment.getattr(l_1_row, 'd_k'))
                yield '</td><td>'
                yield escape(environment.getattr(l_1_row, 'sqrt'))
                yield '</td><td>yours</td>'
                for l_2_v in environment.getattr(l_1_row, 'yours'):
                    _loop_vars = {}
                    pass
                    yield '<td>'
                    yield escape(l_2_v)
                    yield '</td>'
                l_2_v = missing
                yield '</tr>\n<tr class="muted"><td></td><td></td><td>reference</td>'
                for l_2_v in environment.getattr(l_1_row, 'reference'):
                    _loop_vars = {}
                    pass
                    yield '<td>'
                    yield escape(l_2_v)
                    yield '</td>'
                l_2_v = missing
                yield '</tr>\n'
            l_1_row = missing
            yield '</tbody>\n</table>\n</div>\n'
    yield '</section>\n\n<section aria-labelledby="output">\n<h2 id="output">Your output</h2>\n<p class="small muted">'
    yield escape((undefined(name='output_note') if l_0_output_note is missing else l_0_output_note))
    yield '</p>\n'
    if (undefined(name='output_text') if l_0_output_text is missing else l_0_output_text):
        pass
        yield '<pre class="output">'
        yield escape((undefined(name='output_text') if l_0_output_text is missing else l_0_output_text))
        if (undefined(name='output_cut') if l_0_output_cut is missing else l_0_output_cut):
            pass
            yield '[… cut here …]'
        yield '</pre>'
    yield '</section>\n\n<footer id="reading">\n<h2>How to read this report</h2>\n<dl>\n'
    for (l_1_status, l_1_meaning) in context.call(environment.getattr(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'STATUS_MEANING'), 'items')):
        _loop_vars = {}
        pass
        yield '<dt><span class="st st-'
        yield escape(l_1_status)
        yield '">'
        yield escape(environment.getitem(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'STATUS_GLYPH'), l_1_status))
        yield ' '
        yield escape(environment.getitem(environment.getattr((undefined(name='w') if l_0_w is missing else l_0_w), 'STATUS_LABEL'), l_1_status))
        yield '</span></dt><dd>'
        yield escape(l_1_meaning)
        yield '</dd>\n'
    l_1_status = l_1_meaning = missing
    yield '</dl>\n<p>Heatmaps show the attention weight A_ij that query i (rows, top to bottom) gives to key j (columns, left to right). Weights use a viridis scale from 0 (dark) to 1 (yellow); differences use blue (yours smaller), white (equal) and orange (yours larger). Hatched cells are masked by causality and must be exactly 0; a red outline marks weight where the mask allows none.</p>\n<p>Lecture results are cited by number from Lecture 4. Report format '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'schema_version'))
    yield '; rubric “'
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'rubric'))
    yield '”.</p>\n<h2 id="run">About this run</h2>\n<p>Your code ran in a separate, isolated process; the grader compared its answers with the reference. Seed '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'seed'))
    yield ', devices: '
    yield escape((t_3(context.eval_ctx, environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'devices'), ', ') or 'not recorded'))
    yield '.</p>\n<p>Protections: '
    t_11 = 1
    for l_1_p in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'protections'):
        _loop_vars = {}
        pass
        yield '<span class="chip">'
        yield escape(l_1_p)
        yield '</span>'
        t_11 = 0
    l_1_p = missing
    if t_11:
        pass
        yield 'none recorded'
    yield '</p>\n'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'absent_protections'):
        pass
        yield '<p>Not available where this ran (the Linux sandbox has them): '
        for l_1_p in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'absent_protections'):
            _loop_vars = {}
            pass
            yield '<span class="chip warn">'
            yield escape(l_1_p)
            yield '</span>'
        l_1_p = missing
        yield '</p>'
    yield '</footer>\n</main>\n</body>\n</html>\n'

blocks = {}
debug_info = '1=86&8=89&10=93&17=101&18=112&26=122&28=124&29=136&31=140&32=145&33=150&35=161&38=183&39=185&40=188&41=200&42=208&46=210&53=221&56=224&57=227&58=233&59=237&60=239&61=247&62=250&63=252&65=255&68=269&69=271&70=276&72=279&73=282&74=285&75=287&82=304&83=306&84=308&87=315&88=320&90=326&91=329&93=331&99=359&100=362&109=371&110=376&111=379&112=381&113=387&114=395&115=397&117=400&119=405&120=407&121=410&122=439&132=450&136=453&137=457&138=460&139=464&140=476&141=480&142=482&143=485&145=492&146=494&147=499&148=506&150=509&153=511&155=514&157=537&159=540&161=542&162=549&163=552&165=556&167=562&177=568&178=573&179=576&180=578&181=585&182=587&184=591&186=601&187=607&188=613&189=616&191=627&193=629&195=632&197=634&199=638&200=640&201=646&202=652&206=667&207=681&209=683&210=685&212=689&213=695&220=701&225=707&226=711&227=723&238=734&239=736&246=745&250=759&252=763&253=768&254=780'