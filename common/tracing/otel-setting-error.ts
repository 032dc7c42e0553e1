/** A variable this process refuses; `variable` is its name (the server turns it into a ConfigError, the agent exits 2). */
export class OtelSettingError extends Error {
  constructor(readonly variable: string, readonly problem: string) {
    super(`invalid tracing configuration: ${variable}: ${problem}`);
  }
}
