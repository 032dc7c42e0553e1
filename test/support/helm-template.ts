/**
 * A renderer for the subset of Helm's templates (Go text/template + a few Sprig functions) that
 * deploy/helm/inference-platform uses, since `helm` cannot be installed where this is built.
 * Exactly this is supported; anything else is an error naming it, so a chart change that needs
 * more fails its tests instead of rendering something Helm would not:
 *
 * - text, `{{ pipeline }}`, trim markers `{{- ` and ` -}}`, comments `{{/* … *\/}}`;
 * - `if` / `else if` / `else` / `end`, `with` / `else` / `end`, `range` over a list or a map
 *   (keys in sorted order, as Go does), with `$v :=` or `$k, $v :=`, and `else` when empty;
 * - `define "name"` … `end` in `_*.tpl` files, `include "name" ctx`;
 * - `$x := pipeline`, `$x`, `$` (the root), field chains `.a.b`, `$x.a`, `$.a`, `(pipeline)`;
 * - string (double-quoted), integer and `true`/`false`/`nil` literals;
 * - functions: quote, default, toYaml, nindent, indent, printf (%s %d %v), trunc, trimSuffix,
 *   eq, ne, not, and, or, required, b64enc.
 *
 * Helm's behaviours kept: a missing map key is nil and prints as "" (Helm erases `<no value>`);
 * a field of nil is an error ("nil pointer evaluating"); truthiness is Go's (false, 0, nil, "",
 * empty list or map are false); `toYaml` drops the trailing newline; `quote` of nil is "".
 * Printing a number of 1e6 or more (bare or through `quote`) is an error: Helm reads values as
 * float64s and would print it as 1e+06; such a value must be a string in the values. Values files merge over values.yaml as Helm's do (maps merge,
 * anything else replaces, null removes the key).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';

type Value = unknown;
type Scope = Map<string, Value>;

interface Pipeline { kind: 'pipeline'; declare?: string; commands: Term[][] }
type Term =
  | { kind: 'field'; base: 'dot' | 'root' | string; path: string[] }
  | { kind: 'literal'; value: Value }
  | { kind: 'ident'; name: string }
  | { kind: 'paren'; pipeline: Pipeline; path: string[] };
type Node =
  | { kind: 'text'; text: string }
  | { kind: 'output'; pipeline: Pipeline }
  | { kind: 'if'; branches: { condition: Pipeline; body: Node[] }[]; otherwise: Node[] }
  | { kind: 'with'; pipeline: Pipeline; body: Node[]; otherwise: Node[] }
  | { kind: 'range'; pipeline: Pipeline; keyVar?: string; valueVar?: string; body: Node[]; otherwise: Node[] };

export class TemplateError extends Error {}

// ---------------------------------------------------------------- lexing actions and text

interface Piece { kind: 'text' | 'action'; text: string }

function pieces(source: string, file: string): Piece[] {
  const out: Piece[] = [];
  let position = 0;
  while (position < source.length) {
    const open = source.indexOf('{{', position);
    if (open < 0) {
      out.push({ kind: 'text', text: source.slice(position) });
      break;
    }
    out.push({ kind: 'text', text: source.slice(position, open) });
    let close = open + 2;
    let quoted = false;
    for (; close < source.length; close++) {
      if (quoted && source[close] === '\\') close++;
      else if (source[close] === '"') quoted = !quoted;
      else if (!quoted && source.startsWith('}}', close)) break;
    }
    if (close >= source.length) throw new TemplateError(`${file}: unclosed action at offset ${open}`);
    let inner = source.slice(open + 2, close);
    if (inner.startsWith('- ') || inner === '-') {
      const previous = out[out.length - 1];
      previous.text = previous.text.replace(/\s+$/, '');
      inner = inner.slice(1);
    }
    let trimAfter = false;
    if (inner.endsWith(' -')) {
      trimAfter = true;
      inner = inner.slice(0, -1);
    }
    out.push({ kind: 'action', text: inner.trim() });
    position = close + 2;
    if (trimAfter) {
      const rest = /^\s*/.exec(source.slice(position))![0];
      position += rest.length;
    }
  }
  return out.filter((piece) => piece.kind === 'action' || piece.text !== '');
}

// ---------------------------------------------------------------- parsing expressions

type Token = { type: 'string' | 'number' | 'field' | 'var' | 'ident' | '(' | ')' | '|' | ':=' | ','; text: string };

function tokenize(text: string, where: string): Token[] {
  const tokens: Token[] = [];
  const pattern = /\s*(?:("(?:[^"\\]|\\.)*")|(-?\d+)(?![\w.])|(\$\w*(?:\.\w+)*)|((?:\.\w+)+|\.)|(:=)|([()|,])|([A-Za-z_]\w*))/y;
  let position = 0;
  while (position < text.length) {
    if (/^\s*$/.test(text.slice(position))) break;
    pattern.lastIndex = position;
    const match = pattern.exec(text);
    if (!match) throw new TemplateError(`${where}: cannot read "${text.slice(position)}"`);
    position = pattern.lastIndex;
    if (match[1] !== undefined) tokens.push({ type: 'string', text: match[1] });
    else if (match[2] !== undefined) tokens.push({ type: 'number', text: match[2] });
    else if (match[3] !== undefined) tokens.push({ type: 'var', text: match[3] });
    else if (match[4] !== undefined) tokens.push({ type: 'field', text: match[4] });
    else if (match[5] !== undefined) tokens.push({ type: ':=', text: ':=' });
    else if (match[6] !== undefined) tokens.push({ type: match[6] as '(' | ')' | '|' | ',', text: match[6] });
    else tokens.push({ type: 'ident', text: match[7] });
  }
  return tokens;
}

function parsePipeline(tokens: Token[], where: string): Pipeline {
  let index = 0;
  const pipeline = (stopAtParen: boolean): Pipeline => {
    const commands: Term[][] = [[]];
    while (index < tokens.length) {
      const token = tokens[index];
      if (token.type === ')') {
        if (!stopAtParen) throw new TemplateError(`${where}: unexpected )`);
        break;
      }
      index++;
      if (token.type === '|') {
        if (commands[commands.length - 1].length === 0) throw new TemplateError(`${where}: empty command before |`);
        commands.push([]);
        continue;
      }
      commands[commands.length - 1].push(term(token));
    }
    if (commands.some((command) => command.length === 0)) throw new TemplateError(`${where}: empty command`);
    return { kind: 'pipeline', commands };
  };
  const term = (token: Token): Term => {
    switch (token.type) {
      case 'string': return { kind: 'literal', value: JSON.parse(token.text) };
      case 'number': return { kind: 'literal', value: Number(token.text) };
      case 'field': return { kind: 'field', base: 'dot', path: token.text === '.' ? [] : token.text.slice(1).split('.') };
      case 'var': {
        const [name, ...rest] = token.text.split('.');
        return { kind: 'field', base: name === '$' ? 'root' : name, path: rest };
      }
      case 'ident':
        if (token.text === 'true' || token.text === 'false') return { kind: 'literal', value: token.text === 'true' };
        if (token.text === 'nil') return { kind: 'literal', value: null };
        return { kind: 'ident', name: token.text };
      case '(': {
        const inner = pipeline(true);
        if (tokens[index]?.type !== ')') throw new TemplateError(`${where}: unclosed (`);
        index++;
        return { kind: 'paren', pipeline: inner, path: [] };
      }
      default: throw new TemplateError(`${where}: unexpected ${token.text}`);
    }
  };
  return pipeline(false);
}

/** `$x := pipeline` or a pipeline. */
function parseAction(text: string, where: string): Pipeline {
  const tokens = tokenize(text, where);
  if (tokens.length >= 2 && tokens[0].type === 'var' && tokens[1].type === ':=') {
    return { ...parsePipeline(tokens.slice(2), where), declare: tokens[0].text };
  }
  return parsePipeline(tokens, where);
}

// ---------------------------------------------------------------- parsing control structure

const KEYWORD = /^(if|else if|else|end|range|with|define)\b\s*/;

function parseTemplate(source: string, file: string, defines: Map<string, Node[]>): Node[] {
  const list = pieces(source, file);
  let index = 0;
  const where = () => `${file} (action ${index})`;
  const block = (terminators: string[]): { nodes: Node[]; ended: string; rest: string } => {
    const nodes: Node[] = [];
    while (index < list.length) {
      const piece = list[index++];
      if (piece.kind === 'text') {
        nodes.push({ kind: 'text', text: piece.text });
        continue;
      }
      if (piece.text.startsWith('/*')) {
        if (!piece.text.endsWith('*/')) throw new TemplateError(`${where()}: bad comment`);
        continue;
      }
      const keyword = KEYWORD.exec(piece.text);
      if (!keyword) {
        nodes.push({ kind: 'output', pipeline: parseAction(piece.text, where()) });
        continue;
      }
      const word = keyword[1];
      const rest = piece.text.slice(keyword[0].length);
      if (word === 'end' || word === 'else' || word === 'else if') {
        if (!terminators.includes(word)) throw new TemplateError(`${where()}: unexpected {{ ${piece.text} }}`);
        return { nodes, ended: word, rest };
      }
      if (word === 'if') {
        const branches: { condition: Pipeline; body: Node[] }[] = [];
        let condition = parseAction(rest, where());
        for (;;) {
          const part = block(['else if', 'else', 'end']);
          branches.push({ condition, body: part.nodes });
          if (part.ended === 'else if') {
            condition = parseAction(part.rest, where());
            continue;
          }
          const otherwise = part.ended === 'else' ? block(['end']).nodes : [];
          nodes.push({ kind: 'if', branches, otherwise });
          break;
        }
      } else if (word === 'with') {
        const pipeline = parseAction(rest, where());
        const part = block(['else', 'end']);
        nodes.push({ kind: 'with', pipeline, body: part.nodes, otherwise: part.ended === 'else' ? block(['end']).nodes : [] });
      } else if (word === 'range') {
        const declaration = /^(\$\w+)(?:\s*,\s*(\$\w+))?\s*:=\s*/.exec(rest);
        const pipeline = parsePipeline(tokenize(declaration ? rest.slice(declaration[0].length) : rest, where()), where());
        const part = block(['else', 'end']);
        nodes.push({
          kind: 'range', pipeline, body: part.nodes, otherwise: part.ended === 'else' ? block(['end']).nodes : [],
          keyVar: declaration?.[2] ? declaration[1] : undefined, valueVar: declaration ? (declaration[2] ?? declaration[1]) : undefined,
        });
      } else {
        const name = /^"([^"]+)"$/.exec(rest.trim());
        if (!name) throw new TemplateError(`${where()}: define needs a quoted name`);
        defines.set(name[1], block(['end']).nodes);
      }
    }
    if (terminators.length > 0) throw new TemplateError(`${file}: missing {{ end }}`);
    return { nodes, ended: '', rest: '' };
  };
  return block([]).nodes;
}

// ---------------------------------------------------------------- evaluation

function truthy(value: Value): boolean {
  if (value === null || value === undefined || value === false || value === 0 || value === '') return false;
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === 'object') return Object.keys(value as object).length > 0;
  return true;
}

function kindOf(value: Value): string {
  return value === null || value === undefined ? 'nil' : Array.isArray(value) ? 'list' : typeof value;
}

function print(value: Value, where: string): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'number') {
    if (Math.abs(value) >= 1e6) throw new TemplateError(`${where}: ${value} would print as ${value.toExponential().replace('e+', 'e+0')} in Helm (values are float64s): write it as a string in the values`);
    return String(value);
  }
  throw new TemplateError(`${where}: cannot print a ${kindOf(value)} (use toYaml)`);
}

function indentLines(text: string, spaces: number): string {
  const pad = ' '.repeat(spaces);
  return text.split('\n').map((line) => pad + line).join('\n');
}

/** Go's %q for what our values hold (strings of printable text). */
const goQuote = (value: Value) => JSON.stringify(typeof value === 'string' ? value : print(value, 'quote'));

export interface Context {
  Values: Record<string, unknown>;
  Release: { Name: string; Namespace: string; Service: string; IsInstall: boolean };
  Chart: { Name: string; Version: string; AppVersion: string };
}

class Renderer {
  constructor(private readonly defines: Map<string, Node[]>, private readonly root: Context, private readonly file: string) {}

  render(nodes: Node[], dot: Value, scopes: Scope[]): string {
    const scope: Scope = new Map();
    const chain = [...scopes, scope];
    let out = '';
    for (const node of nodes) {
      switch (node.kind) {
        case 'text': out += node.text; break;
        case 'output': {
          const value = this.pipeline(node.pipeline, dot, chain);
          if (node.pipeline.declare) scope.set(node.pipeline.declare, value);
          else out += print(value, this.file);
          break;
        }
        case 'if': {
          const branch = node.branches.find((candidate) => truthy(this.pipeline(candidate.condition, dot, chain)));
          out += this.render(branch ? branch.body : node.otherwise, dot, chain);
          break;
        }
        case 'with': {
          const value = this.pipeline(node.pipeline, dot, chain);
          out += truthy(value) ? this.render(node.body, value, chain) : this.render(node.otherwise, dot, chain);
          break;
        }
        case 'range': {
          const value = this.pipeline(node.pipeline, dot, chain);
          const entries: [Value, Value][] = Array.isArray(value) ? value.map((item, i) => [i, item])
            : value && typeof value === 'object' ? Object.keys(value).sort().map((key) => [key, (value as Record<string, Value>)[key]])
              : value === null || value === undefined ? [] : (() => { throw new TemplateError(`${this.file}: range over a ${kindOf(value)}`); })();
          if (entries.length === 0) out += this.render(node.otherwise, dot, chain);
          for (const [key, item] of entries) {
            const vars: Scope = new Map();
            if (node.keyVar) vars.set(node.keyVar, key);
            if (node.valueVar) vars.set(node.valueVar, item);
            out += this.render(node.body, item, [...chain, vars]);
          }
          break;
        }
      }
    }
    return out;
  }

  private pipeline(pipeline: Pipeline, dot: Value, scopes: Scope[]): Value {
    let result: Value;
    pipeline.commands.forEach((command, index) => {
      const piped = index > 0 ? [result] : [];
      const [head, ...rest] = command;
      if (head.kind === 'ident') {
        result = this.call(head.name, [...rest.map((term) => this.term(term, dot, scopes)), ...piped]);
      } else {
        if (rest.length > 0 || piped.length > 0) throw new TemplateError(`${this.file}: ${JSON.stringify(head)} is not a function`);
        result = this.term(head, dot, scopes);
      }
    });
    return result;
  }

  private term(term: Term, dot: Value, scopes: Scope[]): Value {
    if (term.kind === 'literal') return term.value;
    if (term.kind === 'ident') return this.call(term.name, []);
    let base: Value;
    let label: string;
    if (term.kind === 'paren') {
      base = this.pipeline(term.pipeline, dot, scopes);
      label = '(…)';
    } else if (term.base === 'dot') {
      base = dot;
      label = '';
    } else if (term.base === 'root') {
      base = this.root;
      label = '$';
    } else {
      const scope = [...scopes].reverse().find((candidate) => candidate.has(term.base as string));
      if (!scope) throw new TemplateError(`${this.file}: undefined variable ${term.base}`);
      base = scope.get(term.base as string);
      label = term.base as string;
    }
    for (const key of term.path) {
      if (base === null || base === undefined) throw new TemplateError(`${this.file}: nil pointer evaluating interface {}.${key} (${label}.${key})`);
      if (typeof base !== 'object' || Array.isArray(base)) throw new TemplateError(`${this.file}: can't evaluate field ${key} in type ${kindOf(base)}`);
      base = (base as Record<string, Value>)[key];
      label += `.${key}`;
    }
    return base;
  }

  private call(name: string, args: Value[]): Value {
    const arity = (count: number) => {
      if (args.length !== count) throw new TemplateError(`${this.file}: ${name} takes ${count} arguments, got ${args.length}`);
    };
    switch (name) {
      case 'quote': return args.filter((arg) => arg !== null && arg !== undefined).map(goQuote).join(' ');
      case 'default': arity(2); return truthy(args[1]) ? args[1] : args[0];
      case 'toYaml': arity(1); return args[0] === null || args[0] === undefined ? 'null' : stringify(args[0], { sortMapEntries: true, lineWidth: 0 }).replace(/\n$/, '');
      case 'nindent': arity(2); return `\n${indentLines(String(args[1]), Number(args[0]))}`;
      case 'indent': arity(2); return indentLines(String(args[1]), Number(args[0]));
      case 'include': {
        arity(2);
        const body = this.defines.get(String(args[0]));
        if (!body) throw new TemplateError(`${this.file}: no template "${String(args[0])}"`);
        return this.render(body, args[1], []);
      }
      case 'printf': {
        const [format, ...rest] = args;
        let next = 0;
        return String(format).replace(/%([sdv%])/g, (_, verb: string) => (verb === '%' ? '%' : print(rest[next++], `${this.file}: printf`)));
      }
      case 'trunc': arity(2); return String(args[1]).slice(0, Number(args[0]));
      case 'trimSuffix': arity(2); return String(args[1]).endsWith(String(args[0])) ? String(args[1]).slice(0, -String(args[0]).length) : args[1];
      case 'eq': arity(2); return args[0] === args[1];
      case 'ne': arity(2); return args[0] !== args[1];
      case 'not': arity(1); return !truthy(args[0]);
      case 'and': return args.find((arg) => !truthy(arg)) ?? args[args.length - 1];
      case 'or': return args.find((arg) => truthy(arg)) ?? args[args.length - 1];
      case 'required': arity(2); if (!truthy(args[1])) throw new TemplateError(`execution error: ${String(args[0])}`); return args[1];
      case 'b64enc': arity(1); return Buffer.from(String(args[0])).toString('base64');
      default: throw new TemplateError(`${this.file}: function "${name}" not defined (not in this renderer's subset)`);
    }
  }
}

/** Renders one template text (tests of the renderer itself); `partials` are `_*.tpl` texts. */
export function renderTemplate(source: string, context: Context, partials: string[] = []): string {
  const defines = new Map<string, Node[]>();
  partials.forEach((partial, index) => parseTemplate(partial, `_partial${index}.tpl`, defines));
  const nodes = parseTemplate(source, 'template', defines);
  return new Renderer(defines, context, 'template').render(nodes, context, []);
}

/** Helm's merge of a values file over the chart's: maps merge, anything else replaces, null removes. */
export function mergeValues(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    if (value === null) delete merged[key];
    else if (isMap(value) && isMap(merged[key])) merged[key] = mergeValues(merged[key] as Record<string, unknown>, value);
    else merged[key] = value;
  }
  return merged;
}

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

export interface RenderedManifest {
  /** templates/<file> it came from. */
  readonly template: string;
  readonly object: Record<string, any>;
}

export interface RenderOptions {
  values?: Record<string, unknown>;
  release?: { name?: string; namespace?: string };
}

/**
 * `helm template <release> <chart> -n <namespace> -f values`: every manifest of the chart,
 * parsed (documents empty after rendering are dropped, as Helm drops them).
 */
export function renderChart(chartDir: string, options: RenderOptions = {}): RenderedManifest[] {
  const chart = parse(fs.readFileSync(path.join(chartDir, 'Chart.yaml'), 'utf8')) as { name: string; version: string; appVersion: string };
  const defaults = (parse(fs.readFileSync(path.join(chartDir, 'values.yaml'), 'utf8')) ?? {}) as Record<string, unknown>;
  const context: Context = {
    Values: mergeValues(defaults, options.values ?? {}),
    Release: { Name: options.release?.name ?? 'release-name', Namespace: options.release?.namespace ?? 'default', Service: 'Helm', IsInstall: true },
    Chart: { Name: chart.name, Version: chart.version, AppVersion: chart.appVersion },
  };
  const templatesDir = path.join(chartDir, 'templates');
  const files = fs.readdirSync(templatesDir).sort();
  const defines = new Map<string, Node[]>();
  for (const file of files.filter((name) => name.startsWith('_'))) parseTemplate(fs.readFileSync(path.join(templatesDir, file), 'utf8'), file, defines);
  const manifests: RenderedManifest[] = [];
  for (const file of files.filter((name) => !name.startsWith('_') && /\.ya?ml$/.test(name))) {
    const nodes = parseTemplate(fs.readFileSync(path.join(templatesDir, file), 'utf8'), file, defines);
    const text = new Renderer(defines, context, file).render(nodes, context, []);
    for (const document of parseAllDocuments(text)) {
      if (document.errors.length > 0) throw new TemplateError(`${file}: rendered YAML does not parse: ${document.errors[0].message}\n${text}`);
      const object = document.toJS() as Record<string, any> | null;
      if (object !== null && object !== undefined) manifests.push({ template: file, object });
    }
  }
  return manifests;
}
