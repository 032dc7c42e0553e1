/**
 * Decodes an OTLP traces request (`ExportTraceServiceRequest`) into plain objects by the field
 * numbers of opentelemetry-proto, as any protobuf reader would: a scalar field left out reads as
 * its default (0, '', no bytes), so two encoders that differ only in writing defaults or in field
 * order decode equal, and anything else (a wrong number, type, value or nesting) does not.
 * AnyValue is a oneof: its fields are kept only when present.
 */
type Kind = 'string' | 'bytes' | 'varint' | 'fixed64' | 'fixed32' | 'double' | { message: string };
interface Field { readonly name: string; readonly kind: Kind; readonly repeated?: boolean }

const SCHEMA: Record<string, Record<number, Field>> = {
  ExportTraceServiceRequest: { 1: { name: 'resourceSpans', kind: { message: 'ResourceSpans' }, repeated: true } },
  ResourceSpans: { 1: { name: 'resource', kind: { message: 'Resource' } }, 2: { name: 'scopeSpans', kind: { message: 'ScopeSpans' }, repeated: true }, 3: { name: 'schemaUrl', kind: 'string' } },
  Resource: { 1: { name: 'attributes', kind: { message: 'KeyValue' }, repeated: true }, 2: { name: 'droppedAttributesCount', kind: 'varint' } },
  ScopeSpans: { 1: { name: 'scope', kind: { message: 'InstrumentationScope' } }, 2: { name: 'spans', kind: { message: 'Span' }, repeated: true }, 3: { name: 'schemaUrl', kind: 'string' } },
  InstrumentationScope: {
    1: { name: 'name', kind: 'string' }, 2: { name: 'version', kind: 'string' }, 3: { name: 'attributes', kind: { message: 'KeyValue' }, repeated: true },
    4: { name: 'droppedAttributesCount', kind: 'varint' },
  },
  Span: {
    1: { name: 'traceId', kind: 'bytes' }, 2: { name: 'spanId', kind: 'bytes' }, 3: { name: 'traceState', kind: 'string' }, 4: { name: 'parentSpanId', kind: 'bytes' },
    5: { name: 'name', kind: 'string' }, 6: { name: 'kind', kind: 'varint' }, 7: { name: 'startTimeUnixNano', kind: 'fixed64' }, 8: { name: 'endTimeUnixNano', kind: 'fixed64' },
    9: { name: 'attributes', kind: { message: 'KeyValue' }, repeated: true }, 10: { name: 'droppedAttributesCount', kind: 'varint' },
    11: { name: 'events', kind: { message: 'Event' }, repeated: true }, 12: { name: 'droppedEventsCount', kind: 'varint' },
    13: { name: 'links', kind: { message: 'Link' }, repeated: true }, 14: { name: 'droppedLinksCount', kind: 'varint' },
    15: { name: 'status', kind: { message: 'Status' } }, 16: { name: 'flags', kind: 'fixed32' },
  },
  Event: {
    1: { name: 'timeUnixNano', kind: 'fixed64' }, 2: { name: 'name', kind: 'string' }, 3: { name: 'attributes', kind: { message: 'KeyValue' }, repeated: true },
    4: { name: 'droppedAttributesCount', kind: 'varint' },
  },
  Link: {
    1: { name: 'traceId', kind: 'bytes' }, 2: { name: 'spanId', kind: 'bytes' }, 3: { name: 'traceState', kind: 'string' },
    4: { name: 'attributes', kind: { message: 'KeyValue' }, repeated: true }, 5: { name: 'droppedAttributesCount', kind: 'varint' }, 6: { name: 'flags', kind: 'fixed32' },
  },
  Status: { 2: { name: 'message', kind: 'string' }, 3: { name: 'code', kind: 'varint' } },
  KeyValue: { 1: { name: 'key', kind: 'string' }, 2: { name: 'value', kind: { message: 'AnyValue' } } },
  AnyValue: {
    1: { name: 'stringValue', kind: 'string' }, 2: { name: 'boolValue', kind: 'varint' }, 3: { name: 'intValue', kind: 'varint' }, 4: { name: 'doubleValue', kind: 'double' },
    5: { name: 'arrayValue', kind: { message: 'ArrayValue' } }, 6: { name: 'kvlistValue', kind: { message: 'KeyValueList' } }, 7: { name: 'bytesValue', kind: 'bytes' },
  },
  ArrayValue: { 1: { name: 'values', kind: { message: 'AnyValue' }, repeated: true } },
  KeyValueList: { 1: { name: 'values', kind: { message: 'KeyValue' }, repeated: true } },
};

const WIRE_OF: Record<string, number> = { string: 2, bytes: 2, varint: 0, fixed64: 1, fixed32: 5, double: 1 };

export function decodeMessage(bytes: Uint8Array, type = 'ExportTraceServiceRequest'): Record<string, unknown> {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const schema = SCHEMA[type];
  const decoded: Record<string, unknown> = {};
  if (type !== 'AnyValue') {
    for (const field of Object.values(schema)) decoded[field.name] = field.repeated ? [] : typeof field.kind === 'object' ? undefined : defaultOf(field.kind);
  }
  let at = 0;
  const varint = (): bigint => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (at >= buffer.length) throw new Error(`${type}: truncated varint`);
      const byte = buffer[at++];
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < buffer.length) {
    const key = Number(varint());
    const number = key >>> 3;
    const wire = key & 7;
    const field = schema[number];
    if (!field) throw new Error(`${type}: unknown field ${number}`);
    const kind = field.kind;
    const expectedWire = typeof kind === 'object' ? 2 : WIRE_OF[kind];
    if (wire !== expectedWire) throw new Error(`${type}.${field.name}: wire type ${wire}, expected ${expectedWire}`);
    let value: unknown;
    if (wire === 2) {
      const length = Number(varint());
      const part = buffer.subarray(at, at + length);
      if (part.length !== length) throw new Error(`${type}.${field.name}: truncated`);
      at += length;
      value = typeof kind === 'object' ? decodeMessage(part, kind.message) : kind === 'string' ? part.toString('utf8') : part.toString('hex');
    } else if (wire === 0) {
      value = BigInt.asIntN(64, varint()).toString();
    } else if (wire === 1) {
      value = kind === 'double' ? buffer.readDoubleLE(at) : buffer.readBigUInt64LE(at).toString();
      at += 8;
    } else {
      value = String(buffer.readUInt32LE(at));
      at += 4;
    }
    if (field.repeated) (decoded[field.name] as unknown[]).push(value);
    else decoded[field.name] = value;
  }
  if (at !== buffer.length) throw new Error(`${type}: overran`);
  return decoded;
}

function defaultOf(kind: Exclude<Kind, { message: string }>): unknown {
  return kind === 'string' || kind === 'bytes' ? '' : kind === 'double' ? 0 : '0';
}
