import type { CatalogModel } from '../catalog/catalog';
import type { Job, JobFailure, JobListener } from '../dispatch/job';
import type { AppError } from '../errors/app-error';
import type { Usage } from '../../proto/worker/v1';
import type { BatchEndpoint } from './batch.entities';

/** An answer as the live endpoint would have given it: its HTTP status and JSON body. */
export interface LineResponse {
  readonly statusCode: number;
  /** JSON text. */
  readonly body: string;
}

/** A line's body checked as the live endpoint checks a request: the fields it read, or the 4xx it would have answered. */
export type LineCheck =
  | { readonly ok: true; readonly fields: Record<string, unknown> }
  | { readonly ok: false; readonly response: LineResponse };

/**
 * Sends one job of a line (its body, or a part of it: an embeddings line larger than the
 * model's batch is several jobs, sent one after the other) on the slot the batch runner chose.
 * Throws when no replica of the deployment can take it now.
 */
export type LineJobSender = (body: Buffer, listener: JobListener) => Job;

export type LineRun =
  /** An engine answered (or our own checks did): what goes to the output or error file. */
  | { readonly kind: 'answered'; readonly response: LineResponse; readonly usage: Usage }
  /**
   * No engine answered: the replica was lost or draining (LOST_JOB_CODES), or the runner
   * canceled the job. The runner puts the line back (at most once) or ends it itself.
   */
  | { readonly kind: 'lost'; readonly failure: Pick<JobFailure, 'code' | 'message'>; readonly usage: Usage };

/**
 * What a batch line means as an OpenAI request: the checks, the jobs and the answers of the live
 * endpoint it names (`/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`,
 * `/v1/responses`). The OpenAI request model implements it with the parsers and error bodies the
 * live routes use (control-plane/openai/batch-lines.ts), and the composition root (main.ts)
 * gives it to the validator and the runner, so a line is checked, run and answered exactly as
 * the same request sent live would be.
 */
export interface BatchLineHandler {
  /** Checks a line's body against the model (the `model` field is the batch's to check). */
  check(endpoint: BatchEndpoint, model: CatalogModel, body: Buffer): LineCheck;
  /**
   * Runs a checked line through `send` and resolves with its answer; never rejects.
   * `answeredAs`: the LoRA adapter's name the line addressed, which the answer's `model` carries.
   */
  run(endpoint: BatchEndpoint, model: CatalogModel, body: Buffer, send: LineJobSender, answeredAs?: string): Promise<LineRun>;
  /** An error the control plane decided for a line (a budget it can never fit), as the endpoint renders errors. */
  render(error: AppError): LineResponse;
}

/** Job failure codes in which no engine answered: the line did not run, or its replica went away mid-way. */
export const LOST_JOB_CODES: ReadonlySet<string> = new Set(['pod_crash', 'agent_draining', 'canceled']);
