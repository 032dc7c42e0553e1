import type { ServerResponse } from 'node:http';
import { AppError } from '../../control-plane/api/errors';
import type { BudgetHolder, BudgetLease, TenantBudget } from '../../control-plane/api/inference';

/**
 * What one HTTP request with a key holds of the tenant budget, from the moment its key is known
 * until its response closes (however it ends: answered, refused, abandoned, cut): one of the
 * `requests` in flight of its key, workspace and this server, and the `memory` its data takes
 * while it is held here, counted by the bytes really received or waiting, never by what a header
 * declares (an upload that sent nothing held 512 MiB by its Content-Length).
 *
 * Memory is counted only past `thresholdBytes` for a body (a chat body of a few KB, the hot
 * path's usual, touches no counter), and for response bytes only while the client lets them
 * wait (response-flow.ts's slow path).
 */
export class RequestBudget {
  private memory: BudgetLease | null = null;
  private bodyBytes = 0;
  private waitingBytes = 0;

  private constructor(private readonly budget: TenantBudget, private readonly holder: BudgetHolder, private readonly request: BudgetLease, private readonly thresholdBytes: number) {}

  /** The request's hold, released when `response` closes; or the refusal (nothing held). */
  static admit(budget: TenantBudget, holder: BudgetHolder, response: ServerResponse, thresholdBytes: number): RequestBudget | AppError {
    const request = budget.take('requests', holder);
    if (request instanceof AppError) return request;
    const held = new RequestBudget(budget, holder, request, thresholdBytes);
    if (response.closed) held.release();
    else response.once('close', () => held.release());
    return held;
  }

  /** The body has `total` bytes in memory so far: held when past the threshold; the refusal when they do not fit. */
  body(total: number): AppError | null {
    if (total <= this.thresholdBytes && this.memory === null) return null;
    const refusal = this.resize(total + this.waitingBytes);
    if (!refusal) this.bodyBytes = total;
    return refusal;
  }

  /** `total` bytes of the response wait for a slow client now (0 once they left). */
  waiting(total: number): AppError | null {
    if (total === this.waitingBytes) return null;
    if (this.memory === null && total <= this.thresholdBytes) {
      this.waitingBytes = total;
      return null;
    }
    const refusal = this.resize(this.bodyBytes + total);
    if (!refusal) this.waitingBytes = total;
    return refusal;
  }

  private resize(total: number): AppError | null {
    if (this.memory === null) {
      const lease = this.budget.take('memory', this.holder, total);
      if (lease instanceof AppError) return lease;
      this.memory = lease;
      return null;
    }
    const change = total - this.memory.amount;
    if (change > 0) return this.memory.grow(change);
    this.memory.shrink(-change);
    return null;
  }

  private release(): void {
    this.request.release();
    this.memory?.release();
  }
}

/** The request's budget, which the `/v1` router set on the Koa context once the key was known. */
export function requestBudgetOf(context: { state: Record<string, unknown> }): RequestBudget {
  const held = context.state.requestBudget;
  if (!(held instanceof RequestBudget)) throw new Error('no request budget on this context: the route runs outside v1Router');
  return held;
}
