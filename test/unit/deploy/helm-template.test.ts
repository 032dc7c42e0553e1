/**
 * The Helm template renderer of test/support/helm-template.ts, against what Helm (Go
 * text/template and Sprig) does for each construct the chart uses.
 */
import { mergeValues, renderTemplate, TemplateError, type Context } from '../../support/helm-template';

const context = (values: Record<string, unknown> = {}): Context => ({
  Values: values,
  Release: { Name: 'prod', Namespace: 'ai', Service: 'Helm', IsInstall: true },
  Chart: { Name: 'inference-platform', Version: '0.1.0', AppVersion: '0.1.0' },
});
const render = (source: string, values: Record<string, unknown> = {}, partials: string[] = []) => renderTemplate(source, context(values), partials);

describe('the Helm template renderer', () => {
  it('prints values, the release and the chart', () => {
    expect(render('a: {{ .Values.x.y }} {{ .Release.Name }} {{ .Release.Namespace }} {{ .Chart.Name }} {{ .Chart.AppVersion }} {{ .Release.Service }}', { x: { y: 3 } }))
      .toBe('a: 3 prod ai inference-platform 0.1.0 Helm');
  });

  it('prints a missing key as nothing, and fails on a field of nil as Helm does', () => {
    expect(render('[{{ .Values.missing }}]')).toBe('[]');
    expect(() => render('{{ .Values.missing.deeper }}')).toThrow(/nil pointer evaluating interface \{\}\.deeper/);
  });

  it('refuses to print a map, a list or a large number bare', () => {
    expect(() => render('{{ .Values.m }}', { m: { a: 1 } })).toThrow(/toYaml/);
    expect(() => render('{{ .Values.l }}', { l: [1] })).toThrow(/toYaml/);
    expect(() => render('{{ .Values.n }}', { n: 1_000_000 })).toThrow(/1e\+06/);
    expect(() => render('{{ .Values.n | quote }}', { n: 1_000_000 })).toThrow(/1e\+06/);
    expect(render('{{ .Values.n | quote }}', { n: '1000000' })).toBe('"1000000"');
  });

  it('trims whitespace with {{- and -}}', () => {
    expect(render('a:\n  {{- " b" }}\nc')).toBe('a: b\nc');
    expect(render('x  {{ "y" -}}  \n\n z')).toBe('x  yz');
    expect(render('a\n{{- /* a comment */}}\nb')).toBe('a\nb');
  });

  it('quote: Go quoting of strings, numbers and booleans; nothing for nil', () => {
    expect(render('{{ .Values.s | quote }} {{ .Values.n | quote }} {{ .Values.b | quote }} [{{ .Values.none | quote }}]', { s: 'say "hi"', n: 8080, b: false }))
      .toBe('"say \\"hi\\"" "8080" "false" []');
  });

  it('default: the given value unless empty (Sprig\'s empty: nil, "", 0, false, empty list or map)', () => {
    expect(render('{{ .Values.a | default "d" }} {{ .Values.b | default "d" }} {{ .Values.c | default "d" }} {{ .Values.e | default "d" }}', { a: 'x', b: '', c: 0, e: false }))
      .toBe('x d d d');
    expect(render('{{ .Values.tag | default .Chart.AppVersion }}', { tag: '' })).toBe('0.1.0');
  });

  it('toYaml | nindent N: sorted keys, no trailing newline, every line indented after a newline', () => {
    expect(render('r:\n  {{- toYaml .Values.r | nindent 2 }}\nz: 1', { r: { limits: { memory: '2Gi' }, a: [1, 2] } }))
      .toBe('r:\n  a:\n    - 1\n    - 2\n  limits:\n    memory: 2Gi\nz: 1');
    expect(render('{{ .Values.t | indent 3 }}', { t: 'a\nb' })).toBe('   a\n   b');
  });

  it('if / else if / else with Go\'s truthiness', () => {
    const source = '{{ if .Values.a }}A{{ else if .Values.b }}B{{ else }}C{{ end }}';
    expect(render(source, { a: 'x' })).toBe('A');
    expect(render(source, { a: '', b: [1] })).toBe('B');
    expect(render(source, { a: 0, b: {} })).toBe('C');
    expect(render(source, {})).toBe('C');
  });

  it('with: rebinds the dot, or takes else when empty', () => {
    expect(render('{{ with .Values.s }}<{{ . }}>{{ else }}none{{ end }}', { s: 'x' })).toBe('<x>');
    expect(render('{{ with .Values.s }}<{{ . }}>{{ else }}none{{ end }}', { s: '' })).toBe('none');
  });

  it('range over a list and over a map (keys sorted), with variables, $ and else', () => {
    expect(render('{{ range .Values.l }}[{{ . }}]{{ end }}', { l: ['a', 'b'] })).toBe('[a][b]');
    expect(render('{{ range $i, $v := .Values.l }}{{ $i }}={{ $v }};{{ end }}', { l: ['a', 'b'] })).toBe('0=a;1=b;');
    expect(render('{{ range $k, $v := .Values.m }}{{ $k }}={{ $v }} in {{ $.Release.Name }};{{ end }}', { m: { b: 2, a: 1 } })).toBe('a=1 in prod;b=2 in prod;');
    expect(render('{{ range .Values.l }}x{{ else }}empty{{ end }}', { l: [] })).toBe('empty');
    expect(render('{{ range .Values.missing }}x{{ end }}')).toBe('');
  });

  it('variables: declared with :=, visible to the end of their block and in nested ones', () => {
    expect(render('{{ $n := .Release.Name }}{{ if true }}{{ $n }}{{ end }}')).toBe('prod');
    expect(() => render('{{ if true }}{{ $n := 1 }}{{ end }}{{ $n }}')).toThrow(/undefined variable \$n/);
  });

  it('define and include, with the context passed', () => {
    const helpers = '{{- define "name" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end }}\n{{- define "labels" -}}\na: {{ include "name" . }}\nb: c\n{{- end }}';
    expect(render('metadata:\n  labels:\n    {{- include "labels" . | nindent 4 }}', {}, [helpers])).toBe('metadata:\n  labels:\n    a: prod-inference-platform\n    b: c');
    expect(() => render('{{ include "nope" . }}')).toThrow(/no template "nope"/);
  });

  it('printf, trunc, trimSuffix and parentheses', () => {
    expect(render('{{ printf "%s:%v/%d" "h" 5 7 }}')).toBe('h:5/7');
    expect(render('{{ .Values.o | default (printf "%s-%s" .Release.Name "x") | trunc 4 | trimSuffix "-" }}')).toBe('prod');
    expect(render('{{ "abc-" | trimSuffix "-" }}')).toBe('abc');
  });

  it('eq, ne, not, and, or', () => {
    expect(render('{{ eq .Values.p "s3" }} {{ ne .Values.p "s3" }} {{ not .Values.p }} {{ and .Values.p "" }}|{{ or "" .Values.p }}', { p: 's3' }))
      .toBe('true false false |s3');
    expect(render('{{ if and .Values.a (not .Values.b) }}yes{{ end }}', { a: 'url', b: '' })).toBe('yes');
  });

  it('required: the value, or Helm\'s error with the message', () => {
    expect(render('{{ required "need x" .Values.x | quote }}', { x: 'v' })).toBe('"v"');
    expect(() => render('{{ required "need x" .Values.x }}')).toThrow('execution error: need x');
  });

  it('fails on what it does not implement, rather than rendering something Helm would not', () => {
    expect(() => render('{{ .Values.x | upper }}', { x: 'a' })).toThrow(/function "upper" not defined/);
    expect(() => render('{{ if .Values.x }}')).toThrow(TemplateError);
    expect(() => render('{{ end }}')).toThrow(/unexpected/);
    expect(() => render('{{ .Values.x')).toThrow(/unclosed action/);
  });

  it('merges a values file over values.yaml as Helm does', () => {
    expect(mergeValues({ a: { b: 1, c: 2 }, l: [1, 2], d: 'x' }, { a: { c: 3 }, l: [9], d: null }))
      .toEqual({ a: { b: 1, c: 3 }, l: [9] });
  });
});
