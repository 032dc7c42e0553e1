/**
 * What the `fetch-agent` init container's script does, without its image:
 *   curl -fsSL --retry 5 -o "$AGENT_FILE" "$AGENT_URL" && echo "$AGENT_SHA256  $AGENT_FILE" | sha256sum -c - && chmod 0755 "$AGENT_FILE"
 * — the download with curl's exit codes and messages (22 for an HTTP error, 7 when nothing
 * listens, 6 for an unknown host, 28 on timeout), then sha256sum's check (exit 1 and `FAILED`
 * on a mismatch) and the executable bit. curl's own retries of transient errors are not played.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';

export interface ScriptResult {
  readonly exitCode: number;
  readonly output: readonly string[];
}

const DOWNLOAD_TIMEOUT_MS = 60_000;

/** `env` is the init container's resolved environment; `hostPath` is where AGENT_FILE lands on this machine. */
export async function fetchAgent(env: Readonly<Record<string, string>>, hostPath: string, signal: AbortSignal): Promise<ScriptResult> {
  const file = env.AGENT_FILE || '/agent/worker-agent';
  if (!env.AGENT_URL) return { exitCode: 2, output: ['curl: (2) no URL specified', "curl: try 'curl --help' or 'curl --manual' for more information"] };
  let url: URL;
  try {
    url = new URL(env.AGENT_URL);
  } catch {
    return { exitCode: 3, output: ['curl: (3) URL rejected: Malformed input to a URL function'] };
  }
  let bytes: Buffer;
  try {
    const response = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS)]), redirect: 'follow' });
    if (response.status >= 400) {
      await response.body?.cancel();
      return { exitCode: 22, output: [`curl: (22) The requested URL returned error: ${response.status}`] };
    }
    bytes = Buffer.from(await response.arrayBuffer());
  } catch (error) {
    return curlFailure(url, error);
  }
  fs.writeFileSync(hostPath, bytes);
  const expected = (env.AGENT_SHA256 ?? '').trim().toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(expected)) return { exitCode: 1, output: ['sha256sum: standard input: no properly formatted checksum lines found'] };
  const actual = crypto.createHash('sha256').update(bytes).digest('hex');
  if (actual !== expected) return { exitCode: 1, output: [`${file}: FAILED`, 'sha256sum: WARNING: 1 computed checksum did NOT match'] };
  fs.chmodSync(hostPath, 0o755);
  return { exitCode: 0, output: [`${file}: OK`] };
}

function curlFailure(url: URL, error: unknown): ScriptResult {
  const cause = (error as { cause?: { code?: string } }).cause;
  const code = cause?.code ?? (error as { code?: string }).code;
  const name = (error as Error).name;
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  if (name === 'TimeoutError' || name === 'AbortError') return { exitCode: 28, output: [`curl: (28) Operation timed out after ${DOWNLOAD_TIMEOUT_MS} milliseconds with 0 bytes received`] };
  if (code === 'ECONNREFUSED') return { exitCode: 7, output: [`curl: (7) Failed to connect to ${url.hostname} port ${port} after 0 ms: Couldn't connect to server`] };
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return { exitCode: 6, output: [`curl: (6) Could not resolve host: ${url.hostname}`] };
  return { exitCode: 56, output: [`curl: (56) Failure when receiving data from the peer (${(error as Error).message})`] };
}
