/** The slice of pino's API the agent uses, so tests can pass a silent logger. */
export interface AgentLogger {
  info(context: object, message?: string): void;
  warn(context: object, message?: string): void;
  error(context: object, message?: string): void;
}

export const silentLogger: AgentLogger = { info() {}, warn() {}, error() {} };
