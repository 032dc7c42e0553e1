/**
 * The engine cannot serve at all (a model file that is missing or does not load, no binary
 * for this platform). `main` prints the message as the agent's last line and exits with
 * code 3, which the local provider shows on the replica; restarting will not fix it by itself.
 */
export class EngineStartError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'EngineStartError';
  }
}
