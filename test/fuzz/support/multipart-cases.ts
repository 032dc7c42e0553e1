import fc from 'fast-check';
import { BODY_LIMITS, type FuzzTarget } from './fuzz-target';
import { hostileString } from './hostile-values';
import { callerArbitrary, type HttpCase } from './http-cases';
import { bodyArbitrary, type FieldSpec } from './json-bodies';
import { imageFields, videoFields } from './rest-routes';

/** One part of a form: a text field, or a file (with a filename and a content type). */
export interface FormPart {
  name: string;
  /** Text of a field, or the file's bytes. */
  data: Buffer;
  file?: { filename: string; contentType: string };
}

/** How the form is framed, well or badly. */
export interface Framing {
  /** The boundary the Content-Type header names (null: no boundary parameter). */
  declared: string | null;
  /** The boundary the body really uses. */
  used: string;
  lineEnd: '\r\n' | '\n';
  /** Fraction of the body kept (1: all of it; less cuts it, possibly inside a file). */
  keep: number;
  closing: boolean;
  preamble: string;
  /** Header lines of each part as written, broken or not. */
  headers: 'standard' | 'no-disposition' | 'no-name' | 'unquoted-name' | 'rfc5987-filename' | 'header-without-colon' | 'long-header';
  contentType: string;
}

const BOUNDARY = '----fuzzboundary7MA4YWxkTrZu0gW';

const framing: fc.Arbitrary<Framing> = fc.oneof(
  {
    arbitrary: fc.constant<Framing>({ declared: BOUNDARY, used: BOUNDARY, lineEnd: '\r\n', keep: 1, closing: true, preamble: '', headers: 'standard', contentType: 'multipart/form-data' }),
    weight: 12,
  },
  {
    arbitrary: fc.record({
      declared: fc.oneof(fc.constantFrom<string | null>(BOUNDARY, null, '', 'other', '"quoted"', 'x'.repeat(100), ' ', BOUNDARY.toUpperCase()), hostileString.filter((text) => /^[\x20-\x7e]*$/.test(text) && !text.includes(';'))),
      used: fc.constantFrom(BOUNDARY, 'other', 'x'.repeat(100), 'a'),
      lineEnd: fc.constantFrom('\r\n' as const, '\n' as const),
      keep: fc.oneof(fc.constant(1), fc.double({ min: 0, max: 0.999, noNaN: true })),
      closing: fc.boolean(),
      preamble: fc.constantFrom('', 'preamble\r\n', '\r\n\r\n', '--\r\n'),
      headers: fc.constantFrom('standard' as const, 'no-disposition' as const, 'no-name' as const, 'unquoted-name' as const, 'rfc5987-filename' as const, 'header-without-colon' as const, 'long-header' as const),
      contentType: fc.constantFrom('multipart/form-data', 'MULTIPART/FORM-DATA', 'multipart/mixed', 'multipart/form-data; charset=utf-8', 'multipart/form-data;'),
    }),
    weight: 3,
  },
);

/** Writes the body and its Content-Type header. */
export function encodeForm(parts: readonly FormPart[], frame: Framing): { contentType: string; body: Buffer } {
  const end = frame.lineEnd;
  const chunks: Buffer[] = [Buffer.from(frame.preamble)];
  for (const part of parts) {
    const name = frame.headers === 'unquoted-name' ? part.name : JSON.stringify(part.name);
    const filename = part.file ? (frame.headers === 'rfc5987-filename' ? `; filename*=utf-8''${encodeURIComponent(part.file.filename)}` : `; filename=${JSON.stringify(part.file.filename)}`) : '';
    const lines = [`--${frame.used}`];
    if (frame.headers === 'no-disposition') lines.push('Content-Type: text/plain');
    else if (frame.headers === 'no-name') lines.push(`Content-Disposition: form-data${filename}`);
    else lines.push(`Content-Disposition: form-data; name=${name}${filename}`);
    if (part.file) lines.push(`Content-Type: ${part.file.contentType}`);
    if (frame.headers === 'header-without-colon') lines.push('X-Broken-Header');
    if (frame.headers === 'long-header') lines.push(`X-Long: ${'h'.repeat(20_000)}`);
    chunks.push(Buffer.from(`${lines.join(end)}${end}${end}`), part.data, Buffer.from(end));
  }
  if (frame.closing) chunks.push(Buffer.from(`--${frame.used}--${end}`));
  const whole = Buffer.concat(chunks);
  const body = frame.keep >= 1 ? whole : whole.subarray(0, Math.floor(whole.length * frame.keep));
  const contentType = frame.declared === null ? frame.contentType : `${frame.contentType}; boundary=${frame.declared}`;
  return { contentType, body };
}

/** Values of a form field as text: what JSON would carry, written as a string. */
function asFieldText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && 'text' in value && typeof (value as { text: unknown }).text === 'function') return (value as { text(): string }).text();
  return JSON.stringify(value) ?? '';
}

type FileKind = 'png' | 'jpeg' | 'webp' | 'text' | 'empty' | 'truncated-png' | 'random' | 'huge' | 'png-as-text-field';

const fileKind = fc.oneof(
  { arbitrary: fc.constantFrom<FileKind>('png', 'jpeg', 'webp'), weight: 6 },
  { arbitrary: fc.constantFrom<FileKind>('text', 'empty', 'truncated-png', 'random', 'huge', 'png-as-text-field'), weight: 2 },
);

function fileBytes(kind: FileKind, images: FuzzTarget['images'], random: Uint8Array): Buffer {
  switch (kind) {
    case 'png': case 'png-as-text-field': return images.png;
    case 'jpeg': return images.jpeg;
    case 'webp': return images.webp;
    case 'text': return Buffer.from('not an image');
    case 'empty': return Buffer.alloc(0);
    // Magic bytes right, pixels missing: passes the gateway's sniffing, fails to decode.
    case 'truncated-png': return images.png.subarray(0, 40);
    case 'random': return Buffer.from(random);
    // Just past the media limit on its own.
    case 'huge': return Buffer.alloc(BODY_LIMITS.media + 1, 0x41);
  }
}

interface FormPlan {
  route: string;
  path: string;
  specs: FieldSpec[];
  /** Files the route takes, and whether they are usually sent. */
  files: Array<{ name: string; usual: boolean }>;
}

/** Where files go wrong: in a field that takes none, twice, under `name[]`, or a text field sent as a file. */
const fileMisplacement = fc.constantFrom('none', 'none', 'none', 'none', 'wrong-field', 'duplicate', 'brackets', 'prompt-as-file', 'too-many-files', 'too-many-fields', 'long-field');

export function multipartCases(target: FuzzTarget, sizes: { image: readonly string[]; video: readonly string[] }): fc.Arbitrary<HttpCase> {
  const image = `/d/${target.image.slug}/v1`;
  const video = `/d/${target.video.slug}/v1`;
  const plans: FormPlan[] = [
    { route: 'POST /images/edits', path: `${image}/images/edits`, specs: imageFields(target.models.image, sizes.image, true), files: [{ name: 'image', usual: true }, { name: 'mask', usual: false }] },
    { route: 'POST /videos', path: `${video}/videos`, specs: videoFields(target.models.video, sizes.video, 'videos'), files: [{ name: 'input_reference', usual: false }] },
    { route: 'POST /images/generations (form)', path: `${image}/images/generations`, specs: imageFields(target.models.image, sizes.image, true), files: [] },
  ];
  return fc.constantFrom(...plans).chain((plan) => fc.record({
    fields: bodyArbitrary(plan.specs),
    files: fc.tuple(...plan.files.map((file) => fc.tuple(fc.constant(file.name), fc.boolean(), fileKind, fc.uint8Array({ maxLength: 64 })))),
    /** 0: a file the route needs is left out (1 in 10). */
    omitUsual: fc.integer({ min: 0, max: 9 }),
    misplacement: fileMisplacement,
    frame: framing,
    query: plan.route === 'POST /videos' ? fc.constant('') : fc.constantFrom('', '', '?async=true', '?async=false', '?async=maybe'),
    caller: callerArbitrary('owner'),
  }).map(({ fields, files, omitUsual, misplacement, frame, query, caller }): HttpCase => {
    const parts: FormPart[] = Object.entries(fields).map(([name, value]) => ({ name, data: Buffer.from(asFieldText(value)) }));
    for (const [name, sent, kind, random] of files) {
      const usual = plan.files.find((file) => file.name === name)!.usual;
      if (!(usual ? omitUsual > 0 : sent)) continue;
      const data = fileBytes(kind, target.images, random);
      parts.push(kind === 'png-as-text-field' ? { name, data } : { name, data, file: { filename: `${name}.${kind}`, contentType: `image/${kind}` } });
    }
    const png = { filename: 'x.png', contentType: 'image/png' };
    if (misplacement === 'wrong-field') parts.push({ name: plan.route === 'POST /videos' ? 'image' : 'input_reference', data: target.images.png, file: png });
    if (misplacement === 'duplicate') parts.push({ name: plan.files[0]?.name ?? 'image', data: target.images.png, file: png }, { name: 'prompt', data: Buffer.from('second prompt') });
    if (misplacement === 'brackets') parts.push({ name: `${plan.files[0]?.name ?? 'image'}[]`, data: target.images.jpeg, file: png });
    if (misplacement === 'prompt-as-file') parts.push({ name: 'prompt', data: Buffer.from('a prompt in a file'), file: { filename: 'prompt.txt', contentType: 'text/plain' } });
    if (misplacement === 'too-many-files') for (let index = 0; index < 9; index++) parts.push({ name: `file${index}`, data: target.images.png, file: png });
    if (misplacement === 'too-many-fields') for (let index = 0; index < 65; index++) parts.push({ name: `field${index}`, data: Buffer.from('x') });
    if (misplacement === 'long-field') parts.push({ name: 'negative_prompt', data: Buffer.alloc(64 * 1024 + 1, 0x61) });
    const { contentType, body } = encodeForm(parts, frame);
    return { route: plan.route, method: 'POST', path: `${plan.path}${query}`, caller, headers: { 'content-type': contentType }, body };
  }));
}
