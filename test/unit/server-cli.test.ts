/**
 * The server's command line: only --help and --version, any other flag refused (exit 2), and a
 * --help that lists every setting the loaders declare, each with its default, and agrees with
 * docs/configuration.md's server tables (a variable added to one and not the other fails here).
 */
import fs from 'node:fs';
import path from 'node:path';
import { EXIT, parseServerArgs, serverHelp, serverVersion } from '../../gateway/server-cli';

describe('parseServerArgs', () => {
  test.each([
    [[], 'run'], [['--help'], 'help'], [['-h'], 'help'], [['--version'], 'version'], [['-v'], 'version'],
  ])('%j → %s', (argv, kind) => {
    expect(parseServerArgs(argv).kind).toBe(kind);
  });

  test.each([[['--port', '9000']], [['--help', '--verbose']], [['serve']], [['--help', '--version']]])('%j is refused, naming the option', (argv) => {
    const command = parseServerArgs(argv);
    expect(command.kind).toBe('bad');
    if (command.kind !== 'bad') return;
    expect(command.message).toMatch(/^unknown option '/);
    expect(command.message).toContain('every setting is an environment variable');
  });

  test('exit codes are distinct', () => {
    expect(new Set(Object.values(EXIT)).size).toBe(Object.values(EXIT).length);
  });
});

describe('serverHelp', () => {
  const help = serverHelp();
  const listed = [...help.matchAll(/^ {2}([A-Z][A-Z0-9_]+) +(default .*|\(unset\))$/gm)].map((match) => ({ env: match[1], value: match[2] }));

  test('lists settings with their defaults as the loaders declare them', () => {
    expect(listed.length).toBeGreaterThan(100);
    expect(listed).toContainEqual({ env: 'PORT', value: 'default 8080' });
    expect(listed).toContainEqual({ env: 'DATABASE_URL', value: '(unset)' });
    expect(listed).toContainEqual({ env: 'SHUTDOWN_TIMEOUT_MS', value: 'default 60000' });
    expect(listed).toContainEqual({ env: 'EMBEDDED_DATABASE_RESTARTS', value: 'default 3' });
    expect(new Set(listed.map((row) => row.env)).size).toBe(listed.length);
  });

  test('agrees with docs/configuration.md\'s server section, both ways', () => {
    const docs = fs.readFileSync(path.join(__dirname, '../../docs/configuration.md'), 'utf8');
    const server = docs.slice(docs.indexOf('## Server'), docs.indexOf('\n## ', docs.indexOf('## Server') + 1));
    // A row's first cell names one variable or several (`A` / `B`, `A`, `B`, or `X_PER_KEY` / `_PER_WORKSPACE`: the stem of the first, another scope).
    const firstCells = [...server.matchAll(/^\|([^|]*)\|/gm)].map((match) => match[1]);
    const documented = new Set(firstCells.flatMap((cell) => {
      const names = [...cell.matchAll(/`(_?[A-Z][A-Z0-9_]+)`/g)].map((match) => match[1]);
      return names.map((name) => (name.startsWith('_') ? names[0].slice(0, names[0].lastIndexOf('_PER_')) + name : name));
    }));
    const inHelp = new Set(listed.map((row) => row.env));
    expect([...inHelp].filter((env) => !documented.has(env))).toEqual([]);
    expect([...documented].filter((env) => !inHelp.has(env))).toEqual([]);
  });

  test('--version names the package and the Node it runs on', () => {
    expect(serverVersion()).toBe(`inference-platform 0.1.0 (server, Node ${process.version})\n`);
  });
});
