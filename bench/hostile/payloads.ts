/**
 * Worst-case bodies for `bench:hostile` (issue 19; issue 33's nested batch file at the end), each exactly `size` bytes (padded with
 * JSON whitespace where the shape does not divide evenly), all valid JSON:
 * - `nested-array`: `[[[…]]]`, size / 2 levels deep;
 * - `nested-object`: `{"a":{"a":…{}…}}`, size / 6 levels deep;
 * - `typename`: a GraphQL request whose query is `{__typename __typename …}` (size / 11 tokens);
 * - `huge-string` / `huge-array`: one long string / an array of zeros, shallow and cheap to
 *   parse per byte (for /graphql inside `variables` of a valid `{__typename}` request, for chat
 *   the whole body, which no chat request can be).
 */

export type Shape = 'nested-array' | 'nested-object' | 'typename' | 'huge-string' | 'huge-array';
export type Route = 'graphql' | 'chat';

export function payload(shape: Shape, route: Route, size: number): Buffer {
  switch (shape) {
    case 'nested-array': {
      const depth = Math.floor(size / 2);
      return exact('['.repeat(depth) + ']'.repeat(depth), size);
    }
    case 'nested-object': {
      const depth = Math.max(0, Math.floor((size - 2) / 6));
      return exact(`${'{"a":'.repeat(depth)}{}${'}'.repeat(depth)}`, size);
    }
    case 'typename': {
      const head = '{"query":"{';
      const tail = '}"}';
      const tokens = Math.max(1, Math.floor((size - head.length - tail.length) / 11));
      return exact(head + '__typename '.repeat(tokens) + tail, size, head.length + tokens * 11);
    }
    case 'huge-string': {
      const [head, tail] = route === 'graphql' ? ['{"query":"{__typename}","variables":{"s":"', '"}}'] : ['"', '"'];
      return exact(head + 'a'.repeat(Math.max(0, size - head.length - tail.length)) + tail, size);
    }
    case 'huge-array': {
      const [head, tail] = route === 'graphql' ? ['{"query":"{__typename}","variables":{"a":[', ']}}'] : ['[', ']'];
      const elements = Math.max(1, Math.floor((size - head.length - tail.length + 1) / 2));
      return exact(`${head}${'0,'.repeat(elements - 1)}0${tail}`, size);
    }
  }
}

/** Pads `text` with spaces to `size` bytes, at `at` (default: the end). */
function exact(text: string, size: number, at = text.length): Buffer {
  const missing = size - text.length;
  if (missing < 0) throw new Error(`payload of ${text.length} bytes over its size ${size}`);
  return Buffer.from(missing === 0 ? text : text.slice(0, at) + ' '.repeat(missing) + text.slice(at), 'latin1');
}

/** How deep a payload nests, for the report. */
export function depthOf(shape: Shape, size: number): number {
  if (shape === 'nested-array') return Math.floor(size / 2);
  if (shape === 'nested-object') return Math.floor((size - 2) / 6) + 1;
  return shape === 'typename' ? 1 : 2;
}

/** Tokens of the typename query, for the report. */
export function typenameTokens(size: number): number {
  return Math.max(1, Math.floor((size - 14) / 11));
}

/**
 * A batch input file of `totalBytes` (about) whose lines are valid chat requests of `lineBytes`
 * each (about), the body carrying an array of `[[[…]]]` so that the line nests exactly
 * `depths[i % depths.length]` levels (the line's object is level 1, `body` 2, the array 3).
 * Dense nesting is what JSON.parse pays most for per byte: an array per two bytes.
 */
export function nestedJsonl(totalBytes: number, lineBytes: number, depths: number[]): { data: Buffer; lines: number } {
  const count = Math.max(1, Math.round(totalBytes / lineBytes));
  const lines = depths.map((depth, variant) => {
    const inner = Math.max(1, depth - 3);
    const element = '['.repeat(inner) + ']'.repeat(inner);
    const head = `{"custom_id":"line-#","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"nested ${variant}"}],"max_tokens":1,"x_nested":[`;
    const tail = ']}}';
    const elements = Math.max(1, Math.floor((lineBytes - head.length - tail.length) / (element.length + 1)));
    return { head, body: Array.from({ length: elements }, () => element).join(',') + tail };
  });
  const parts: string[] = [];
  for (let index = 0; index < count; index++) {
    const line = lines[index % lines.length];
    parts.push(line.head.replace('#', String(index)) + line.body);
  }
  return { data: Buffer.from(parts.join('\n') + '\n', 'latin1'), lines: count };
}
