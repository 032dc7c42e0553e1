import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One histogram data point of an OTLP/JSON export, its attributes flattened to strings. */
export interface ReceivedPoint {
  attributes: Record<string, string>;
  count: number;
  sum: number;
}

/** One OTLP/HTTP metrics export as the receiver got it. */
export interface ReceivedExport {
  headers: http.IncomingHttpHeaders;
  resource: Record<string, string>;
  /** Metric name → its histogram data points. */
  histograms: Map<string, ReceivedPoint[]>;
}

interface OtlpValue { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean }
interface OtlpAttribute { key: string; value: OtlpValue }

/**
 * A collector at the boundary we do not own: an OTLP/HTTP receiver on 127.0.0.1 that takes
 * `POST /v1/metrics` in the JSON encoding, answers as a collector does (200 `{}`), and keeps
 * each export. Anything else is a 404, so a wrong path fails the test instead of passing silently.
 */
export async function startOtlpReceiver(): Promise<{ url: string; exports: ReceivedExport[]; close(): Promise<void> }> {
  const exports: ReceivedExport[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/metrics' || !String(request.headers['content-type']).startsWith('application/json')) {
        response.writeHead(404).end();
        return;
      }
      exports.push(parseExport(request.headers, JSON.parse(Buffer.concat(chunks).toString('utf8'))));
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

function flatten(attributes: OtlpAttribute[] | undefined): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const { key, value } of attributes ?? []) flat[key] = String(value.stringValue ?? value.intValue ?? value.doubleValue ?? value.boolValue);
  return flat;
}

function parseExport(headers: http.IncomingHttpHeaders, body: {
  resourceMetrics: Array<{
    resource?: { attributes?: OtlpAttribute[] };
    scopeMetrics: Array<{ metrics: Array<{ name: string; histogram?: { dataPoints: Array<{ attributes?: OtlpAttribute[]; count: string | number; sum?: number }> } }> }>;
  }>;
}): ReceivedExport {
  const histograms = new Map<string, ReceivedPoint[]>();
  let resource: Record<string, string> = {};
  for (const resourceMetrics of body.resourceMetrics) {
    resource = flatten(resourceMetrics.resource?.attributes);
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        if (!metric.histogram) continue;
        const points = histograms.get(metric.name) ?? [];
        for (const point of metric.histogram.dataPoints) points.push({ attributes: flatten(point.attributes), count: Number(point.count), sum: Number(point.sum ?? 0) });
        histograms.set(metric.name, points);
      }
    }
  }
  return { headers, resource, histograms };
}
