import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';

/** The document's own id inside Ajv; every `#/components/...` reference is resolved against it. */
const DOCUMENT_ID = 'https://openapi.test/openapi.json';
/** The top-level fields of an OpenAPI document: annotations to Ajv, which reads only the schemas below them. */
const DOCUMENT_KEYWORDS = ['openapi', 'info', 'jsonSchemaDialect', 'servers', 'security', 'tags', 'paths', 'components', 'webhooks', 'externalDocs'];

type Json = Record<string, any>;

/** A strict draft 2020-12 Ajv holding `document`, so its schemas and their references compile (and fail on an unknown keyword). */
export function documentAjv(document: Json): Ajv2020 {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  ajv.addVocabulary(DOCUMENT_KEYWORDS);
  ajv.addSchema({ ...document, $id: DOCUMENT_ID });
  return ajv;
}

/** `schema` with its `#/…` references made absolute, for compiling outside the document. */
function anchored(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(anchored);
  if (schema === null || typeof schema !== 'object') return schema;
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, key === '$ref' && typeof value === 'string' && value.startsWith('#')
    ? `${DOCUMENT_ID}${value}` : anchored(value)]));
}

interface Route {
  readonly method: string;
  readonly template: string;
  readonly pattern: RegExp;
  readonly operation: Json;
  readonly params: number;
}

/**
 * Checks every answer a test receives against the document: the status must be listed for that
 * path and method, the content type must be one of its media types, and the body (each `data:`
 * line of an SSE stream) must satisfy its schema. `fetch` is a drop-in for the global one (and
 * for the openai SDK's `fetch` option); `settle()` returns what failed since the last call.
 */
export class OpenApiConformance {
  /** `METHOD template` → the statuses seen. */
  readonly covered = new Map<string, Set<number>>();
  private readonly ajv: Ajv2020;
  private readonly routes: Route[] = [];
  private readonly compiled = new Map<unknown, ValidateFunction>();
  private failures: string[] = [];
  private pending: Promise<void>[] = [];

  constructor(private readonly document: Json) {
    this.ajv = documentAjv(document);
    for (const [template, item] of Object.entries<Json>(document.paths)) {
      // `{model}` takes the rest of the path: model ids hold slashes.
      const source = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{model\}/g, '.+').replace(/\{[a-z]+\}/g, '[^/]+');
      for (const method of Object.keys(item)) {
        this.routes.push({ method: method.toUpperCase(), template, pattern: new RegExp(`^${source}$`), operation: item[method], params: (template.match(/\{/g) ?? []).length });
      }
    }
    // Literal paths before templated ones: `/videos/generations` is not a `/videos/{id}`.
    this.routes.sort((a, b) => a.params - b.params);
  }

  /** Every `METHOD template` of the document. */
  operations(): string[] {
    return this.routes.map((route) => `${route.method} ${route.template}`).sort();
  }

  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const requestBody = typeof init?.body === 'string' ? init.body : undefined;
    const response = await fetch(input, init);
    // The openai SDK probes its runtime with `fetch('data:,')`: not an answer of the server.
    if (!request.url.startsWith('http')) return response;
    this.pending.push(this.check(request.method, new URL(request.url).pathname, requestBody, response.clone()).catch((error) => {
      this.failures.push(`${request.method} ${request.url}: ${String(error)}`);
    }));
    return response;
  };

  /** Waits for the answers still being read; returns the failures found since the last call. */
  async settle(): Promise<string[]> {
    while (this.pending.length > 0) await Promise.all(this.pending.splice(0));
    return this.failures.splice(0);
  }

  private async check(method: string, path: string, requestBody: string | undefined, response: Response): Promise<void> {
    const text = await response.text();
    const route = this.routes.find((candidate) => candidate.method === method && candidate.pattern.test(path));
    if (!route) return void this.failures.push(`${method} ${path} (${response.url}): no path and method of the document matches`);
    const where = `${method} ${route.template} → ${response.status}`;
    const key = `${route.method} ${route.template}`;
    if (!this.covered.has(key)) this.covered.set(key, new Set());
    this.covered.get(key)!.add(response.status);

    const listed = route.operation.responses[String(response.status)] ?? route.operation.responses[`${String(response.status)[0]}XX`] ?? route.operation.responses.default;
    if (!listed) return void this.failures.push(`${where}: the status is not in the document (it lists ${Object.keys(route.operation.responses).join(', ')})`);
    const answer = this.resolve(listed);
    for (const [name, header] of Object.entries<Json>(answer.headers ?? {})) {
      if (this.resolve(header).required && !response.headers.has(name)) this.failures.push(`${where}: the required header ${name} is missing`);
    }
    const contentType = response.headers.get('content-type')?.split(';')[0].trim();
    if (!answer.content) {
      if (text.length > 0) this.failures.push(`${where}: the document lists no body, the answer has ${text.length} bytes (${contentType})`);
      return;
    }
    const media = contentType ? answer.content[contentType] : undefined;
    if (!media) return void this.failures.push(`${where}: content-type ${contentType} is not one of ${Object.keys(answer.content).join(', ')}`);
    if (contentType === 'application/json') this.validate(where, media.schema, parse(text));
    else if (contentType === 'text/event-stream') {
      const events = sseData(text);
      // A stream ends with `[DONE]`, or, when it failed after it started, with one error event; a
      // stream of typed events (`x-streamEnd`: the Responses API's) ends with one of the listed types.
      const last = events.length > 0 ? parse(events[events.length - 1]) : undefined;
      const ends: string[] | undefined = media['x-streamEnd'];
      if (ends) {
        const type = last !== null && typeof last === 'object' ? (last as { type?: unknown }).type : undefined;
        if (typeof type !== 'string' || !ends.includes(type)) this.failures.push(`${where}: the stream ends with ${String(type)}, not one of ${ends.join(', ')}`);
      } else {
        const failed = last !== null && typeof last === 'object' && 'error' in last;
        if (last !== '[DONE]' && !failed) this.failures.push(`${where}: the stream ends with neither data: [DONE] nor an error`);
      }
      for (const data of events.filter((event) => event !== '[DONE]')) this.validate(`${where} (event)`, media['x-itemSchema'], parse(data));
    } else this.validate(where, media.schema, text);

    const bodySchema = route.operation.requestBody?.content?.['application/json']?.schema;
    if (response.status < 300 && bodySchema && requestBody !== undefined) this.validate(`${where} (request body)`, bodySchema, parse(requestBody));
  }

  private resolve(node: Json): Json {
    if (typeof node.$ref !== 'string') return node;
    const target = node.$ref.slice(2).split('/').reduce((parent: Json, part: string) => parent?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], this.document);
    if (!target) throw new Error(`unresolved ${node.$ref}`);
    return this.resolve(target);
  }

  private validate(where: string, schema: unknown, value: unknown): void {
    let validate = this.compiled.get(schema);
    if (!validate) {
      validate = this.ajv.compile(anchored(schema) as object);
      this.compiled.set(schema, validate);
    }
    if (!validate(value)) this.failures.push(`${where}: ${this.ajv.errorsText(validate.errors, { separator: '; ' })} in ${JSON.stringify(value).slice(0, 400)}`);
  }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The `data:` payloads of an SSE body, in order. */
function sseData(text: string): string[] {
  return text.split(/\r?\n\r?\n/).map((event) => event.split(/\r?\n/).filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).replace(/^ /, '')).join('\n')).filter((data) => data.length > 0);
}
