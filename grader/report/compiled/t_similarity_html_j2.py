# Made by `python -m grader.report.compiled` from grader/report/templates/similarity.html.j2: do not edit.
FINGERPRINT = "b83f7f4cfca49b088fd6bf7d94e8044b5a68dca60c692d35b27496628e3ae6bd"
from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'similarity.html.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_r = resolve('r')
    l_0_flagged = resolve('flagged')
    l_0_bars = resolve('bars')
    l_0_cut_x = resolve('cut_x')
    l_0_cut = resolve('cut')
    l_0_groups = resolve('groups')
    l_0_shown = resolve('shown')
    l_0_more = resolve('more')
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
    pass
    yield '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>Class similarity (instructor only)</title>\n<style>\n'
    template = environment.get_template('_style.css.j2', 'similarity.html.j2')
    gen = template.root_render_func(template.new_context(context.get_all(), True, {}))
    try:
        for event in gen:
            yield event
    finally: gen.close()
    yield '.hist rect{fill:var(--accent)}\n.hist text{text-anchor:middle}\n.hist line.cut{stroke:var(--fail);stroke-width:2;stroke-dasharray:4 3}\n.pair{border:1px solid var(--line);border-radius:6px;padding:10px 12px;margin:16px 0}\n.pair.flagged{border-color:var(--fail)}\n.group{border:2px solid var(--fail);border-radius:6px;padding:10px 12px;margin:16px 0}\n.sides{display:grid;grid-template-columns:1fr 1fr;gap:10px}\n.sides pre{font-size:12px;max-height:520px;overflow:auto;margin:6px 0 0}\nmark{background:#ffe08a;color:inherit}\n@media (max-width:900px){.sides{grid-template-columns:1fr}}\n</style>\n</head>\n<body>\n<main>\n<header class="top">\n  <h1>Class similarity</h1>\n  <p class="muted">For the instructor only: never shown in a student\'s report or in Gradescope. A flagged pair is a lead to read, not a verdict.</p>\n  <div class="scorebox">\n    <div class="score">'
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'submissions'))
    yield ' <small>submissions</small></div>\n    <div class="score">'
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'pairs_total'))
    yield ' <small>pairs</small></div>\n    <div class="score">'
    yield escape((undefined(name='flagged') if l_0_flagged is missing else l_0_flagged))
    yield ' <small>flagged</small></div>\n    <div class="score">'
    yield escape(t_2(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'groups')))
    yield ' <small>group'
    yield escape(('' if (t_2(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'groups')) == 1) else 's'))
    yield ' of copies</small></div>\n  </div>\n  <nav class="toc"><a href="#histogram">Distribution</a><a href="#groups">Groups of copies</a><a href="#flagged">Flagged pairs</a><a href="#all">Pairs above the floor</a><a href="#method">How</a></nav>\n</header>\n\n'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'notes'):
        pass
        yield '<div class="callout warn">\n'
        for l_1_note in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'notes'):
            _loop_vars = {}
            pass
            yield '<p>'
            yield escape(l_1_note)
            yield '</p>'
        l_1_note = missing
        yield '</div>\n'
    yield '\n<h2 id="histogram">Similarity of every pair</h2>\n<svg class="chart hist" viewBox="0 0 600 160" width="600" height="160" role="img" aria-label="Histogram of pair similarities">\n'
    l_1_loop = missing
    for l_1_b, l_1_loop in LoopContext((undefined(name='bars') if l_0_bars is missing else l_0_bars), undefined):
        _loop_vars = {}
        pass
        yield '  <g><title>'
        yield escape(environment.getattr(l_1_b, 'label'))
        yield ': '
        yield escape(environment.getattr(l_1_b, 'count'))
        yield ' pair'
        yield escape(('' if (environment.getattr(l_1_b, 'count') == 1) else 's'))
        yield '</title>\n  <rect x="'
        yield escape((environment.getattr(l_1_b, 'x') + 2))
        yield '" y="'
        yield escape(environment.getattr(l_1_b, 'y'))
        yield '" width="'
        yield escape(((600 // t_2((undefined(name='bars') if l_0_bars is missing else l_0_bars))) - 4))
        yield '" height="'
        yield escape(environment.getattr(l_1_b, 'height'))
        yield '"></rect>\n'
        if environment.getattr(l_1_b, 'count'):
            pass
            yield '<text x="'
            yield escape((environment.getattr(l_1_b, 'x') + ((600 // t_2((undefined(name='bars') if l_0_bars is missing else l_0_bars))) // 2)))
            yield '" y="'
            yield escape(((environment.getattr(l_1_b, 'y') - 3) if (environment.getattr(l_1_b, 'y') > 12) else (environment.getattr(l_1_b, 'y') + 12)))
            yield '" class="v">'
            yield escape(environment.getattr(l_1_b, 'count'))
            yield '</text>'
        if ((environment.getattr(l_1_loop, 'index0') % 4) == 0):
            pass
            yield '<text x="'
            yield escape((environment.getattr(l_1_b, 'x') + 2))
            yield '" y="155" class="axis" style="text-anchor:start">'
            yield escape(('%.1f' % (environment.getattr(l_1_loop, 'index0') / t_2((undefined(name='bars') if l_0_bars is missing else l_0_bars)))))
            yield '</text>'
        yield '  </g>\n'
    l_1_loop = l_1_b = missing
    yield '  <text x="598" y="155" class="axis" style="text-anchor:end">1.0</text>\n  <line class="cut" x1="'
    yield escape((undefined(name='cut_x') if l_0_cut_x is missing else l_0_cut_x))
    yield '" x2="'
    yield escape((undefined(name='cut_x') if l_0_cut_x is missing else l_0_cut_x))
    yield '" y1="0" y2="140"><title>flagged from '
    yield escape(('%.2f' % (undefined(name='cut') if l_0_cut is missing else l_0_cut)))
    yield ' (median + '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'z_flag'))
    yield ' × scale)</title></line>\n</svg>\n<p class="muted small">Bar heights on a square-root scale. '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'pairs_matching'))
    yield ' of the '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'pairs_total'))
    yield " pairs share any passage once the course's code and the passages more than "
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'common'))
    yield ' independent submissions hold are removed; the others are at 0. '
    yield escape(('Among the matching pairs' if (environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'spread_over') == 'matching') else 'Over every pair (too few match to rank against them alone)'))
    yield ' the median is '
    yield escape(('%.3f' % environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'median')))
    yield ' and the MAD '
    yield escape(('%.3f' % environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'mad')))
    yield ' (quartiles '
    yield escape(('%.3f' % environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'q1')))
    yield ' and '
    yield escape(('%.3f' % environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'q3')))
    yield '); the highest pair is at '
    yield escape(('%.3f' % environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'max_similarity')))
    yield '. The dashed line is the cut-off for code alone, '
    yield escape(('%.2f' % (undefined(name='cut') if l_0_cut is missing else l_0_cut)))
    yield ': the median plus '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'z_flag'))
    yield ' robust deviations ('
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'z_flag'))
    yield ' × '
    yield escape(('%.3f' % environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'scale')))
    yield ').</p>\n\n<h2 id="groups">Groups of copies</h2>\n'
    if (undefined(name='groups') if l_0_groups is missing else l_0_groups):
        pass
        l_1_loop = missing
        for l_1_g, l_1_loop in LoopContext((undefined(name='groups') if l_0_groups is missing else l_0_groups), undefined):
            _loop_vars = {}
            pass
            yield '<section class="group" id="group-'
            yield escape(environment.getattr(l_1_g, 'id'))
            yield '">\n  <h3>Group '
            yield escape(environment.getattr(l_1_g, 'id'))
            yield ': '
            yield escape(t_2(environment.getattr(l_1_g, 'sides')))
            yield ' submissions</h3>\n  <p>Each has at least '
            yield escape(('%.0f' % (100 * environment.getattr(l_1_g, 'least_share'))))
            yield '% of its own code (what is left once the passages more than '
            yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wide'))
            yield " submissions hold are set aside) in passages another member shares: copies of one code, told apart from a skeleton or tutorial many follow, whose followers each write code of their own. The group counts once when the class's common code is learned, so its size does not hide it.</p>\n  <table>\n    <thead><tr><th>Member</th><th>Score</th><th>Causes</th></tr></thead>\n    <tbody>\n"
            l_2_loop = missing
            for l_2_m, l_2_loop in LoopContext(environment.getattr(l_1_g, 'sides'), undefined):
                _loop_vars = {}
                pass
                yield '    <tr><td>'
                if environment.getattr(l_2_m, 'href'):
                    pass
                    yield '<a href="'
                    yield escape(environment.getattr(l_2_m, 'href'))
                    yield '">'
                    yield escape(environment.getattr(l_2_m, 'id'))
                    yield '</a>'
                else:
                    pass
                    yield '<code>'
                    yield escape(environment.getattr(l_2_m, 'id'))
                    yield '</code>'
                yield '</td><td class="pts">'
                yield escape(environment.getattr(l_2_m, 'score'))
                yield '</td><td class="small">'
                l_3_loop = missing
                t_3 = 1
                for (l_3_cid, l_3_title), l_3_loop in LoopContext(environment.getattr(l_2_m, 'causes'), undefined):
                    _loop_vars = {}
                    pass
                    yield escape(l_3_title)
                    yield escape(('; ' if (not environment.getattr(l_3_loop, 'last')) else cond_expr_undefined("the inline if-expression on line 65 in 'similarity.html.j2' evaluated to false and no else section was defined.")))
                    t_3 = 0
                l_3_loop = l_3_cid = l_3_title = missing
                if t_3:
                    pass
                    yield 'none named'
                yield '</td></tr>\n'
            l_2_loop = l_2_m = missing
            yield '    </tbody>\n  </table>\n  <p class="muted small">Its '
            yield escape(environment.getattr(l_1_g, 'pairs'))
            yield ' pairs are flagged below'
            if (environment.getattr(l_1_g, 'shown_pairs') < environment.getattr(l_1_g, 'pairs')):
                pass
                yield ' (the first '
                yield escape(environment.getattr(l_1_g, 'shown_pairs'))
                yield ' side by side)'
            yield ' and in similarity.csv (column group = '
            yield escape(environment.getattr(l_1_g, 'id'))
            yield ').</p>\n</section>\n'
        l_1_loop = l_1_g = missing
    else:
        pass
        yield '<p class="muted">No group: no three submissions are copies of one code.</p>\n'
    yield '\n<h2 id="flagged">Flagged pairs</h2>\n'
    if (undefined(name='shown') if l_0_shown is missing else l_0_shown):
        pass
        l_1_loop = missing
        for l_1_s, l_1_loop in LoopContext((undefined(name='shown') if l_0_shown is missing else l_0_shown), undefined):
            _loop_vars = {}
            pass
            yield '<section class="pair flagged" id="pair-'
            yield escape(environment.getattr(l_1_loop, 'index'))
            yield '">\n  <h3>'
            yield escape(environment.getattr(l_1_loop, 'index'))
            yield '. <code>'
            yield escape(environment.getattr(environment.getattr(l_1_s, 'pair'), 'a'))
            yield '</code> and <code>'
            yield escape(environment.getattr(environment.getattr(l_1_s, 'pair'), 'b'))
            yield '</code>: '
            yield escape(('%.2f' % environment.getattr(environment.getattr(l_1_s, 'pair'), 'similarity')))
            yield ' <span class="chip warn">z = '
            yield escape(('%.1f' % environment.getattr(environment.getattr(l_1_s, 'pair'), 'z')))
            yield '</span>'
            if environment.getattr(environment.getattr(l_1_s, 'pair'), 'group'):
                pass
                yield ' <a class="chip deduction" href="#group-'
                yield escape(environment.getattr(environment.getattr(l_1_s, 'pair'), 'group'))
                yield '">group '
                yield escape(environment.getattr(environment.getattr(l_1_s, 'pair'), 'group'))
                yield '</a>'
            elif environment.getattr(environment.getattr(l_1_s, 'pair'), 'copies'):
                pass
                yield ' <span class="chip deduction">copies</span>'
            if environment.getattr(environment.getattr(l_1_s, 'pair'), 'rare_causes'):
                pass
                yield ' <span class="chip deduction">shared rare mistake</span>'
            yield '</h3>\n  <p>'
            yield escape(environment.getattr(l_1_s, 'why'))
            yield '</p>\n'
            if environment.getattr(environment.getattr(l_1_s, 'pair'), 'rare_words'):
                pass
                yield '<p><strong>'
                yield escape(environment.getattr(environment.getattr(l_1_s, 'pair'), 'rare_words'))
                yield '.</strong></p>'
            yield '  <p class="muted small">Normalised match '
            yield escape(('%.2f' % environment.getattr(environment.getattr(l_1_s, 'pair'), 'normalised')))
            yield ', verbatim match '
            yield escape(('%.2f' % environment.getattr(environment.getattr(l_1_s, 'pair'), 'verbatim')))
            yield '.</p>\n  <div class="sides">\n'
            l_2_loop = missing
            for l_2_side, l_2_loop in LoopContext((environment.getattr(l_1_s, 'a'), environment.getattr(l_1_s, 'b')), undefined):
                _loop_vars = {}
                pass
                yield '    <div>\n      <h4>'
                if environment.getattr(l_2_side, 'href'):
                    pass
                    yield '<a href="'
                    yield escape(environment.getattr(l_2_side, 'href'))
                    yield '">'
                    yield escape(environment.getattr(l_2_side, 'id'))
                    yield '</a>'
                else:
                    pass
                    yield escape(environment.getattr(l_2_side, 'id'))
                yield ' <span class="muted small">'
                yield escape(environment.getattr(l_2_side, 'score'))
                yield '</span></h4>\n      <p class="small">'
                if environment.getattr(l_2_side, 'causes'):
                    pass
                    yield 'Causes: '
                    l_3_loop = missing
                    for (l_3_cid, l_3_title), l_3_loop in LoopContext(environment.getattr(l_2_side, 'causes'), undefined):
                        _loop_vars = {}
                        pass
                        yield escape(l_3_title)
                        yield ' <span class="chip">'
                        yield escape(l_3_cid)
                        yield '</span>'
                        yield escape(('; ' if (not environment.getattr(l_3_loop, 'last')) else cond_expr_undefined("the inline if-expression on line 88 in 'similarity.html.j2' evaluated to false and no else section was defined.")))
                    l_3_loop = l_3_cid = l_3_title = missing
                else:
                    pass
                    yield 'No cause named.'
                yield '</p>\n      <p class="muted small">'
                yield escape(('%.0f' % (100 * environment.getattr(l_2_side, 'share'))))
                yield '% of this code matches'
                if environment.getattr(l_2_side, 'lines'):
                    pass
                    yield ' (lines '
                    yield escape(environment.getattr(l_2_side, 'lines'))
                    yield ')'
                yield '.</p>\n      <pre>'
                for (l_3_text, l_3_hl) in environment.getattr(l_2_side, 'pieces'):
                    _loop_vars = {}
                    pass
                    if l_3_hl:
                        pass
                        yield '<mark>'
                        yield escape(l_3_text)
                        yield '</mark>'
                    else:
                        pass
                        yield escape(l_3_text)
                l_3_text = l_3_hl = missing
                yield '</pre>\n    </div>\n'
            l_2_loop = l_2_side = missing
            yield '  </div>\n</section>\n'
        l_1_loop = l_1_s = missing
        if (undefined(name='more') if l_0_more is missing else l_0_more):
            pass
            yield '<p class="muted">'
            yield escape((undefined(name='more') if l_0_more is missing else l_0_more))
            yield ' more flagged pairs are listed in the table below and in similarity.csv.</p>'
    else:
        pass
        yield '<p class="muted">No pair stands out from this class: no pair\'s similarity is '
        yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'z_flag'))
        yield ' robust deviations above the median, nor '
        yield escape((environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'z_flag') - environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'rare_bonus')))
        yield ' with a shared rare mistake.</p>\n'
    yield '\n<h2 id="all">Pairs above the floor</h2>\n'
    if environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'pairs'):
        pass
        yield '<div class="scroll">\n<table>\n  <thead><tr><th>Pair</th><th>Similarity</th><th>z</th><th>Flagged</th><th>Group</th><th>Shared rare causes</th><th>Lines</th></tr></thead>\n  <tbody>\n'
        for l_1_p in environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'pairs'):
            l_1_spans = resolve('spans')
            _loop_vars = {}
            pass
            yield '  <tr><td><code>'
            yield escape(environment.getattr(l_1_p, 'a'))
            yield '</code> · <code>'
            yield escape(environment.getattr(l_1_p, 'b'))
            yield '</code></td><td class="pts">'
            yield escape(('%.3f' % environment.getattr(l_1_p, 'similarity')))
            yield '</td><td class="pts">'
            yield escape(('%.1f' % environment.getattr(l_1_p, 'z')))
            yield '</td><td>'
            yield escape(('yes' if environment.getattr(l_1_p, 'flagged') else ''))
            yield '</td><td>'
            yield escape((environment.getattr(l_1_p, 'group') or ('copies' if environment.getattr(l_1_p, 'copies') else '')))
            yield '</td><td class="small">'
            yield escape(t_1(context.eval_ctx, environment.getattr(l_1_p, 'rare_causes'), ', '))
            yield '</td><td class="small">'
            yield escape(context.call((undefined(name='spans') if l_1_spans is missing else l_1_spans), environment.getattr(l_1_p, 'lines_a'), _loop_vars=_loop_vars))
            yield ' · '
            yield escape(context.call((undefined(name='spans') if l_1_spans is missing else l_1_spans), environment.getattr(l_1_p, 'lines_b'), _loop_vars=_loop_vars))
            yield '</td></tr>\n'
        l_1_p = l_1_spans = missing
        yield '  </tbody>\n</table>\n</div>\n'
    else:
        pass
        yield '<p class="muted">No pair lies a robust deviation above the median.</p>\n'
    yield '\n<footer id="method">\n  <dl>\n    <dt>Matching</dt><dd>'
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'library'))
    yield ': winnowed fingerprints of Pygments tokens, in two passes. Normalised: names, strings and comments do not count, and a match must span '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'noise'))
    yield ' normalised characters. Verbatim: the raw text, matches of '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'verbatim_noise'))
    yield " characters. The code compared is what the grader kept of each submission (a notebook's definitions, not its demo cells).</dd>\n    <dt>Boilerplate</dt><dd>"
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'boilerplate_files'))
    yield " files of the course's own code. Both passes remove what students are given (the student template, and any file given with --boilerplate); the normalised pass also removes the reference and its correct variants, to which an honest head may normalise, while the verbatim pass keeps them: no student is given their text, so a leaked reference handed in twice shows there. Both passes also remove the passages that more than "
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'common'))
    yield ' independent submissions hold ('
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'common_dropped'))
    yield " in the normalised pass), which are nobody's: the class's common code, learned from the class. Copies of one code count once there: two submissions are copies when each has at least "
    yield escape(('%.0f' % (100 * environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'copy_share'))))
    yield '% of its own code (beyond the passages more than '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'wide'))
    yield ' submissions hold) and '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'copy_min'))
    yield " normalised characters of it in passages the other shares; three or more linked so are a group, so a ring of copies does not hide itself however large.</dd>\n    <dt>Similarity</dt><dd>The mean share of the two heads' code inside shared passages, from 0 to 1; the larger of the two passes. A head shorter than the class's median ("
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'floor'))
    yield " normalised characters) is measured against that median: a short head's similarity says how short it is.</dd>\n    <dt>Flagged</dt><dd>Copies, always; otherwise z = (similarity − median) / scale, over this class's "
    yield escape(('matching pairs' if (environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'spread_over') == 'matching') else 'pairs'))
    yield ' written apart (copies left out) (scale: 1.4826 × MAD, at least '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'scale_floor'))
    yield '); flagged at z ≥ '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'z_flag'))
    yield ', or z ≥ '
    yield escape((environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'z_flag') - environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'rare_bonus')))
    yield ' when the two share a cause that at most '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'rare_max'))
    yield ' of the '
    yield escape(environment.getattr((undefined(name='r') if l_0_r is missing else l_0_r), 'graded'))
    yield ' graded heads have (from each head\'s diagnosis).</dd>\n    <dt>Files</dt><dd><a href="similarity.csv">similarity.csv</a> (a, b, similarity, flagged, rare_causes, lines_a, lines_b, group): every pair above the floor of one robust deviation, and every flagged pair. Line numbers are of the code compared, shown above: for a .py its own lines; for a notebook the module the grader made of it, whose <code># ---- cell N ----</code> lines name the cells.</dd>\n  </dl>\n</footer>\n</main>\n</body>\n</html>\n'

blocks = {}
debug_info = '8=32&27=39&28=41&29=43&30=45&35=49&37=52&43=62&44=66&45=72&46=80&47=89&51=99&53=107&56=133&57=136&58=140&59=142&60=146&64=151&65=155&69=185&77=200&78=203&79=207&80=209&81=233&82=235&83=241&85=246&87=250&88=263&89=280&90=288&96=304&98=312&102=317&107=320&108=325&119=349&120=355&121=367&122=369'