import { createHash } from 'node:crypto';

/**
 * What prefix-aware routing keys a request by: two hashes of the prompt as the engine will see
 * it (the chat messages in order, the tools; never the sampling fields, which do not change the
 * cached prefix).
 *
 * - `application`: the leading instructions: every message before the first user turn, and the
 *   tools (a chat application's long system prompt), or a completions prompt's first block.
 *   Requests that share it share the engine's cached prefix of it.
 * - `conversation`: the application part plus the first user turn. Every later turn of a
 *   conversation re-sends the same start, so it keys the whole history: its earlier turns are
 *   the prefix the engine may still hold.
 *
 * Both are computed alike on every server (no shared state), so two servers routing the same
 * conversation agree. An image part counts by a digest of its URL or data (a stable stand-in
 * for its tokens); its bytes are not read twice.
 *
 * Both also hash the tenant (the workspace the job is for) ahead of the prompt: an engine reuses
 * a prefix only within one tenant (its cache salt, dispatch/cache-salts.ts), so two tenants'
 * equal prompts have nothing to gain from one replica, and affinity must not put them together
 * for it (a guest's prompt landing where the owner's prefix is cached would also time the owner).
 * One tenant's conversations still meet on their home replicas.
 */
export interface PromptKey {
  readonly application: number;
  readonly conversation: number;
  /**
   * Whether a replica may already hold part of the prompt: it has instructions (messages before
   * the first user turn, tools) or earlier turns. A chat that is one user message and nothing
   * else is cached nowhere yet, so where it goes only matters for load. Completions prompts
   * count as shared (their start may be any application's template).
   */
  readonly shared: boolean;
}

/** Characters of a completions prompt that key its application (about 256 tokens of English). */
export const COMPLETION_APPLICATION_CHARS = 1024;
/** Characters of a completions prompt that key its "conversation" (its longer shared start). */
export const COMPLETION_CONVERSATION_CHARS = 4096;

/** The key of a chat or completions body's parsed fields for `tenant`'s job; null when there is no prompt to key by. */
export function promptKey(fields: Record<string, unknown>, tenant: string): PromptKey | null {
  if (Array.isArray(fields.messages)) return chatKey(fields.messages, fields.tools, tenant);
  const prompt = Array.isArray(fields.prompt) && typeof fields.prompt[0] === 'string' ? fields.prompt[0] : fields.prompt;
  if (typeof prompt !== 'string' || prompt.length === 0) return null;
  return {
    application: hash32(tenant, prompt.slice(0, COMPLETION_APPLICATION_CHARS)),
    conversation: hash32(tenant, prompt.slice(0, COMPLETION_CONVERSATION_CHARS)),
    shared: true,
  };
}

function chatKey(messages: unknown[], tools: unknown, tenant: string): PromptKey | null {
  if (messages.length === 0) return null;
  const digest = createHash('sha1').update(tenant).update('\u0000');
  if (tools !== undefined) digest.update(JSON.stringify(tools));
  let index = 0;
  for (; index < messages.length && roleOf(messages[index]) !== 'user'; index++) writeMessage(digest, messages[index]);
  const instructions = index > 0 || tools !== undefined;
  const application = instructions ? digest.copy().digest().readUInt32BE(0) : 0;
  if (index < messages.length) writeMessage(digest, messages[index]);
  const conversation = digest.digest().readUInt32BE(0);
  // No instructions to share: every such prompt would have one "application" and the same two
  // home replicas (a flood of system-prompt-less chats piled onto them); each conversation is its own.
  return { application: instructions ? application : conversation, conversation, shared: instructions || index + 1 < messages.length };
}

function roleOf(message: unknown): unknown {
  return typeof message === 'object' && message !== null ? (message as { role?: unknown }).role : undefined;
}

/** A message as the engine's chat template sees it: role, name, content (text and image digests), tool calls. */
function writeMessage(digest: ReturnType<typeof createHash>, message: unknown): void {
  if (typeof message !== 'object' || message === null) return;
  const { role, name, content, tool_calls: toolCalls, tool_call_id: toolCallId } = message as Record<string, unknown>;
  digest.update(`\u0000${String(role)}\u0000${name === undefined ? '' : String(name)}\u0000`);
  if (typeof content === 'string') digest.update(content);
  else if (Array.isArray(content)) {
    for (const part of content) {
      if (typeof part !== 'object' || part === null) continue;
      const { type, text, image_url: imageUrl } = part as Record<string, unknown>;
      if (typeof text === 'string') digest.update(text);
      else if (type === 'image_url' && imageUrl) {
        const url = typeof imageUrl === 'string' ? imageUrl : (imageUrl as { url?: unknown }).url;
        digest.update(`\u0001image:${createHash('sha1').update(String(url)).digest('hex')}`);
      } else digest.update(JSON.stringify(part));
    }
  }
  if (toolCalls !== undefined) digest.update(JSON.stringify(toolCalls));
  if (toolCallId !== undefined) digest.update(String(toolCallId));
}

/** 32 bits of SHA-1 of the tenant and the text: routing needs spread, not secrecy, and crypto's native hash beats a JS loop on long prompts. */
function hash32(tenant: string, text: string): number {
  return createHash('sha1').update(tenant).update('\u0000').update(text).digest().readUInt32BE(0);
}
