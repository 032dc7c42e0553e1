/**
 * The JSON and tool calls of a CPU engine answer, made when the request is planned (they are
 * small, and a schema no value satisfies is then a 400 before anything is streamed): values
 * from the schema's seeded generator (common/json-schema), so they always validate, and the
 * same request gets the same JSON.
 */
import { randomBytes } from 'node:crypto';
import { generateInstance, SchemaGenerationError } from '../../common/json-schema';
import type { AnswerShape } from './cpu-answer-shape';
import { hashText, seededRandom } from '../../common/seeded-random';
import { invalidRequestFailure } from './request-fields';

export interface PlannedToolCall {
  /** `call_` and 24 hex digits: unique per call, as an agent loop keys tool results by it. */
  readonly id: string;
  readonly name: string;
  /** JSON text of the arguments. */
  readonly arguments: string;
}

export type StructuredAnswer =
  | { readonly kind: 'json'; readonly text: string }
  | { readonly kind: 'tool_calls'; readonly calls: readonly PlannedToolCall[] };

/** What choice `choiceIndex` of a request says, for JSON and tool-call shapes; undefined for text. */
export function structuredAnswer(shape: AnswerShape, seed: number, choiceIndex: number, promptText: string): StructuredAnswer | undefined {
  const randomFor = (salt: string) => seededRandom(hashText(`${seed}\u0000${choiceIndex}\u0000${promptText}\u0000${salt}`));
  if (shape.kind === 'json') return { kind: 'json', text: JSON.stringify(valueOf(shape.schema, randomFor('json'), shape.param)) };
  if (shape.kind === 'tool_calls') {
    return {
      kind: 'tool_calls',
      calls: shape.tools.map((tool) => ({
        id: `call_${randomBytes(12).toString('hex')}`,
        name: tool.name,
        arguments: JSON.stringify(tool.parameters === undefined ? {} : valueOf(tool.parameters, randomFor(`tool\u0000${tool.name}`), `tools[${tool.index}].function.parameters`)),
      })),
    };
  }
  return undefined;
}

function valueOf(schema: unknown, random: () => number, param: string): unknown {
  try {
    return generateInstance(schema, random);
  } catch (error) {
    if (error instanceof SchemaGenerationError) throw invalidRequestFailure(param, `the cpu engine cannot make a value for ${param}: ${error.message}`, 'invalid_schema');
    throw error;
  }
}
