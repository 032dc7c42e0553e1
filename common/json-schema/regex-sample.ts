/**
 * A string a regular expression of the common subset matches: literals, escapes (`\d`, `\w`,
 * `\s`), classes and ranges, groups, alternation and quantifiers. Lookarounds and back
 * references produce nothing here; the caller tests every sample against the real RegExp and
 * tries again, so an unusual pattern costs retries, never a wrong answer.
 */
type RegexNode =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'set'; readonly ranges: readonly (readonly [number, number])[]; readonly negated: boolean }
  | { readonly kind: 'alternation'; readonly options: readonly RegexNode[][] }
  | { readonly kind: 'repeat'; readonly node: RegexNode; readonly min: number; readonly max: number };

const DIGIT: [number, number][] = [[48, 57]];
const WORD: [number, number][] = [[97, 122], [65, 90], [48, 57], [95, 95]];
const SPACE: [number, number][] = [[32, 32]];
/** What a negated class or `.` picks from. */
const PRINTABLE = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_- .';
/** Repetitions beyond a quantifier's minimum: enough to look varied, few enough to stay short. */
const EXTRA_REPEATS = 3;

/** Longest sample: `((a{1000}){1000}){1000}` compiles fine but would be a billion characters. */
export const MAX_SAMPLE_LENGTH = 65_536;

export class SampleTooLongError extends Error {}

/** Throws SampleTooLongError when every string the pattern matches is longer than MAX_SAMPLE_LENGTH (or this draw was). */
export function sampleRegex(pattern: string, random: () => number): string {
  const parser = new RegexParser(pattern);
  const tree = parser.alternation();
  const budget = { left: MAX_SAMPLE_LENGTH };
  return render({ kind: 'alternation', options: tree }, random, budget);
}

function render(node: RegexNode, random: () => number, budget: { left: number }): string {
  switch (node.kind) {
    case 'text':
    case 'set': {
      const text = node.kind === 'text' ? node.text : pickFromSet(node, random);
      budget.left -= text.length;
      if (budget.left < 0) throw new SampleTooLongError(`a string of the pattern would exceed ${MAX_SAMPLE_LENGTH} characters`);
      return text;
    }
    case 'alternation': {
      const option = node.options[Math.floor(random() * node.options.length)];
      return option.map((part) => render(part, random, budget)).join('');
    }
    case 'repeat': {
      const top = Math.min(node.max, node.min + EXTRA_REPEATS);
      const times = node.min + Math.floor(random() * (top - node.min + 1));
      let text = '';
      for (let index = 0; index < times; index += 1) text += render(node.node, random, budget);
      return text;
    }
  }
}

function pickFromSet(node: Extract<RegexNode, { kind: 'set' }>, random: () => number): string {
  const inSet = (code: number) => node.ranges.some(([low, high]) => code >= low && code <= high);
  if (node.negated) {
    const choices = [...PRINTABLE].filter((character) => !inSet(character.codePointAt(0)!));
    return choices.length === 0 ? '' : choices[Math.floor(random() * choices.length)];
  }
  if (node.ranges.length === 0) return '';
  const [low, high] = node.ranges[Math.floor(random() * node.ranges.length)];
  return String.fromCodePoint(low + Math.floor(random() * (high - low + 1)));
}

class RegexParser {
  private at = 0;

  constructor(private readonly source: string) {}

  alternation(): RegexNode[][] {
    const options: RegexNode[][] = [this.sequence()];
    while (this.source[this.at] === '|') {
      this.at += 1;
      options.push(this.sequence());
    }
    return options;
  }

  private sequence(): RegexNode[] {
    const parts: RegexNode[] = [];
    while (this.at < this.source.length && this.source[this.at] !== '|' && this.source[this.at] !== ')') {
      const atom = this.atom();
      parts.push(this.quantified(atom));
    }
    return parts;
  }

  private atom(): RegexNode {
    const character = this.source[this.at++];
    switch (character) {
      case '^':
      case '$':
        return { kind: 'text', text: '' };
      case '.':
        return { kind: 'set', ranges: [[10, 10], [13, 13]], negated: true };
      case '[':
        return this.characterClass();
      case '(':
        return this.group();
      case '\\':
        return this.escape(false);
      default:
        return { kind: 'text', text: character };
    }
  }

  private group(): RegexNode {
    let lookaround = false;
    if (this.source.startsWith('?:', this.at)) this.at += 2;
    else if (/^\?(=|!|<=|<!)/.test(this.source.slice(this.at, this.at + 3))) {
      lookaround = true;
      this.at += this.source[this.at + 1] === '<' ? 3 : 2;
    } else if (this.source.startsWith('?<', this.at)) this.at = this.source.indexOf('>', this.at) + 1;
    const options = this.alternation();
    this.at += 1; // ')'
    return lookaround ? { kind: 'text', text: '' } : { kind: 'alternation', options };
  }

  private characterClass(): RegexNode {
    const negated = this.source[this.at] === '^';
    if (negated) this.at += 1;
    const ranges: [number, number][] = [];
    let first = true;
    while (this.at < this.source.length && (this.source[this.at] !== ']' || first)) {
      first = false;
      const low = this.classMember();
      if (Array.isArray(low)) {
        ranges.push(...low);
        continue;
      }
      if (this.source[this.at] === '-' && this.source[this.at + 1] !== ']' && this.at + 1 < this.source.length) {
        this.at += 1;
        const high = this.classMember();
        if (Array.isArray(high)) ranges.push([low, low], [45, 45], ...high);
        else ranges.push([low, Math.max(low, high)]);
      } else {
        ranges.push([low, low]);
      }
    }
    this.at += 1; // ']'
    return { kind: 'set', ranges, negated };
  }

  /** One character's code, or the ranges of an escape class (`\d`). */
  private classMember(): number | [number, number][] {
    const character = this.source[this.at++];
    if (character !== '\\') return character.codePointAt(0)!;
    const node = this.escape(true);
    if (node.kind === 'set') return node.ranges.map(([low, high]): [number, number] => [low, high]);
    return node.kind === 'text' && node.text !== '' ? node.text.codePointAt(0)! : 0;
  }

  private escape(inClass: boolean): RegexNode {
    const character = this.source[this.at++] ?? '\\';
    const set = (ranges: [number, number][], negated = false): RegexNode => ({ kind: 'set', ranges, negated });
    switch (character) {
      case 'd': return set(DIGIT);
      case 'D': return set(DIGIT, true);
      case 'w': return set(WORD);
      case 'W': return set(WORD, true);
      case 's': return set(SPACE);
      case 'S': return set([[9, 13], [32, 32]], true);
      case 'n': return { kind: 'text', text: '\n' };
      case 't': return { kind: 'text', text: '\t' };
      case 'r': return { kind: 'text', text: '\r' };
      case 'b': return { kind: 'text', text: inClass ? '\b' : '' };
      case 'B': return { kind: 'text', text: '' };
      case 'u':
      case 'x': {
        const braced = this.source[this.at] === '{';
        const match = braced ? /^\{([0-9a-fA-F]+)\}/.exec(this.source.slice(this.at)) : new RegExp(`^[0-9a-fA-F]{${character === 'u' ? 4 : 2}}`).exec(this.source.slice(this.at));
        if (!match) return { kind: 'text', text: character };
        this.at += match[0].length;
        return { kind: 'text', text: String.fromCodePoint(parseInt(match[1] ?? match[0], 16)) };
      }
      default:
        // Back references (`\1`) match what their group matched: left to the caller's retry.
        return /[1-9]/.test(character) ? { kind: 'text', text: '' } : { kind: 'text', text: character };
    }
  }

  private quantified(atom: RegexNode): RegexNode {
    const character = this.source[this.at];
    let bounds: [number, number] | null = null;
    if (character === '*') bounds = [0, Infinity];
    else if (character === '+') bounds = [1, Infinity];
    else if (character === '?') bounds = [0, 1];
    else if (character === '{') {
      const match = /^\{(\d+)(,(\d*))?\}/.exec(this.source.slice(this.at));
      if (match) {
        const min = Number(match[1]);
        bounds = [min, match[2] === undefined ? min : match[3] === '' ? Infinity : Number(match[3])];
        this.at += match[0].length - 1;
      }
    }
    if (!bounds) return atom;
    this.at += 1;
    if (this.source[this.at] === '?') this.at += 1; // lazy: same strings
    return { kind: 'repeat', node: atom, min: bounds[0], max: bounds[1] };
  }
}
