import type { AttributeValue, Attributes, HrTime, Link, SpanContext } from '@opentelemetry/api';
import type { InstrumentationScope } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { lengthSize, ProtobufWriter } from './protobuf-writer';

/**
 * OTLP's protobuf messages for traces (opentelemetry-proto: trace/v1/trace.proto,
 * common/v1/common.proto, collector/trace/v1/trace_service.proto), written by hand from an
 * ended span, the same message the SDK's own serializer (`@opentelemetry/otlp-transformer`)
 * makes for it (test/unit/tracing/otlp-span-encoder.test.ts decodes both and compares). Each
 * span is encoded on its own as it ends, so the span object can be collected young instead of
 * waiting in a queue for its batch; a batch's request is then assembled from those bytes.
 */

const WIRE = { varint: 0, fixed64: 1, bytes: 2, fixed32: 5 } as const;
/** Span.flags: the W3C trace flags in the low byte, then whether the parent's remoteness is known (always, here) and whether it was remote. */
const FLAGS_HAS_IS_REMOTE = 0x100;
const FLAGS_IS_REMOTE = 0x200;
/** int64's range: integers inside it go as `int_value`, others (and fractions) as `double_value`, as the SDK's serializer does. */
const INT64_MIN = -(2 ** 63);
const INT64_LIMIT = 2 ** 63;

/** Appends `span` as one `ScopeSpans.spans` entry (field 2: tag, length, Span), ready to be concatenated into a batch. */
export function writeSpanEntry(writer: ProtobufWriter, span: ReadableSpan): void {
  writer.tag(2, WIRE.bytes);
  // Spans are 150–600 bytes: two bytes of length saves moving them.
  const begun = writer.begin(2);
  const context = span.spanContext();
  writeContext(writer, context);
  const parent = span.parentSpanContext;
  if (parent?.spanId) {
    writer.tag(4, WIRE.bytes);
    writer.hex(parent.spanId);
  }
  writer.tag(5, WIRE.bytes);
  writer.string(span.name);
  // OTLP's SpanKind counts from UNSPECIFIED = 0; the API's from INTERNAL = 0.
  writer.tag(6, WIRE.varint);
  writer.varint(span.kind + 1);
  writer.tag(7, WIRE.fixed64);
  writeTime(writer, span.startTime);
  writer.tag(8, WIRE.fixed64);
  writeTime(writer, span.endTime);
  writeAttributes(writer, 9, span.attributes);
  writeCount(writer, 10, span.droppedAttributesCount);
  for (const event of span.events) {
    writer.tag(11, WIRE.bytes);
    const eventBegun = writer.begin();
    writer.tag(1, WIRE.fixed64);
    writeTime(writer, event.time);
    writer.tag(2, WIRE.bytes);
    writer.string(event.name);
    if (event.attributes) writeAttributes(writer, 3, event.attributes);
    writeCount(writer, 4, event.droppedAttributesCount ?? 0);
    writer.end(eventBegun);
  }
  writeCount(writer, 12, span.droppedEventsCount);
  for (const link of span.links) writeLink(writer, link);
  writeCount(writer, 14, span.droppedLinksCount);
  writer.tag(15, WIRE.bytes);
  const statusBegun = writer.begin();
  if (span.status.message) {
    writer.tag(2, WIRE.bytes);
    writer.string(span.status.message);
  }
  writeCount(writer, 3, span.status.code);
  writer.end(statusBegun);
  writer.tag(16, WIRE.fixed32);
  writer.fixed32(flagsOf(context, parent?.isRemote));
  writer.end(begun);
}

/** One run of span entries (writeSpanEntry's bytes, concatenated) of one instrumentation scope. */
export interface ScopeRun {
  readonly scope: InstrumentationScope;
  readonly entries: Uint8Array;
}

/**
 * A whole `ExportTraceServiceRequest`: one ResourceSpans (a tracer provider has one resource)
 * holding a ScopeSpans per run of spans of one instrumentation scope (one, in practice).
 */
export function encodeExportRequest(resource: Resource, runs: readonly ScopeRun[]): Buffer {
  const entryBytes = runs.reduce((total, run) => total + run.entries.length, 0);
  const writer = new ProtobufWriter(entryBytes + 1_024);
  writer.tag(1, WIRE.bytes);
  const begun = writer.begin(lengthSize(entryBytes + 512));
  writeResource(writer, resource);
  for (const run of runs) {
    writer.tag(2, WIRE.bytes);
    const runBegun = writer.begin(lengthSize(run.entries.length + 64));
    writeScope(writer, run.scope);
    writer.raw(run.entries);
    if (run.scope.schemaUrl) {
      writer.tag(3, WIRE.bytes);
      writer.string(run.scope.schemaUrl);
    }
    writer.end(runBegun);
  }
  writer.end(begun);
  return writer.view();
}

function writeResource(writer: ProtobufWriter, resource: Resource): void {
  writer.tag(1, WIRE.bytes);
  const begun = writer.begin(2);
  writeAttributes(writer, 1, resource.attributes);
  writer.end(begun);
  if (resource.schemaUrl) {
    writer.tag(3, WIRE.bytes);
    writer.string(resource.schemaUrl);
  }
}

function writeScope(writer: ProtobufWriter, scope: InstrumentationScope): void {
  writer.tag(1, WIRE.bytes);
  const begun = writer.begin();
  writer.tag(1, WIRE.bytes);
  writer.string(scope.name);
  if (scope.version) {
    writer.tag(2, WIRE.bytes);
    writer.string(scope.version);
  }
  writer.end(begun);
}

function writeLink(writer: ProtobufWriter, link: Link): void {
  writer.tag(13, WIRE.bytes);
  const begun = writer.begin();
  const context = link.context;
  writeContext(writer, context);
  if (link.attributes) writeAttributes(writer, 4, link.attributes);
  writeCount(writer, 5, link.droppedAttributesCount ?? 0);
  writer.tag(6, WIRE.fixed32);
  writer.fixed32(flagsOf(context, context.isRemote));
  writer.end(begun);
}

/** Fields 1–3 of a Span or a Link alike: trace id, span id, trace state. */
function writeContext(writer: ProtobufWriter, context: SpanContext): void {
  writer.tag(1, WIRE.bytes);
  writer.hex(context.traceId);
  writer.tag(2, WIRE.bytes);
  writer.hex(context.spanId);
  const traceState = context.traceState?.serialize();
  if (traceState) {
    writer.tag(3, WIRE.bytes);
    writer.string(traceState);
  }
}

function flagsOf(context: SpanContext, remote: boolean | undefined): number {
  return (context.traceFlags & 0xff) | FLAGS_HAS_IS_REMOTE | (remote ? FLAGS_IS_REMOTE : 0);
}

/** A uint32 or enum field; zero is proto3's default and is left out. */
function writeCount(writer: ProtobufWriter, field: number, value: number): void {
  if (!value) return;
  writer.tag(field, WIRE.varint);
  writer.varint(value);
}

/** Unix nanoseconds as fixed64, from [seconds, nanoseconds] without passing 2^53 (a nanosecond count does). */
function writeTime(writer: ProtobufWriter, time: HrTime): void {
  const [seconds, nanos] = time;
  // seconds = high16 · 2^16 + low16, so nanoseconds = high16 · 1e9 · 2^16 + (low16 · 1e9 + nanos), each part exact.
  const low16 = seconds % 0x1_0000;
  const highNanos = ((seconds - low16) / 0x1_0000) * 1e9;
  const lowPart = (highNanos % 0x1_0000) * 0x1_0000 + low16 * 1e9 + nanos;
  const high = Math.floor(highNanos / 0x1_0000) + Math.floor(lowPart / 0x1_0000_0000);
  writer.fixed64(lowPart % 0x1_0000_0000, high);
}

/** Repeated KeyValue in `field`, in the attributes' own order. */
function writeAttributes(writer: ProtobufWriter, field: number, attributes: Attributes): void {
  for (const key in attributes) {
    if (!Object.prototype.hasOwnProperty.call(attributes, key)) continue;
    const value = attributes[key];
    if (typeof value === 'string') {
      writer.stringKeyValue(field, key, value);
      continue;
    }
    writer.tag(field, WIRE.bytes);
    const begun = writer.begin();
    writer.key(key);
    writer.tag(2, WIRE.bytes);
    const valueBegun = writer.begin();
    writeAnyValue(writer, value);
    writer.end(valueBegun);
    writer.end(begun);
  }
}

/** AnyValue: string 1, bool 2, int 3, double 4, array 5, kvlist 6, bytes 7. A null or undefined (an array's hole) is an empty AnyValue, as the SDK's serializer writes it. */
function writeAnyValue(writer: ProtobufWriter, value: AttributeValue | unknown): void {
  switch (typeof value) {
    case 'string':
      writer.tag(1, WIRE.bytes);
      writer.string(value);
      return;
    case 'boolean':
      writer.tag(2, WIRE.varint);
      writer.varint(value ? 1 : 0);
      return;
    case 'number':
      if (Number.isInteger(value) && value >= INT64_MIN && value < INT64_LIMIT) {
        writer.tag(3, WIRE.varint);
        writer.varint(value);
      } else {
        writer.tag(4, WIRE.fixed64);
        writer.double(value);
      }
      return;
    case 'object':
      if (value === null) return;
      if (value instanceof Uint8Array) {
        writer.tag(7, WIRE.bytes);
        writer.bytesField(value);
      } else if (Array.isArray(value)) {
        writer.tag(5, WIRE.bytes);
        const begun = writer.begin();
        for (const item of value) {
          writer.tag(1, WIRE.bytes);
          const itemBegun = writer.begin();
          writeAnyValue(writer, item);
          writer.end(itemBegun);
        }
        writer.end(begun);
      } else {
        writer.tag(6, WIRE.bytes);
        const begun = writer.begin();
        writeAttributes(writer, 1, value as Attributes);
        writer.end(begun);
      }
      return;
    default:
  }
}
