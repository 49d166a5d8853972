# Made by `python -m grader.report.compiled` from grader/report/templates/_macros.j2: do not edit.
FINGERPRINT = "2c986c7366b36bb447964d1a2ba0615176078beb7984254fe23a016b3b0048ee"
from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = '_macros.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_heatmap = l_0_legend = l_0_chart = missing
    try:
        t_1 = environment.filters['list']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'list' found.")
    try:
        t_2 = environment.filters['max']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'max' found.")
    try:
        t_3 = environment.filters['selectattr']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'selectattr' found.")
    try:
        t_4 = environment.tests['none']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No test named 'none' found.")
    pass
    yield '\n'
    def macro(l_1_m):
        t_5 = []
        if l_1_m is missing:
            l_1_m = undefined("parameter 'm' was not provided", name='m')
        pass
        t_5.extend((
            '<figure class="hm-fig" style="max-width:',
            escape(t_2(environment, [environment.getattr(l_1_m, 'width'), 180])),
            'px">\n<figcaption>',
            escape(environment.getattr(l_1_m, 'title')),
            '</figcaption>\n<svg class="hm" width="',
            escape(environment.getattr(l_1_m, 'width')),
            '" height="',
            escape(environment.getattr(l_1_m, 'height')),
            '" viewBox="0 0 ',
            escape(environment.getattr(l_1_m, 'width')),
            ' ',
            escape(environment.getattr(l_1_m, 'height')),
            '" role="img" aria-label="',
            escape(environment.getattr(l_1_m, 'title')),
            ': ',
            escape(environment.getattr(l_1_m, 'rows')),
            ' by ',
            escape(environment.getattr(l_1_m, 'cols')),
            ' heatmap">\n<text class="axis" x="',
            escape((environment.getattr(l_1_m, 'left') + ((environment.getattr(l_1_m, 'cols') * environment.getattr(l_1_m, 'size')) / 2))),
            '" y="11" text-anchor="middle">key j</text>\n<text class="axis" transform="translate(11 ',
            escape((environment.getattr(l_1_m, 'top') + ((environment.getattr(l_1_m, 'rows') * environment.getattr(l_1_m, 'size')) / 2))),
            ') rotate(-90)" text-anchor="middle">query i</text>\n',
        ))
        for (l_2_x, l_2_label) in environment.getattr(l_1_m, 'xticks'):
            _loop_vars = {}
            pass
            if environment.getattr(l_1_m, 'rotate_x'):
                pass
                t_5.extend((
                    '<text class="axis" transform="translate(',
                    escape(('%.1f' % l_2_x)),
                    ' ',
                    escape((environment.getattr(l_1_m, 'top') - 5)),
                    ') rotate(-55)">',
                    escape(l_2_label),
                    '</text>\n',
                ))
            else:
                pass
                t_5.extend((
                    '<text class="axis" x="',
                    escape(('%.1f' % l_2_x)),
                    '" y="',
                    escape((environment.getattr(l_1_m, 'top') - 6)),
                    '" text-anchor="middle">',
                    escape(l_2_label),
                    '</text>\n',
                ))
        l_2_x = l_2_label = missing
        for (l_2_y, l_2_label) in environment.getattr(l_1_m, 'yticks'):
            _loop_vars = {}
            pass
            t_5.extend((
                '<text class="axis" x="',
                escape((environment.getattr(l_1_m, 'left') - 5)),
                '" y="',
                escape(('%.1f' % (l_2_y + 4))),
                '" text-anchor="end">',
                escape(l_2_label),
                '</text>\n',
            ))
        l_2_y = l_2_label = missing
        t_5.extend((
            '<rect x="',
            escape(environment.getattr(l_1_m, 'left')),
            '" y="',
            escape(environment.getattr(l_1_m, 'top')),
            '" width="',
            escape((environment.getattr(l_1_m, 'cols') * environment.getattr(l_1_m, 'size'))),
            '" height="',
            escape((environment.getattr(l_1_m, 'rows') * environment.getattr(l_1_m, 'size'))),
            '" fill="#fff" stroke="#9aa1ad"/>\n',
        ))
        if environment.getattr(l_1_m, 'masked_path'):
            pass
            t_5.extend((
                '<path d="',
                escape(environment.getattr(l_1_m, 'masked_path')),
                '" fill="url(#p-masked)"><title>',
                escape(environment.getattr(l_1_m, 'masked_title')),
                '</title></path>\n',
            ))
        t_5.append(
            '<g class="cells">\n',
        )
        for (l_2_y, l_2_row) in environment.getattr(l_1_m, 'cell_rows'):
            _loop_vars = {}
            pass
            t_5.extend((
                '<g transform="translate(0 ',
                escape(l_2_y),
                ')">\n',
            ))
            for l_3_c in l_2_row:
                _loop_vars = {}
                pass
                t_5.extend((
                    '<rect x="',
                    escape(environment.getattr(l_3_c, 'x')),
                    '" width="',
                    escape(environment.getattr(l_1_m, 'size')),
                    '" height="',
                    escape(environment.getattr(l_1_m, 'size')),
                    '" fill="',
                    escape(environment.getattr(l_3_c, 'fill')),
                    '"><title>',
                    escape(environment.getattr(l_3_c, 'title')),
                    '</title></rect>\n',
                ))
            l_3_c = missing
            t_5.append(
                '</g>\n',
            )
        l_2_y = l_2_row = missing
        t_5.append(
            '</g>\n',
        )
        def t_6(fiter):
            for l_2_c in fiter:
                if (not t_4(environment.getattr(l_2_c, 'text'))):
                    yield l_2_c
        for l_2_c in t_6(environment.getattr(l_1_m, 'cells')):
            _loop_vars = {}
            pass
            t_5.extend((
                '<text class="v" x="',
                escape((environment.getattr(l_2_c, 'x') + (environment.getattr(l_1_m, 'size') // 2))),
                '" y="',
                escape(((environment.getattr(l_2_c, 'y') + (environment.getattr(l_1_m, 'size') // 2)) + 4)),
                '" fill="',
                escape(environment.getattr(l_2_c, 'ink')),
                '">',
                escape(environment.getattr(l_2_c, 'text')),
                '</text>\n',
            ))
        l_2_c = missing
        if environment.getattr(l_1_m, 'leak_path'):
            pass
            t_5.extend((
                '<path d="',
                escape(environment.getattr(l_1_m, 'leak_path')),
                '" fill="none" stroke="#fff" stroke-width="4"/>\n<path d="',
                escape(environment.getattr(l_1_m, 'leak_path')),
                '" fill="none" stroke="#d1001f" stroke-width="2"/>\n',
            ))
        t_5.extend((
            '<rect x="',
            escape(environment.getattr(l_1_m, 'left')),
            '" y="',
            escape((environment.getattr(l_1_m, 'grid_bottom') + 14)),
            '" width="',
            escape((environment.getattr(l_1_m, 'cols') * environment.getattr(l_1_m, 'size'))),
            '" height="9" fill="url(#',
            escape(environment.getattr(l_1_m, 'gradient')),
            ')" stroke="#9aa1ad" stroke-width=".5"/>\n<text class="axis" x="',
            escape(environment.getattr(l_1_m, 'left')),
            '" y="',
            escape((environment.getattr(l_1_m, 'grid_bottom') + 36)),
            '">',
            escape(environment.getattr(l_1_m, 'scale_lo')),
            '</text>\n',
        ))
        if (environment.getattr(l_1_m, 'kind') == 'difference'):
            pass
            t_5.extend((
                '<text class="axis" x="',
                escape((environment.getattr(l_1_m, 'left') + ((environment.getattr(l_1_m, 'cols') * environment.getattr(l_1_m, 'size')) / 2))),
                '" y="',
                escape((environment.getattr(l_1_m, 'grid_bottom') + 36)),
                '" text-anchor="middle">0</text>\n',
            ))
        t_5.extend((
            '<text class="axis" x="',
            escape((environment.getattr(l_1_m, 'left') + (environment.getattr(l_1_m, 'cols') * environment.getattr(l_1_m, 'size')))),
            '" y="',
            escape((environment.getattr(l_1_m, 'grid_bottom') + 36)),
            '" text-anchor="end">',
            escape(environment.getattr(l_1_m, 'scale_hi')),
            '</text>\n</svg>\n',
        ))
        if environment.getattr(l_1_m, 'caption'):
            pass
            t_5.extend((
                '<div class="note">',
                escape(environment.getattr(l_1_m, 'caption')),
                '</div>',
            ))
        if environment.getattr(l_1_m, 'nonfinite_count'):
            pass
            t_5.extend((
                '<div class="note">',
                escape(environment.getattr(l_1_m, 'nonfinite_count')),
                ' entr',
                escape(('ies are' if (environment.getattr(l_1_m, 'nonfinite_count') != 1) else 'y is')),
                ' not finite (NaN or ±inf).</div>',
            ))
        t_5.append(
            '</figure>\n',
        )
        return concat(t_5)
    context.exported_vars.add('heatmap')
    context.vars['heatmap'] = l_0_heatmap = Macro(environment, macro, 'heatmap', ('m',), False, False, False, context.eval_ctx.autoescape)
    yield '\n'
    def macro(l_1_maps):
        t_7 = []
        if l_1_maps is missing:
            l_1_maps = undefined("parameter 'maps' was not provided", name='maps')
        pass
        t_7.append(
            '<div class="legend">\n<span><svg width="44" height="10" aria-hidden="true"><rect width="44" height="10" fill="url(#g-weights)"/></svg>weight 0 → 1</span>\n',
        )
        if t_1(context.eval_ctx, t_3(context, l_1_maps, 'kind', 'equalto', 'difference')):
            pass
            t_7.append(
                '<span><svg width="44" height="10" aria-hidden="true"><rect width="44" height="10" fill="url(#g-diff)"/></svg>yours smaller · equal · yours larger</span>\n',
            )
        t_7.append(
            '<span><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" fill="url(#p-masked)" stroke="#9aa1ad"/></svg>masked (j &gt; i), exactly 0</span>\n<span><svg width="12" height="12" aria-hidden="true"><rect x="1" y="1" width="10" height="10" fill="#fff" stroke="#d1001f" stroke-width="2"/></svg>weight above the diagonal (not allowed)</span>\n',
        )
        if t_1(context.eval_ctx, t_3(context, l_1_maps, 'nonfinite_count')):
            pass
            t_7.append(
                '<span><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" fill="url(#p-nonfinite)"/></svg>not finite</span>\n',
            )
        t_7.append(
            '<span>Hover a cell for its exact value.</span>\n</div>\n',
        )
        return concat(t_7)
    context.exported_vars.add('legend')
    context.vars['legend'] = l_0_legend = Macro(environment, macro, 'legend', ('maps',), False, False, False, context.eval_ctx.autoescape)
    yield '\n'
    def macro(l_1_c):
        t_8 = []
        l_1_L = l_1_T = l_1_R = l_1_B = missing
        if l_1_c is missing:
            l_1_c = undefined("parameter 'c' was not provided", name='c')
        pass
        (l_1_L, l_1_T, l_1_R, l_1_B) = environment.getattr(l_1_c, 'plot')
        t_8.extend((
            '<figure>\n<figcaption>',
            escape(environment.getattr(l_1_c, 'title')),
            '</figcaption>\n<svg class="chart" width="',
            escape(environment.getattr(l_1_c, 'width')),
            '" height="',
            escape(environment.getattr(l_1_c, 'height')),
            '" viewBox="0 0 ',
            escape(environment.getattr(l_1_c, 'width')),
            ' ',
            escape(environment.getattr(l_1_c, 'height')),
            '" role="img" aria-label="',
            escape(environment.getattr(l_1_c, 'title')),
            ' against d_k">\n',
        ))
        for (l_2_y, l_2_label) in environment.getattr(l_1_c, 'yticks'):
            _loop_vars = {}
            pass
            t_8.extend((
                '<path d="M',
                escape((undefined(name='L') if l_1_L is missing else l_1_L)),
                ' ',
                escape(('%.1f' % l_2_y)),
                'H',
                escape((undefined(name='R') if l_1_R is missing else l_1_R)),
                '" stroke="#e6e9ef"/>\n<text class="axis" x="',
                escape(((undefined(name='L') if l_1_L is missing else l_1_L) - 6)),
                '" y="',
                escape(('%.1f' % (l_2_y + 4))),
                '" text-anchor="end">',
                escape(l_2_label),
                '</text>\n',
            ))
        l_2_y = l_2_label = missing
        for (l_2_x, l_2_label) in environment.getattr(l_1_c, 'xticks'):
            _loop_vars = {}
            pass
            t_8.extend((
                '<text class="axis" x="',
                escape(('%.1f' % l_2_x)),
                '" y="',
                escape(((undefined(name='B') if l_1_B is missing else l_1_B) + 16)),
                '" text-anchor="middle">',
                escape(l_2_label),
                '</text>\n',
            ))
        l_2_x = l_2_label = missing
        t_8.extend((
            '<path d="M',
            escape((undefined(name='L') if l_1_L is missing else l_1_L)),
            ' ',
            escape((undefined(name='T') if l_1_T is missing else l_1_T)),
            'V',
            escape((undefined(name='B') if l_1_B is missing else l_1_B)),
            'H',
            escape((undefined(name='R') if l_1_R is missing else l_1_R)),
            '" fill="none" stroke="#9aa1ad"/>\n<text class="axis" x="',
            escape((((undefined(name='L') if l_1_L is missing else l_1_L) + (undefined(name='R') if l_1_R is missing else l_1_R)) / 2)),
            '" y="',
            escape(((undefined(name='B') if l_1_B is missing else l_1_B) + 34)),
            '" text-anchor="middle">d_k (log scale)</text>\n<text class="axis" transform="translate(13 ',
            escape((((undefined(name='T') if l_1_T is missing else l_1_T) + (undefined(name='B') if l_1_B is missing else l_1_B)) / 2)),
            ') rotate(-90)" text-anchor="middle">',
            escape(environment.getattr(l_1_c, 'y_label')),
            '</text>\n',
        ))
        for (l_2_path, l_2_label) in environment.getattr(l_1_c, 'guides'):
            _loop_vars = {}
            pass
            t_8.extend((
                '<path d="',
                escape(l_2_path),
                '" fill="none" stroke="#777" stroke-width="1" stroke-dasharray="2 3"><title>theory: ',
                escape(l_2_label),
                '</title></path>\n',
            ))
        l_2_path = l_2_label = missing
        def t_9(fiter):
            for l_2_s in fiter:
                if environment.getattr(l_2_s, 'points'):
                    yield l_2_s
        for l_2_s in t_9(environment.getattr(l_1_c, 'series')):
            _loop_vars = {}
            pass
            t_8.extend((
                '<path d="',
                escape(environment.getattr(l_2_s, 'path')),
                '" fill="none" stroke="',
                escape(environment.getattr(l_2_s, 'colour')),
                '" stroke-width="',
                escape((1.5 if environment.getattr(l_2_s, 'dashed') else 2)),
                '"',
            ))
            if environment.getattr(l_2_s, 'dashed'):
                pass
                t_8.append(
                    ' stroke-dasharray="5 4"',
                )
            t_8.append(
                '/>\n',
            )
            for (l_3_x, l_3_y, l_3_title) in environment.getattr(l_2_s, 'points'):
                l_3_h = resolve('h')
                _loop_vars = {}
                pass
                if (environment.getattr(l_2_s, 'marker') == 'square'):
                    pass
                    l_3_h = (6.5 if environment.getattr(l_2_s, 'hollow') else 3.5)
                    _loop_vars['h'] = l_3_h
                    t_8.extend((
                        '<rect x="',
                        escape(('%.1f' % (l_3_x - (undefined(name='h') if l_3_h is missing else l_3_h)))),
                        '" y="',
                        escape(('%.1f' % (l_3_y - (undefined(name='h') if l_3_h is missing else l_3_h)))),
                        '" width="',
                        escape((2 * (undefined(name='h') if l_3_h is missing else l_3_h))),
                        '" height="',
                        escape((2 * (undefined(name='h') if l_3_h is missing else l_3_h))),
                        '" fill="',
                        escape(('none' if environment.getattr(l_2_s, 'hollow') else environment.getattr(l_2_s, 'colour'))),
                        '" stroke="',
                        escape(environment.getattr(l_2_s, 'colour')),
                        '" stroke-width="1.5"><title>',
                        escape(l_3_title),
                        '</title></rect>\n',
                    ))
                else:
                    pass
                    t_8.extend((
                        '<circle cx="',
                        escape(('%.1f' % l_3_x)),
                        '" cy="',
                        escape(('%.1f' % l_3_y)),
                        '" r="',
                        escape((7 if environment.getattr(l_2_s, 'hollow') else 4)),
                        '" fill="',
                        escape(('none' if environment.getattr(l_2_s, 'hollow') else environment.getattr(l_2_s, 'colour'))),
                        '" stroke="',
                        escape(environment.getattr(l_2_s, 'colour')),
                        '" stroke-width="1.5"><title>',
                        escape(l_3_title),
                        '</title></circle>\n',
                    ))
            l_3_x = l_3_y = l_3_title = l_3_h = missing
        l_2_s = missing
        t_8.append(
            '</svg>\n</figure>\n',
        )
        return concat(t_8)
    context.exported_vars.add('chart')
    context.vars['chart'] = l_0_chart = Macro(environment, macro, 'chart', ('c',), False, False, False, context.eval_ctx.autoescape)

blocks = {}
debug_info = '3=37&4=44&5=46&6=48&7=62&8=64&9=67&10=70&11=74&13=85&16=93&17=98&19=108&20=117&21=121&24=129&25=134&26=137&27=142&32=161&33=170&35=180&36=184&37=186&39=191&40=199&41=206&42=210&44=217&46=224&47=231&51=247&54=255&59=263&66=275&67=281&69=284&70=286&71=297&72=302&73=308&75=316&76=321&78=331&79=339&80=343&81=348&82=353&84=359&85=368&86=383&87=387&88=389&89=393&91=412'