/**
 * Reads a streamed array of calls, `[{"name": "f", "arguments": {…}}, …]`, as the grammar
 * writes it (llama-tools.ts: `name` first, then `arguments`, at most one space between
 * tokens), and says as soon as it can when a call starts (its name is whole) and which text
 * is its arguments, so a stream sends each call's arguments as they are generated, as OpenAI's
 * `delta.tool_calls` do. It trusts the shape (the grammar guarantees it); it only finds where
 * things are.
 */
export type ScannedCallPart =
  | { readonly kind: 'start'; readonly position: number; readonly name: string }
  | { readonly kind: 'arguments'; readonly position: number; readonly text: string };

/** A call up to and including the first character of its arguments. */
const CALL_HEAD = /^\{ ?"name": ?"([a-zA-Z0-9_-]+)", ?"arguments": ?(\S)$/;
const BARE_CHAR = /[-+.\w]/;

export class ToolCallScanner {
  private state: 'between' | 'head' | 'value' | 'tail' = 'between';
  private head = '';
  private calls = 0;
  /** Brackets open inside the arguments value. */
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** Reading a bare value (number, true, false, null). */
  private bare = false;
  /** The value is whole: what follows belongs to the call, not its arguments. */
  private closed = false;

  /** The parts `text` (the answer's next piece) completes. */
  push(text: string): ScannedCallPart[] {
    const parts: ScannedCallPart[] = [];
    let fragment = '';
    const flush = () => {
      if (fragment) parts.push({ kind: 'arguments', position: this.calls - 1, text: fragment });
      fragment = '';
    };
    for (const char of text) {
      if (this.state === 'between') {
        if (char === '{') {
          this.state = 'head';
          this.head = char;
        }
      } else if (this.state === 'head') {
        this.head += char;
        const match = CALL_HEAD.exec(this.head);
        if (!match) continue;
        this.calls += 1;
        parts.push({ kind: 'start', position: this.calls - 1, name: match[1] });
        this.state = 'value';
        this.depth = 0;
        this.inString = this.escaped = this.bare = this.closed = false;
        if (this.valueChar(char)) fragment += char;
      } else if (this.state === 'value') {
        if (this.valueChar(char)) {
          fragment += char;
          continue;
        }
        flush();
        this.state = char === '}' ? 'between' : 'tail';
      } else if (char === '}') {
        this.state = 'between';
      }
    }
    flush();
    return parts;
  }

  /** Whether `char` is part of the arguments value (false: the value ended before it). */
  private valueChar(char: string): boolean {
    if (this.closed) return false;
    if (this.inString) {
      if (this.escaped) this.escaped = false;
      else if (char === '\\') this.escaped = true;
      else if (char === '"') {
        this.inString = false;
        this.closed = this.depth === 0;
      }
      return true;
    }
    if (this.bare) {
      if (BARE_CHAR.test(char)) return true;
      this.closed = true;
      return false;
    }
    if (char === '"') {
      this.inString = true;
      return true;
    }
    if (char === '{' || char === '[') {
      this.depth += 1;
      return true;
    }
    if (char === '}' || char === ']') {
      if (this.depth === 0) return false;
      this.depth -= 1;
      this.closed = this.depth === 0;
      return true;
    }
    if (this.depth === 0) {
      this.bare = true;
      return BARE_CHAR.test(char);
    }
    return true;
  }
}
