import { ContentCapture } from '../../control-plane/pipeline/request-content';
import { storableText } from '../../control-plane/request-log/request-log-recorder';

describe('ContentCapture', () => {
  it('keeps the request and the streamed answer up to the cap, and says what it cut', () => {
    const capture = new ContentCapture(Buffer.from('x'.repeat(300)), 256);
    capture.chunk(Buffer.from('a'.repeat(200)));
    capture.chunk(Buffer.from('b'.repeat(100)));
    capture.chunk(Buffer.from('c'));
    const content = capture.content();
    expect(content.request.length).toBe(256);
    expect(content.requestTruncated).toBe(true);
    expect(content.response!.toString()).toBe('a'.repeat(200) + 'b'.repeat(56));
    expect(content.responseTruncated).toBe(true);
  });

  it('keeps a whole small answer untruncated, and no answer at all for embeddings', () => {
    const whole = new ContentCapture(Buffer.from('{"messages":[]}'), 1024);
    whole.output(Buffer.from('{"choices":[]}'));
    expect(whole.content()).toMatchObject({ requestTruncated: false, responseTruncated: false });
    expect(whole.content().response!.toString()).toBe('{"choices":[]}');
    const embeddings = new ContentCapture(Buffer.from('{"input":"hi"}'), 1024, false);
    embeddings.output(Buffer.from('[0.1,0.2]'));
    expect(embeddings.content().response).toBeNull();
  });

  it('stores text PostgreSQL accepts: NUL and a character cut at the cap become U+FFFD', () => {
    expect(storableText(Buffer.from('a\0b'))).toBe('a\uFFFDb');
    expect(storableText(Buffer.from('é').subarray(0, 1))).toBe('\uFFFD');
  });
});
