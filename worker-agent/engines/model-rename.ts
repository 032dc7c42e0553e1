/**
 * The way back of `WORKER_ENGINE_MODEL` (issue 35): engine-request.ts sends the engine its own
 * name for the model, and the engine answers with that name in `model`; the client asked for
 * the catalog model (or a deployment of it) and gets the catalog id (the job's `model`) back.
 *
 * The rename is done on the answer's bytes where the agent already reads them, never by
 * parsing and re-serialising an answer: streamed events in SseEventFilter's byte scan (which
 * already stops at every quote to peek at keys, and already holds an event back until it is
 * whole, so a name split across reads is seen whole), whole bodies through the top-level spans
 * (json-spans.ts). Only the exact JSON string the engine was sent is replaced, and only as the
 * value of a `"model"` key; text that merely contains it is escaped inside a JSON string and so
 * never matches.
 */
import { NotJsonHere, topLevelMembers } from '../../common/json-spans';

export interface ModelRename {
  /** The engine's name for the model (what it was sent, so what it answers with). */
  readonly engineModel: string;
  /** The job's catalog model id: what the client asked for, so what it gets back. */
  readonly catalogModel: string;
  /** `engineModel` as a JSON string, quotes included: the bytes looked for. */
  readonly from: Buffer;
  /** The catalog model as a JSON string, quotes included: the bytes put in their place. */
  readonly to: Buffer;
}

/** The rename a job's answers need; undefined when the engine is sent the catalog id itself. */
export function modelRename(engineModel: string | undefined, catalogModel: string): ModelRename | undefined {
  if (engineModel === undefined || engineModel === catalogModel) return undefined;
  return { engineModel, catalogModel, from: Buffer.from(JSON.stringify(engineModel)), to: Buffer.from(JSON.stringify(catalogModel)) };
}

/**
 * A whole JSON answer with its top-level `model` renamed; the body itself when it names another
 * model or none. Every other byte is the engine's. Undefined when the spans cannot read the body
 * (not JSON, or JSON they do not follow: see json-spans.ts); the caller, which has parsed it,
 * then writes it anew.
 */
export function renameBodyModel(body: Buffer, rename: ModelRename): Buffer | undefined {
  let members: ReadonlyMap<string, { start: number; end: number }>;
  try {
    members = topLevelMembers(body);
  } catch (error) {
    if (error instanceof NotJsonHere || error instanceof SyntaxError) return undefined;
    throw error;
  }
  return renameMemberModel(body, members, rename);
}

/** renameBodyModel for a body whose top-level spans were read already (embeddings answers: mostly numbers, read once). */
export function renameMemberModel(body: Buffer, members: ReadonlyMap<string, { start: number; end: number }>, rename: ModelRename): Buffer {
  const span = members.get('model');
  if (!span || !namesEngineModel(body.subarray(span.start, span.end), rename)) return body;
  return Buffer.concat([body.subarray(0, span.start), rename.to, body.subarray(span.end)]);
}

/** The value is the engine's name: byte for byte, or written otherwise (e.g. with \u escapes). */
function namesEngineModel(value: Buffer, rename: ModelRename): boolean {
  if (value.equals(rename.from)) return true;
  if (value[0] !== 0x22) return false;
  try {
    return JSON.parse(value.toString('utf8')) === rename.engineModel;
  } catch {
    return false;
  }
}
