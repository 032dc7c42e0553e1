/**
 * Label and field selectors as the Kubernetes API server reads them. Label selectors take the
 * whole grammar (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`); field selectors
 * take `=`, `==` and `!=` on the fields each resource supports, and anything else is refused
 * (`field label not supported`) exactly where a real server would refuse it, so a provider that
 * filters on a field the server cannot filter on fails here and not first on a real cluster.
 */

export class SelectorError extends Error {}

type LabelRequirement =
  | { readonly key: string; readonly op: 'exists' | 'notexists' }
  | { readonly key: string; readonly op: 'in' | 'notin'; readonly values: readonly string[] };

export interface FieldRequirement {
  readonly field: string;
  readonly op: '=' | '!=';
  readonly value: string;
}

const KEY = /^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^(?:[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** Splits on commas outside parentheses (`a in (x,y),b` is two requirements). */
function splitTerms(selector: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const char of selector) {
    if (char === '(') depth += 1;
    if (char === ')') depth -= 1;
    if (char === ',' && depth === 0) {
      terms.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  terms.push(current);
  return terms.map((term) => term.trim()).filter((term) => term.length > 0);
}

function checkKey(key: string, term: string): string {
  if (!KEY.test(key) || key.length > 317) throw new SelectorError(`unable to parse requirement: invalid label key "${key}" in "${term}"`);
  return key;
}

function checkValue(value: string, term: string): string {
  if (!VALUE.test(value) || value.length > 63) throw new SelectorError(`unable to parse requirement: invalid label value "${value}" in "${term}"`);
  return value;
}

export function parseLabelSelector(selector: string | null | undefined): LabelRequirement[] {
  if (!selector) return [];
  return splitTerms(selector).map((term): LabelRequirement => {
    const set = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
    if (set) {
      const values = set[3].split(',').map((value) => checkValue(value.trim(), term));
      return { key: checkKey(set[1], term), op: set[2] as 'in' | 'notin', values };
    }
    const comparison = /^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(term);
    if (comparison) {
      const key = checkKey(comparison[1], term);
      const value = checkValue(comparison[3], term);
      return { key, op: comparison[2] === '!=' ? 'notin' : 'in', values: [value] };
    }
    const absent = /^!\s*(\S+)$/.exec(term);
    if (absent) return { key: checkKey(absent[1], term), op: 'notexists' };
    if (/^\S+$/.test(term)) return { key: checkKey(term, term), op: 'exists' };
    throw new SelectorError(`unable to parse requirement: found '${term}', expected: 'in', 'notin', '=', '==', '!=', identifier`);
  });
}

export function matchesLabels(requirements: readonly LabelRequirement[], labels: Readonly<Record<string, string>> | undefined): boolean {
  const present = labels ?? {};
  return requirements.every((requirement) => {
    const has = Object.prototype.hasOwnProperty.call(present, requirement.key);
    switch (requirement.op) {
      case 'exists': return has;
      case 'notexists': return !has;
      case 'in': return has && requirement.values.includes(present[requirement.key]);
      // `a!=b` and `a notin (b)` also match objects without the label, as on a real server.
      case 'notin': return !has || !requirement.values.includes(present[requirement.key]);
    }
  });
}

export function parseFieldSelector(selector: string | null | undefined, supported: readonly string[]): FieldRequirement[] {
  if (!selector) return [];
  return selector.split(',').map((term) => term.trim()).filter(Boolean).map((term) => {
    const match = /^([^!=]+)(!=|==|=)(.*)$/.exec(term);
    if (!match) throw new SelectorError(`invalid selector: '${selector}'; can't understand '${term}'`);
    const field = match[1].trim();
    if (!supported.includes(field)) throw new SelectorError(`field label not supported: ${field}`);
    return { field, op: match[2] === '!=' ? '!=' : '=', value: match[3].trim() };
  });
}

/** Reads a dotted path (`spec.nodeName`); absent fields compare as "" and booleans as "true"/"false". */
export function fieldValue(object: unknown, field: string): string {
  const value = field.split('.').reduce<unknown>((current, key) => (current !== null && typeof current === 'object' ? (current as Record<string, unknown>)[key] : undefined), object);
  if (value === undefined || value === null) return '';
  return String(value);
}

export function matchesFields(requirements: readonly FieldRequirement[], object: unknown, read: (object: unknown, field: string) => string = fieldValue): boolean {
  return requirements.every((requirement) => (read(object, requirement.field) === requirement.value) === (requirement.op === '='));
}
