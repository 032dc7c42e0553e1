import { parseJsonText } from '../../common/json-nesting';
import type { CatalogModel } from '../catalog/catalog';
import { textTokenHold } from '../pipeline/admission';
import type { Batch } from './batch.entities';
import type { BatchInputReader } from './batch-input-reader';
import type { BatchLineHandler, LineResponse } from './batch-line-handler';
import type { ClaimedLine } from './batch-store';

/** A claimed line's request as it is about to run. */
export type LineInput =
  /** Its bytes are no longer in storage: it ends `input_unavailable`, never run. */
  | { readonly kind: 'unavailable' }
  /** The endpoint refuses the body it read (the file changed since validation): answered with that 4xx. */
  | { readonly kind: 'refused'; readonly response: LineResponse }
  /**
   * The body, the worst case in tokens its key's day budget must hold (as live admission
   * computes it), and the `model` it names when that is not the deployment's (validation let
   * through only an adapter attached to it; the runner resolves it again, it may have been detached since).
   */
  | { readonly kind: 'ready'; readonly body: Buffer; readonly holdTokens: number; readonly otherModel?: string };

/**
 * Reads a line's body from its batch's input file and gets it ready to run. A text body is
 * checked again as it is read, so what runs is what validation saw, and the check's fields give
 * the token hold; an embeddings body is parsed and checked by its run, and holds its bytes.
 */
export async function readLineInput(
  inputs: Pick<BatchInputReader, 'body'>, lines: Pick<BatchLineHandler, 'check'>, batch: Batch, model: CatalogModel, line: ClaimedLine,
): Promise<LineInput> {
  const body = await inputs.body(batch, line);
  if (!body) return { kind: 'unavailable' };
  if (batch.endpoint === '/v1/embeddings') return { kind: 'ready', body, holdTokens: body.length };
  const check = lines.check(batch.endpoint, model, body);
  if (!check.ok) return { kind: 'refused', response: check.response };
  const named = (parseJsonText(body) as Record<string, unknown>).model;
  const otherModel = typeof named === 'string' && named !== model.id ? named : undefined;
  return { kind: 'ready', body, holdTokens: textTokenHold(body.length, check.fields), ...(otherModel !== undefined ? { otherModel } : {}) };
}
