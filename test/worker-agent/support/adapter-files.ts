/**
 * Serves adapter weights the way storage does (a presigned GET URL per file) from an in-test
 * HTTP server on port 0, counting requests per file, and builds the AdapterRef the control
 * plane would send for each.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { AdapterFormat, AdapterRef } from '../../../proto/worker/v1/index';

export class AdapterFileServer {
  readonly requests = new Map<string, number>();
  private readonly files = new Map<string, Buffer>();
  /** Milliseconds every answer waits (to see concurrent fetches overlap). */
  delayMs = 0;

  private constructor(private readonly server: http.Server, readonly url: string) {}

  static async start(): Promise<AdapterFileServer> {
    let files!: AdapterFileServer;
    const server = http.createServer((request, response) => {
      const key = (request.url ?? '/').slice(1).split('?')[0];
      files.requests.set(key, (files.requests.get(key) ?? 0) + 1);
      setTimeout(() => {
        const body = files.files.get(key);
        if (!body) {
          response.writeHead(404).end('NoSuchKey');
          return;
        }
        response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body);
      }, files.delayMs);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    files = new AdapterFileServer(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return files;
  }

  /** Serves `bytes` as `key` and returns the ref of adapter `name` (engine name `<name>.r1`) pointing at it, with a secret-looking query. */
  add(key: string, bytes: Buffer, name: string, format: AdapterFormat = 'ADAPTER_FORMAT_GGUF', overrides: Partial<AdapterRef> = {}): AdapterRef {
    this.files.set(key, bytes);
    return {
      name: `${name}.r1`, displayName: name, format, source: `${this.url}/${key}?X-Amz-Signature=secret`,
      sha256: createHash('sha256').update(bytes).digest('hex'), sizeBytes: bytes.length, rank: 8, scale: 0, ...overrides,
    };
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A POSIX ustar archive of `files` (what a PEFT directory tarred up looks like). */
export function ustar(files: Record<string, Buffer | string>): Buffer {
  const blocks: Buffer[] = [];
  for (const [name, content] of Object.entries(files)) {
    const data = Buffer.isBuffer(content) ? content : Buffer.from(content);
    const header = Buffer.alloc(512);
    header.write(name, 0, 100, 'utf8');
    header.write('0000644\0', 100, 'latin1');
    header.write('0000000\0', 108, 'latin1');
    header.write('0000000\0', 116, 'latin1');
    header.write(`${data.length.toString(8).padStart(11, '0')}\0`, 124, 'latin1');
    header.write('00000000000\0', 136, 'latin1');
    header.write('        ', 148, 'latin1');
    header.write('0', 156, 'latin1');
    header.write('ustar\0', 257, 'latin1');
    header.write('00', 263, 'latin1');
    let sum = 0;
    for (const byte of header) sum += byte;
    header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    blocks.push(header, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** A minimal PEFT LoRA safetensors file: q_proj pairs of one layer, F32 zeros. */
export function peftSafetensors(rank = 8, hidden = 16): Buffer {
  const tensors: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }> = {};
  let offset = 0;
  for (const [suffix, shape] of [['lora_A.weight', [rank, hidden]], ['lora_B.weight', [hidden, rank]]] as const) {
    const size = shape[0] * shape[1] * 4;
    tensors[`base_model.model.model.layers.0.self_attn.q_proj.${suffix}`] = { dtype: 'F32', shape: [...shape], data_offsets: [offset, offset + size] };
    offset += size;
  }
  const header = Buffer.from(JSON.stringify(tensors));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(header.length));
  return Buffer.concat([length, header, Buffer.alloc(offset)]);
}
