import {
  SpanStatusCode, type AttributeValue, type Attributes, type Exception, type HrTime, type Link, type Span, type SpanContext, type SpanKind,
  type SpanStatus, type TimeInput,
} from '@opentelemetry/api';
import { AddAttributeDecision, cleanAttributes, cleanSimpleAttributes, maybeAddAttribute, type InstrumentationScope } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace';

/** What every span of one process shares: where it goes when it ends, and what it says of the process. */
export interface SpanOwner {
  readonly resource: Resource;
  readonly instrumentationScope: InstrumentationScope;
  /** Told of each span once, when it ends (a span processor's onEnd). */
  ended(span: RecordedSpan): void;
}

/** The SDK's default span limits (OTEL_SPAN_*_COUNT_LIMIT unset): what a span keeps at most. */
export const SPAN_LIMITS = { attributes: 128, events: 128, links: 128, attributesPerEvent: 128, attributesPerLink: 128 } as const;
/** The limits in the shape `@opentelemetry/core`'s attribute helpers take. */
const ATTRIBUTE_LIMITS = { attributeCountLimit: SPAN_LIMITS.attributes, attributeValueLengthLimit: Number.POSITIVE_INFINITY };

/**
 * A sampled span, recorded the way the SDK's span records one and readable as one
 * (`ReadableSpan`, so any span processor and exporter takes it), for less: no context object,
 * no copy of the attributes it is given when they are all plain strings, numbers and booleans,
 * one clock read per time, no diagnostics logger. Anything else goes through the SDK's own
 * attribute helpers (`@opentelemetry/core`), so semantics are the SDK's `SpanImpl`'s: any
 * OpenTelemetry AnyValue is kept on the span (events keep simple values only), past the limits
 * attributes are dropped and events and links drop their oldest, a status once OK stays OK, an
 * ended span changes no more, and a second `end` does nothing (test/unit/tracing/recorded-span.test.ts
 * runs the same calls on both). An unsampled span is the API's NonRecordingSpan instead.
 */
export class RecordedSpan implements Span, ReadableSpan {
  readonly attributes: Attributes;
  readonly links: Link[];
  readonly events: TimedEvent[] = [];
  status: SpanStatus = { code: SpanStatusCode.UNSET };
  endTime: HrTime = [0, 0];
  ended = false;
  droppedAttributesCount = 0;
  droppedEventsCount = 0;
  droppedLinksCount = 0;
  private attributeCount = 0;

  constructor(
    private readonly context: SpanContext,
    public name: string,
    readonly kind: SpanKind,
    readonly parentSpanContext: SpanContext | undefined,
    readonly startTime: HrTime,
    attributes: Attributes | undefined,
    links: Link[] | undefined,
    private readonly owner: SpanOwner,
  ) {
    if (attributes !== undefined && adoptable(attributes)) {
      this.attributes = attributes;
      for (const key in attributes) this.attributeCount++;
    } else {
      const clean = cleanAttributes(attributes, ATTRIBUTE_LIMITS);
      this.attributes = clean.attributes ?? {};
      this.droppedAttributesCount = clean.droppedAttributesCount ?? 0;
      for (const key in this.attributes) this.attributeCount++;
    }
    this.links = [];
    if (links) this.addLinks(links);
  }

  get resource(): Resource {
    return this.owner.resource;
  }

  get instrumentationScope(): InstrumentationScope {
    return this.owner.instrumentationScope;
  }

  get duration(): HrTime {
    return this.ended ? hrTimeBetween(this.startTime, this.endTime) : [0, 0];
  }

  spanContext(): SpanContext {
    return this.context;
  }

  setAttribute(key: string, value: AttributeValue | undefined): this {
    if (this.ended) return this;
    const kind = typeof value;
    // The common cases, decided as maybeAddAttribute decides them, without its checks of the value
    // (a WeakSet per array): a string, number or boolean, and an array of strings (finish reasons), copied as it copies one.
    if (key.length > 0 && (kind === 'string' || kind === 'number' || kind === 'boolean')) return this.put(key, value!);
    if (key.length > 0 && Array.isArray(value) && value.every(isString)) return this.put(key, value.slice());
    const decision = maybeAddAttribute({ key, value, attributes: this.attributes, limits: ATTRIBUTE_LIMITS, currentAttributesCount: this.attributeCount });
    if (decision === AddAttributeDecision.DROP_LIMIT_REACHED) this.droppedAttributesCount++;
    else if (decision === AddAttributeDecision.ADD_NEW) this.attributeCount++;
    return this;
  }

  /** Keeps a checked value, unless the span is at its limit of attributes and `key` is new. */
  private put(key: string, value: AttributeValue): this {
    if (!Object.hasOwn(this.attributes, key)) {
      if (this.attributeCount >= SPAN_LIMITS.attributes) {
        this.droppedAttributesCount++;
        return this;
      }
      this.attributeCount++;
    }
    this.attributes[key] = value;
    return this;
  }

  setAttributes(attributes: Attributes): this {
    for (const key in attributes) if (Object.prototype.hasOwnProperty.call(attributes, key)) this.setAttribute(key, attributes[key]);
    return this;
  }

  addEvent(name: string, attributesOrTime?: Attributes | TimeInput, time?: TimeInput): this {
    if (this.ended) return this;
    if (isTimeInput(attributesOrTime)) {
      time ??= attributesOrTime;
      attributesOrTime = undefined;
    }
    if (this.events.length >= SPAN_LIMITS.events) {
      this.events.shift();
      this.droppedEventsCount++;
    }
    this.events.push({
      name, time: time === undefined ? nowHrTime() : toHrTime(time),
      ...cleanSimpleAttributes(attributesOrTime, { ...ATTRIBUTE_LIMITS, attributeCountLimit: SPAN_LIMITS.attributesPerEvent }),
    });
    return this;
  }

  addLink(link: Link): this {
    if (this.ended) return this;
    if (this.links.length >= SPAN_LIMITS.links) {
      this.links.shift();
      this.droppedLinksCount++;
    }
    this.links.push({ context: link.context, ...cleanAttributes(link.attributes, { ...ATTRIBUTE_LIMITS, attributeCountLimit: SPAN_LIMITS.attributesPerLink }) });
    return this;
  }

  addLinks(links: Link[]): this {
    for (const link of links) this.addLink(link);
    return this;
  }

  setStatus(status: SpanStatus): this {
    if (this.ended || status.code === SpanStatusCode.UNSET || this.status.code === SpanStatusCode.OK) return this;
    this.status = status.code === SpanStatusCode.ERROR && typeof status.message === 'string' ? { code: status.code, message: status.message } : { code: status.code };
    return this;
  }

  updateName(name: string): this {
    if (!this.ended) this.name = name;
    return this;
  }

  end(endTime?: TimeInput): void {
    if (this.ended) return;
    const end = endTime === undefined ? nowHrTime() : toHrTime(endTime);
    // An end before the start (a caller's clock) is the start: a span never lasts less than nothing.
    this.endTime = compareHrTime(end, this.startTime) < 0 ? [this.startTime[0], this.startTime[1]] : end;
    this.ended = true;
    this.owner.ended(this);
  }

  isRecording(): boolean {
    return !this.ended;
  }

  recordException(exception: Exception, time?: TimeInput): void {
    const attributes: Attributes = {};
    if (typeof exception === 'string') {
      attributes['exception.message'] = exception;
    } else if (exception) {
      const type = exception.code ? String(exception.code) : exception.name;
      if (type) attributes['exception.type'] = type;
      if (exception.message) attributes['exception.message'] = exception.message;
      if (exception.stack) attributes['exception.stacktrace'] = exception.stack;
    }
    if (attributes['exception.type'] || attributes['exception.message']) this.addEvent('exception', attributes, time);
  }
}

/** A time now, as OTLP counts it: [Unix seconds, nanoseconds], from the monotonic clock (sub-millisecond). */
export function nowHrTime(): HrTime {
  return millisToHrTime(performance.timeOrigin + performance.now());
}

/**
 * A time a caller gave: Unix milliseconds, a Date, or an HrTime; a number no larger than
 * `performance.now()` is a time on the monotonic clock, as the SDK reads it.
 */
export function toHrTime(time: TimeInput): HrTime {
  if (typeof time === 'number') return millisToHrTime(time <= performance.now() ? performance.timeOrigin + time : time);
  if (time instanceof Date) return millisToHrTime(time.getTime());
  return time;
}

function millisToHrTime(millis: number): HrTime {
  const seconds = Math.trunc(millis / 1000);
  const nanos = Math.round((millis - seconds * 1000) * 1e6);
  return nanos >= 1e9 ? [seconds + 1, nanos - 1e9] : [seconds, nanos];
}

function compareHrTime(a: HrTime, b: HrTime): number {
  return a[0] - b[0] || a[1] - b[1];
}

function hrTimeBetween(start: HrTime, end: HrTime): HrTime {
  let seconds = end[0] - start[0];
  let nanos = end[1] - start[1];
  if (nanos < 0) {
    seconds -= 1;
    nanos += 1e9;
  }
  return [seconds, nanos];
}

function isTimeInput(value: unknown): value is TimeInput {
  return typeof value === 'number' || value instanceof Date || (Array.isArray(value) && value.length === 2 && typeof value[0] === 'number');
}

function isString(value: unknown): boolean {
  return typeof value === 'string';
}

/** Whether a caller's attributes can be kept as they are: at most the limit, every key named and every value a string, number or boolean. */
function adoptable(attributes: Attributes): boolean {
  let count = 0;
  for (const key in attributes) {
    const kind = typeof attributes[key];
    if (key.length === 0 || (kind !== 'string' && kind !== 'number' && kind !== 'boolean') || ++count > SPAN_LIMITS.attributes) return false;
  }
  return true;
}
