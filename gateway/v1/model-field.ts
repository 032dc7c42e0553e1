import { NESTED, topLevelValues, type ValueSpan } from '../http/json-top-level';
import { parseJsonObject } from '../../control-plane/api/inference';

/** A JSON body's top-level `model`, read from its raw bytes (json-top-level.ts), and where its value lies. */
export interface ScannedModel {
  readonly model: unknown;
  /** Absent when the scan could not read the body and it was parsed instead. */
  readonly span?: ValueSpan;
}

/**
 * The workspace base URL routes on `model` before any endpoint parses the body, so the model
 * is found by the raw scan (about a microsecond for a chat body) instead of a parse the
 * endpoint would then repeat. A body the scan cannot read is parsed: it gets the parse's own
 * 400, or, parsed fine (the scan is stricter about nesting), its `model`.
 */
export function scanModel(raw: Buffer): ScannedModel {
  const spans = new Map<string, ValueSpan>();
  const values = topLevelValues(raw, ['model'], spans);
  if (!values) return { model: parseJsonObject(raw).model };
  const model = values.get('model');
  // An object or array: the message quotes it, which needs the value itself (a rare, refused body).
  if (model === NESTED) return { model: parseJsonObject(raw).model };
  return { model, span: spans.get('model') };
}

/**
 * The body as the deployment's own endpoint would have received it: `model` set to the
 * deployment's catalog model (a slug is the workspace URL's name for it; the endpoints check
 * `model` against the deployment's model, and engines get that id). Bytes around it are kept.
 */
export function withModel(raw: Buffer, scanned: ScannedModel, modelId: string): Buffer {
  if (scanned.model === modelId) return raw;
  const value = Buffer.from(JSON.stringify(modelId));
  if (scanned.span) return Buffer.concat([raw.subarray(0, scanned.span.start), value, raw.subarray(scanned.span.end)]);
  return Buffer.from(JSON.stringify({ ...parseJsonObject(raw), model: modelId }));
}
