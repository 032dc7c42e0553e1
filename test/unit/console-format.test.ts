/** The console's money (to the cent, exactly, from decimal strings) and its snippets' choice per task. */
import { exactUsd, formatUsd } from '../../console/src/components/format';
import { snippetsFor } from '../../console/src/components/snippets';

describe('formatUsd', () => {
  test.each([
    ['0', '$0.00'], ['0.0000000000', '$0.00'], ['1.5', '$1.50'], ['0.005', '$0.01'], ['0.0049', '<$0.01'], ['-0.0012345678', '−<$0.01'],
    ['-12.345', '−$12.35'], ['1234567.891', '$1,234,567.89'], ['25', '$25.00'], [3.6, '$3.60'], [1.8e-7, '<$0.01'], ['9.999', '$10.00'],
  ] as Array<[string | number, string]>)('%p → %p', (amount, shown) => {
    expect(formatUsd(amount)).toBe(shown);
  });

  test('the exact amount keeps every digit', () => {
    expect(exactUsd('-0.0012345678')).toBe('−$0.0012345678');
    expect(exactUsd(1.8e-7)).toBe('$0.00000018');
  });
});

describe('snippetsFor', () => {
  const base = 'http://localhost:8080/d/x/v1';
  test('each task calls its own endpoint; no chat call outside chat', () => {
    const paths = ['chat', 'completion', 'embedding', 'image-generation', 'image-edit', 'video-generation']
      .map((task) => snippetsFor(base, { id: 'm', task, sizes: ['512x512', '1024x1024'] }).curl.split(' \\')[0]);
    expect(paths).toEqual([
      `curl ${base}/chat/completions`, `curl ${base}/completions`, `curl ${base}/embeddings`, `curl ${base}/images/generations`, `curl ${base}/images/edits`, `curl ${base}/videos`,
    ]);
  });

  test('a video model with a pinned clip gets its own duration and fps; an image model a size it offers', () => {
    const video = snippetsFor(base, { id: 'v', task: 'video-generation', sizes: ['480x832'], videoSpec: { durationSeconds: 5, fps: 16 } });
    expect(video.curl).toContain('-F size=480x832 \\\n  -F seconds=5 \\\n  -F fps=16');
    expect(video.sdk).toContain('extra_body={"fps": 16}');
    expect(snippetsFor(base, { id: 'i', task: 'image-generation', sizes: ['512x512'] }).curl).toContain('"size":"512x512"');
  });
});
