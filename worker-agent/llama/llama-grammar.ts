/**
 * Grammars that constrain llama.cpp's sampling to JSON of a schema, built with node-llama-cpp's
 * JSON-schema grammar generator and then adjusted for serving:
 * - its root ends with four newlines (`LlamaChatSession` stops on them); here the grammar ends
 *   with the JSON, so llama.cpp allows only end-of-generation next and the answer stops there;
 * - numbers lose the exponent and keep at most 15 integer digits: `1e999` is valid GBNF JSON but
 *   parses to Infinity, and 16 digits exceed JavaScript's safe integers (grammar-schema.ts
 *   counts on this to honour zod's safe-integer bounds);
 * - whitespace is at most one space (no newline-and-indent): fewer tokens for the same JSON.
 * Grammars are kept per schema, so a client repeating its schema pays for compiling it once.
 */
import type { Llama, LlamaGrammar } from 'node-llama-cpp';
import type { GrammarSchema } from './grammar-schema';

/** Compiled grammars kept (by schema text); the oldest is dropped past this. */
const CACHED_GRAMMARS = 64;

const INTEGER_RULE = '"-"? ("0" | [1-9] [0-9]{0,14})';
const RULE_BODIES: ReadonlyArray<readonly [RegExp, string]> = [
  [/^(integer-number-rule) ::= .*$/m, `$1 ::= ${INTEGER_RULE}`],
  [/^(fractional-number-rule) ::= .*$/m, `$1 ::= ${INTEGER_RULE} ("." [0-9]{1,15})?`],
];

export interface GrammarOptions {
  /**
   * Also allow a plain-text answer that does not start with `[` (tool_choice `auto`: the JSON
   * is an array of tool calls, anything else is the answer).
   */
  readonly orText?: boolean;
}

export class LlamaGrammars {
  private readonly cache = new Map<string, Promise<LlamaGrammar>>();

  constructor(private readonly llama: Llama) {}

  /** The grammar for `schema`; throws when llama.cpp cannot compile it (a schema the converter let through badly). */
  grammarFor(schema: GrammarSchema, options: GrammarOptions = {}): Promise<LlamaGrammar> {
    const key = `${options.orText ? 'text|' : ''}${JSON.stringify(schema)}`;
    let grammar = this.cache.get(key);
    if (grammar) {
      // Most recently used last.
      this.cache.delete(key);
    } else {
      grammar = this.build(schema, options);
      grammar.catch(() => this.cache.delete(key));
    }
    this.cache.set(key, grammar);
    if (this.cache.size > CACHED_GRAMMARS) this.cache.delete(this.cache.keys().next().value!);
    return grammar;
  }

  private async build(schema: GrammarSchema, options: GrammarOptions): Promise<LlamaGrammar> {
    const generated = (await this.llama.createGrammarForJsonSchema(schema as never)).grammar;
    return await this.llama.createGrammar({ grammar: servingGrammar(generated, options) });
  }
}

/** node-llama-cpp's generated GBNF, adjusted as the file comment says. Pure, for tests. */
export function servingGrammar(generated: string, options: GrammarOptions = {}): string {
  let grammar = generated.replace(/^root ::= (.*?) "\\n\\n\\n\\n" \[\\n\]\*$/m, 'root ::= $1');
  for (const [rule, body] of RULE_BODIES) grammar = grammar.replace(rule, body);
  grammar = grammar
    .replace(/^(whitespace-[abn]-\d+-\d+-rule) ::= .*$/gm, '$1 ::= [ ]?')
    .replace(/^(comma-whitespace-[abn]-\d+-\d+-rule) ::= .*$/gm, '$1 ::= "," [ ]?');
  if (options.orText) {
    grammar = grammar.replace(/^root ::= /m, 'json-root ::= ');
    grammar += '\nroot ::= json-root | plain-text\nplain-text ::= [^\\x5B] plain-char*\nplain-char ::= [^\\x00]\n';
  }
  return grammar;
}
