import { platformVersion } from '../../common/agent-binary';
import { Tracing } from '../../common/tracing/tracing';
import type { TracingConfig } from './tracing-config';

/**
 * The server's tracing, or null when the configuration turns it off (docs/tracing.md). Made by
 * whoever starts the server before its logger (whose mixin names the active span) and given to
 * the control plane and the gateway; shut down last, so the spans of a stopping server go out.
 */
export function startTracing(config: TracingConfig): Tracing | null {
  if (!config.settings) return null;
  return Tracing.start(config.settings, 'inference-platform', { 'service.version': platformVersion() });
}
