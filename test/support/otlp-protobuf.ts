/**
 * Reads an OTLP/HTTP protobuf traces export (`ExportTraceServiceRequest`, opentelemetry-proto's
 * trace/v1 and common/v1 messages) into the shape its JSON encoding has, so a test's receiver
 * decodes both alike. Written from the wire format, not with the exporter's own serializer: a
 * field the exporter put in the wrong place fails the test. Only what the tests look at is kept
 * (unknown fields are skipped, as any protobuf reader does).
 */

type Fields = Map<number, Array<Buffer | bigint>>;

/** One message's fields by number: length-delimited ones as their bytes, the others as their number. */
function fieldsOf(bytes: Buffer): Fields {
  const fields: Fields = new Map();
  let at = 0;
  const varint = (): bigint => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = bytes[at++];
      if (byte === undefined) throw new Error('truncated protobuf varint');
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < bytes.length) {
    const key = Number(varint());
    const number = key >>> 3;
    let value: Buffer | bigint;
    switch (key & 7) {
      case 0: value = varint(); break;
      case 1: value = bytes.readBigUInt64LE(at); at += 8; break;
      case 2: { const length = Number(varint()); value = bytes.subarray(at, at + length); at += length; break; }
      case 5: value = BigInt(bytes.readUInt32LE(at)); at += 4; break;
      default: throw new Error(`unsupported protobuf wire type ${key & 7}`);
    }
    if (at > bytes.length) throw new Error('truncated protobuf message');
    const list = fields.get(number) ?? [];
    list.push(value);
    fields.set(number, list);
  }
  return fields;
}

const messages = (fields: Fields, number: number): Buffer[] => (fields.get(number) ?? []) as Buffer[];
const message = (fields: Fields, number: number): Buffer | undefined => messages(fields, number)[0];
const text = (fields: Fields, number: number): string | undefined => message(fields, number)?.toString('utf8');
const hex = (fields: Fields, number: number): string => message(fields, number)?.toString('hex') ?? '';
const integer = (fields: Fields, number: number): bigint | undefined => (fields.get(number) as bigint[] | undefined)?.[0];

/** common.v1.AnyValue: string 1, bool 2, int 3, double 4, array 5. */
function anyValueOf(bytes: Buffer): Record<string, unknown> {
  const fields = fieldsOf(bytes);
  if (fields.has(1)) return { stringValue: text(fields, 1) };
  if (fields.has(2)) return { boolValue: integer(fields, 2) === 1n };
  if (fields.has(3)) return { intValue: BigInt.asIntN(64, integer(fields, 3)!).toString() };
  if (fields.has(4)) return { doubleValue: Buffer.from(new BigUint64Array([integer(fields, 4)!]).buffer).readDoubleLE(0) };
  if (fields.has(5)) return { arrayValue: { values: messages(fieldsOf(message(fields, 5)!), 1).map(anyValueOf) } };
  return {};
}

/** A list of common.v1.KeyValue (key 1, value 2). */
function attributesOf(list: Buffer[]): Array<{ key: string; value: Record<string, unknown> }> {
  return list.map((bytes) => {
    const fields = fieldsOf(bytes);
    const value = message(fields, 2);
    return { key: text(fields, 1) ?? '', value: value ? anyValueOf(value) : {} };
  });
}

/** trace.v1.Span: trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6, start 7, end 8, attributes 9, links 13, status 15. */
function spanOf(bytes: Buffer): Record<string, unknown> {
  const fields = fieldsOf(bytes);
  const status = message(fields, 15);
  const statusFields = status ? fieldsOf(status) : new Map() as Fields;
  return {
    traceId: hex(fields, 1), spanId: hex(fields, 2), parentSpanId: hex(fields, 4), name: text(fields, 5) ?? '', kind: Number(integer(fields, 6) ?? 0n),
    startTimeUnixNano: String(integer(fields, 7) ?? 0n), endTimeUnixNano: String(integer(fields, 8) ?? 0n),
    attributes: attributesOf(messages(fields, 9)),
    links: messages(fields, 13).map((link) => {
      const linkFields = fieldsOf(link);
      return { traceId: hex(linkFields, 1), spanId: hex(linkFields, 2) };
    }),
    // Status: message 2, code 3.
    status: { code: Number(integer(statusFields, 3) ?? 0n), message: text(statusFields, 2) },
  };
}

/** ExportTraceServiceRequest (resource_spans 1) → ResourceSpans (resource 1, scope_spans 2) → ScopeSpans (spans 2), as OTLP/JSON has it. */
export function decodeTraceRequest(body: Buffer): { resourceSpans: unknown[] } {
  return {
    resourceSpans: messages(fieldsOf(body), 1).map((resourceSpans) => {
      const fields = fieldsOf(resourceSpans);
      const resource = message(fields, 1);
      return {
        resource: { attributes: resource ? attributesOf(messages(fieldsOf(resource), 1)) : [] },
        scopeSpans: messages(fields, 2).map((scopeSpans) => ({ spans: messages(fieldsOf(scopeSpans), 2).map(spanOf) })),
      };
    }),
  };
}
