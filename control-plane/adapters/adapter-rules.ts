import { AppError } from '../errors/app-error';
import { quoteValue } from '../errors/quote-value';
import { ADAPTER_FORMATS, type AdapterFormat } from './adapter.entities';

/** docs/adapters.md: no `/`, so an adapter name is never a catalog model id or `shared/<model>`. */
export const ADAPTER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** `org/name` with an optional `@revision` (a branch, tag or commit). */
const HUGGING_FACE_REPO = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\/[A-Za-z0-9][A-Za-z0-9._-]{0,95}(@[A-Za-z0-9][A-Za-z0-9._/-]{0,127})?$/;
const SHA256 = /^[0-9a-f]{64}$/;
/** The ranks adapters are trained with; above vLLM's largest `--max-lora-rank` nothing serves them. */
export const MAX_ADAPTER_RANK = 256;

export function checkAdapterName(name: string): string {
  if (!ADAPTER_NAME.test(name)) {
    throw new AppError('invalid_request', `name must be 1 to 64 characters of letters, digits, '.', '_' and '-', starting with a letter or digit (no '/'), got ${quoteValue(name)}`, { param: 'name' });
  }
  return name;
}

export function checkHuggingFaceRepo(repo: string): string {
  if (!HUGGING_FACE_REPO.test(repo) || repo.includes('..')) {
    throw new AppError('invalid_request', `huggingFaceRepo must be a Hugging Face repo id, org/name with an optional @revision, got ${quoteValue(repo)}`, { param: 'huggingFaceRepo' });
  }
  return repo;
}

export function checkRank(rank: number | null | undefined): number | null {
  if (rank === null || rank === undefined) return null;
  if (!Number.isInteger(rank) || rank < 1 || rank > MAX_ADAPTER_RANK) {
    throw new AppError('invalid_request', `rank must be an integer from 1 to ${MAX_ADAPTER_RANK}, got ${quoteValue(rank)}`, { param: 'rank' });
  }
  return rank;
}

export function checkFormat(format: string | null | undefined): AdapterFormat | null {
  if (format === null || format === undefined) return null;
  if (!(ADAPTER_FORMATS as readonly string[]).includes(format)) {
    throw new AppError('invalid_request', `format must be one of ${ADAPTER_FORMATS.join(', ')}, got ${quoteValue(format)}`, { param: 'format' });
  }
  return format as AdapterFormat;
}

/** A declared checksum: `sha256:<hex>` or the bare hex, lower-cased. */
export function checkChecksum(checksum: string | null | undefined): string | null {
  if (checksum === null || checksum === undefined) return null;
  const hex = checksum.trim().toLowerCase().replace(/^sha256:/, '');
  if (!SHA256.test(hex)) throw new AppError('invalid_request', `checksum must be a SHA-256 in hex (64 digits, optionally prefixed sha256:), got ${quoteValue(checksum)}`, { param: 'checksum' });
  return hex;
}

/** The format of weights whose format was not declared, from their first bytes: GGUF's magic, a tar's `ustar`, else a safetensors header. */
export function sniffFormat(bytes: Buffer): AdapterFormat {
  if (bytes.subarray(0, 4).toString('latin1') === 'GGUF') return 'GGUF';
  if (bytes.length >= 263 && bytes.subarray(257, 262).toString('latin1') === 'ustar') return 'PEFT_TAR';
  return 'SAFETENSORS';
}
