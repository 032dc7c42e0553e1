import fs from 'node:fs';
import path from 'node:path';
import { Command, Option } from 'commander';
import { UsageError } from '../errors';
import { graphql, rest } from '../graphql-client';
import { OPERATIONS } from '../operations';
import { type CommonOptions, connectionOf, withConnection } from '../options';
import { fields, printJson } from '../output';

const ENDPOINTS = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings'];

interface Batch {
  id: string;
  deploymentId: string;
  endpoint: string;
  model: string;
  status: string;
  inputFileId: string;
  outputFileId: string | null;
  errorFileId: string | null;
  requestCounts: { total: number; completed: number; failed: number };
  usage: { inputTokens: number; cachedTokens: number; outputTokens: number; totalTokens: number };
  errors: Array<{ code: string; message: string; param: string | null; line: number | null }> | null;
  createdAt: string;
  expiresAt: string;
  completedAt: string | null;
}

/** The OpenAI batch object POST /batches answers (the fields the CLI reads). */
interface OpenAIBatch {
  id: string;
  status: string;
  input_file_id: string;
  endpoint: string;
}

/** `batch upload|get`: batches over a deployment's OpenAI Batch API (PLATFORM_API_KEY). */
export function batchCommand(): Command {
  const batch = new Command('batch').description('batches of the OpenAI Batch API on a deployment');

  withConnection(batch.command('upload <deployment-slug> <file>'), 'workspace')
    .description('upload a JSONL file of requests (POST /d/<slug>/v1/files, purpose batch) and create a batch of it (POST /d/<slug>/v1/batches); prints the batch id')
    .addOption(new Option('--endpoint <path>', 'the endpoint every line calls').choices(ENDPOINTS).default('/v1/chat/completions'))
    .addOption(new Option('--completion-window <window>', 'OpenAI\'s completion_window').default('24h'))
    .addOption(new Option('--metadata <key=value...>', 'string pairs kept with the batch (repeatable)'))
    .action(async (slug: string, file: string, options: CommonOptions & { endpoint: string; completionWindow: string; metadata?: string[] }) => {
      const { connection, output } = connectionOf(options, 'workspace');
      const metadata = metadataOf(options.metadata);
      let blob: Blob;
      try {
        blob = await fs.openAsBlob(file);
      } catch (error) {
        throw new UsageError(`cannot read ${file}: ${(error as Error).message}`);
      }
      const base = `/d/${encodeURIComponent(slug)}/v1`;
      const form = new FormData();
      form.append('purpose', 'batch');
      form.append('file', blob, path.basename(file));
      const uploaded = await rest<{ id: string }>(connection, `${base}/files`, { method: 'POST', form });
      const created = await rest<OpenAIBatch>(connection, `${base}/batches`, {
        method: 'POST', json: { input_file_id: uploaded.id, endpoint: options.endpoint, completion_window: options.completionWindow, ...(metadata ? { metadata } : {}) },
      });
      if (output.json) return printJson(output, created);
      output.write(`${created.id}\n`);
    });

  withConnection(batch.command('get <id>'), 'workspace')
    .description('show a batch: status, request counts, usage and, when it failed, why')
    .action(async (id: string, options: CommonOptions) => {
      const { connection, output } = connectionOf(options, 'workspace');
      const { batch: found } = await graphql<{ batch: Batch }>(connection, OPERATIONS.batch, { id });
      if (output.json) return printJson(output, found);
      const counts = found.requestCounts;
      output.write(fields([
        ['id', found.id], ['deployment', found.deploymentId], ['endpoint', found.endpoint], ['model', found.model], ['status', found.status],
        ['requests', `${counts.completed} completed, ${counts.failed} failed of ${counts.total}`],
        ['tokens', `${found.usage.inputTokens} in (${found.usage.cachedTokens} cached), ${found.usage.outputTokens} out`],
        ['input file', found.inputFileId], ['output file', found.outputFileId], ['error file', found.errorFileId],
        ['created', found.createdAt], ['expires', found.expiresAt], ['completed', found.completedAt],
      ]));
      for (const error of found.errors ?? []) output.write(`error: ${error.code}${error.line ? ` (line ${error.line})` : ''}: ${error.message}\n`);
    });

  return batch;
}

function metadataOf(pairs: string[] | undefined): Record<string, string> | undefined {
  if (!pairs) return undefined;
  const metadata: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new UsageError(`--metadata takes key=value, not ${JSON.stringify(pair)}`);
    metadata[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return metadata;
}
