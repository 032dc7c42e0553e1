/**
 * What is wrong with an adapter's file, naming the part at fault (`field`: a GGUF key, a
 * tensor, `adapter_config.json`'s `r`, a tar entry). Callers turn it into their own error: the
 * control plane a 400 naming its input field, the agent an `adapter_load_failed` job failure.
 * Its message never holds a path or a URL (it may reach a client).
 */
export class AdapterFormatError extends Error {
  constructor(readonly field: string, message: string) {
    super(message);
    this.name = 'AdapterFormatError';
  }
}
