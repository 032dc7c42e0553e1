/**
 * An error without what it may carry of the owner's data: a failed query's parameters hold line
 * bodies and answers, which no log of ours holds (as the request path logs no prompts).
 */
export function withoutContent(error: unknown): { name: string; message: string; code?: unknown; stack?: string } {
  if (!(error instanceof Error)) return { name: typeof error, message: 'a non-Error value was thrown' };
  const code = (error as { code?: unknown; driverError?: { code?: unknown } }).driverError?.code ?? (error as { code?: unknown }).code;
  return { name: error.name, message: error.message, ...(code === undefined ? {} : { code }), ...(error.stack ? { stack: error.stack.split('\n').slice(1).join('\n') } : {}) };
}
