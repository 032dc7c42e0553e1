import { spawn } from 'node:child_process';
import path from 'node:path';

/**
 * `npm start`: runs the server in its own process group and forwards signals to it.
 * A terminal's Ctrl-C signals the whole foreground group at once, which would stop the
 * embedded PostgreSQL and the agents while the server still drains them and flushes usage.
 * Detached, only the server hears the signal and shuts its children down in order.
 */
// stdin is a pipe the launcher never writes to: if the launcher dies without forwarding a signal
// (kill -9, an OOM kill), the kernel closes it and the server drains and exits (EXIT_WITH_LAUNCHER)
// instead of running on unsupervised, holding its ports and ./data.
const server = spawn(process.execPath, [path.join(__dirname, 'main.js'), ...process.argv.slice(2)], {
  stdio: ['pipe', 'inherit', 'inherit'], detached: true, env: { ...process.env, EXIT_WITH_LAUNCHER: 'true' },
});
// npm forwards the signal it got from the terminal too: one Ctrl-C must arrive once, or the
// server would take it for the second, forcing one.
let lastForwardedAt = 0;
const forward = (signal: NodeJS.Signals): void => {
  if (Date.now() - lastForwardedAt < 500) return;
  lastForwardedAt = Date.now();
  server.kill(signal);
};
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => forward(signal));

/**
 * How often the launcher looks for its parent. A SIGTERM to `npm start`'s own pid (what `kill`,
 * a supervisor or a CI timeout sends) ends npm and its shell without a word to this process,
 * which is re-parented: that is its parent's death, and it stops the server as for a SIGTERM.
 */
const PARENT_CHECK_MS = 250;
const parent = process.ppid;
const watch = setInterval(() => {
  if (process.ppid === parent) return;
  clearInterval(watch);
  forward('SIGTERM');
}, PARENT_CHECK_MS);
watch.unref();

server.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 + 2 : 1)));
