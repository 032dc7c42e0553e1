import pino from 'pino';
import { Lifecycle } from '../../control-plane/lifecycle';

describe('lifecycle', () => {
  it('stops in reverse order; a step that never settles is left after its deadline and the rest still stop, named in a warning', async () => {
    const order: string[] = [];
    const emitWarning = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const lifecycle = new Lifecycle(pino({ level: 'silent' }), 50);
      lifecycle.add('database', () => { order.push('database'); });
      lifecycle.add('stuck', () => new Promise<void>(() => order.push('stuck')));
      lifecycle.add('failing', () => { order.push('failing'); throw new Error('boom'); });
      lifecycle.add('agents', async () => { order.push('agents'); });
      const startedAt = performance.now();
      await lifecycle.stopAll();
      expect(order).toEqual(['agents', 'failing', 'stuck', 'database']);
      expect(performance.now() - startedAt).toBeLessThan(1_000);
      expect(emitWarning.mock.calls).toEqual([['stuck did not stop within 50 ms; stopping the others', 'LifecycleWarning']]);
    } finally {
      emitWarning.mockRestore();
    }
  });
});
