/**
 * What test/unit/deploy/*.test.ts check the container files with, since no Docker (nor hadolint)
 * runs where this is built: a Dockerfile parser, hadolint's most important rules written as
 * checks (each names the hadolint rule it stands for), a `.dockerignore` matcher, and the set of
 * environment variable names the code reads.
 */
import fs from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '../../..');

export interface Instruction {
  /** Upper-cased: FROM, RUN, COPY, … */
  readonly keyword: string;
  /** Everything after the keyword, continuation lines joined with a space. */
  readonly args: string;
  /** 1-based line of the keyword. */
  readonly line: number;
}

export interface Stage {
  readonly image: string;
  readonly name?: string;
  readonly instructions: Instruction[];
}

/** Instructions of a Dockerfile: comments and parser directives dropped, `\` continuations joined. */
export function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index].trim();
    if (line === '' || line.startsWith('#')) continue;
    const start = index + 1;
    let joined = line;
    while (joined.endsWith('\\') && index + 1 < lines.length) {
      joined = joined.slice(0, -1).trimEnd();
      // Comment lines inside a continued instruction are skipped, as Docker does.
      let next = lines[++index].trim();
      while (next.startsWith('#') && index + 1 < lines.length) next = lines[++index].trim();
      joined += ` ${next}`;
    }
    const match = /^(\S+)\s*(.*)$/s.exec(joined)!;
    instructions.push({ keyword: match[1].toUpperCase(), args: match[2].trim(), line: start });
  }
  return instructions;
}

/** The stages of a multi-stage build, each with its instructions (ARGs before the first FROM dropped). */
export function stagesOf(instructions: Instruction[]): Stage[] {
  const stages: Stage[] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const parts = instruction.args.split(/\s+/).filter((part) => !part.startsWith('--'));
      const as = parts.findIndex((part) => part.toUpperCase() === 'AS');
      stages.push({ image: parts[0], name: as >= 0 ? parts[as + 1] : undefined, instructions: [] });
    } else if (stages.length > 0) {
      stages[stages.length - 1].instructions.push(instruction);
    }
  }
  return stages;
}

/** A JSON array (exec form) or null (shell form). */
export function execForm(args: string): string[] | null {
  if (!args.startsWith('[')) return null;
  try {
    const parsed = JSON.parse(args) as unknown;
    return Array.isArray(parsed) && parsed.every((item) => typeof item === 'string') ? parsed : null;
  } catch {
    return null;
  }
}

/** `--flag=value` options at the start of COPY/HEALTHCHECK args, and what follows them. */
export function splitFlags(args: string): { flags: Record<string, string>; rest: string } {
  const flags: Record<string, string> = {};
  let rest = args;
  for (let match = /^--([\w-]+)(?:=(\S+))?\s+/.exec(rest); match; match = /^--([\w-]+)(?:=(\S+))?\s+/.exec(rest)) {
    flags[match[1]] = match[2] ?? 'true';
    rest = rest.slice(match[0].length);
  }
  return { flags, rest };
}

/** ENV's pairs, in both forms (`ENV A=1 B=2` and the legacy `ENV A 1`). */
export function envPairs(args: string): Record<string, string> {
  if (!/^[A-Za-z_][\w]*=/.test(args)) {
    const [name, ...value] = args.split(/\s+/);
    return { [name]: value.join(' ') };
  }
  const pairs: Record<string, string> = {};
  for (const match of args.matchAll(/([A-Za-z_]\w*)=("(?:[^"\\]|\\.)*"|\S*)/g)) {
    pairs[match[1]] = match[2].startsWith('"') ? JSON.parse(match[2]) : match[2];
  }
  return pairs;
}

/**
 * hadolint's main rules as checks; returns one message per violation (empty: clean).
 * DL3006/DL3007 tagged, non-`latest` base images (and here: a full x.y.z version, so a build
 * repeats); DL3008/DL3009/DL3015 `apt-get install` with `-y`, `--no-install-recommends` and the
 * lists removed in the same RUN; DL3027 no `apt`; DL3004 no sudo; DL3020 COPY, not ADD;
 * DL3025 exec-form CMD and ENTRYPOINT; DL3000 absolute WORKDIR; DL3045 a relative COPY
 * destination only after a WORKDIR; DL3002 the final stage runs as a non-root USER set before
 * its CMD/ENTRYPOINT; DL4000 no MAINTAINER; DL3022 COPY --from names an earlier stage; and a
 * HEALTHCHECK in the final stage (CMD in exec form, or an explicit NONE).
 */
export function lintDockerfile(text: string): string[] {
  const problems: string[] = [];
  const instructions = parseDockerfile(text);
  const stages = stagesOf(instructions);
  if (stages.length === 0) return ['no FROM'];
  const at = (instruction: Instruction, message: string) => problems.push(`line ${instruction.line}: ${message}`);
  const stageNames = new Set<string>();
  for (const stage of stages) {
    const from = instructions.find((instruction) => instruction.keyword === 'FROM' && instruction.args.includes(stage.image))!;
    const tag = /^[^@]+?(?::([^:/@]+))?(?:@sha256:[0-9a-f]{64})?$/.exec(stage.image);
    const pinnedByDigest = stage.image.includes('@sha256:');
    if (!stageNames.has(stage.image)) {
      if (!pinnedByDigest && !tag?.[1]) at(from, `DL3006 base image ${stage.image} has no tag`);
      else if (tag?.[1] === 'latest') at(from, `DL3007 base image ${stage.image} uses latest`);
      else if (!pinnedByDigest && !/^v?\d+\.\d+\.\d+/.test(tag![1])) at(from, `base image ${stage.image} is not pinned to a full version (x.y.z)`);
    }
    let workdir = false;
    for (const instruction of stage.instructions) {
      const { keyword, args } = instruction;
      if (keyword === 'ADD') at(instruction, 'DL3020 use COPY instead of ADD');
      if (keyword === 'MAINTAINER') at(instruction, 'DL4000 MAINTAINER is deprecated');
      if ((keyword === 'CMD' || keyword === 'ENTRYPOINT') && !execForm(args)) at(instruction, `DL3025 ${keyword} must be in exec form (a JSON array)`);
      if (keyword === 'WORKDIR') {
        if (!args.startsWith('/')) at(instruction, `DL3000 WORKDIR ${args} is not absolute`);
        workdir = true;
      }
      if (keyword === 'COPY') {
        const { flags, rest } = splitFlags(args);
        const parts = execForm(rest) ?? rest.split(/\s+/);
        const destination = parts[parts.length - 1];
        if (!destination.startsWith('/') && !workdir) at(instruction, `DL3045 COPY to relative ${destination} without a WORKDIR`);
        if (flags.from && !stageNames.has(flags.from)) at(instruction, `DL3022 COPY --from=${flags.from} names no earlier stage`);
      }
      if (keyword === 'RUN') {
        if (/\bsudo\b/.test(args)) at(instruction, 'DL3004 do not use sudo');
        if (/(^|[;&|]\s*)apt\s/.test(args)) at(instruction, 'DL3027 use apt-get, not apt');
        if (/\bapt-get\s+(\S+\s+)*install\b/.test(args)) {
          if (!/--no-install-recommends/.test(args)) at(instruction, 'DL3015 apt-get install without --no-install-recommends');
          if (!/\s(-y|--yes|--assume-yes)\b/.test(args)) at(instruction, 'DL3014 apt-get install without -y');
          if (!/rm -rf \/var\/lib\/apt\/lists\/\*/.test(args)) at(instruction, 'DL3009 apt lists not removed (rm -rf /var/lib/apt/lists/*) in the same RUN');
        }
      }
    }
    if (stage.name) stageNames.add(stage.name);
  }
  const final = stages[stages.length - 1];
  const users = final.instructions.filter((instruction) => instruction.keyword === 'USER');
  const lastUser = users[users.length - 1];
  const firstRun = final.instructions.findIndex((instruction) => instruction.keyword === 'CMD' || instruction.keyword === 'ENTRYPOINT');
  if (!lastUser) problems.push('DL3002 the final stage sets no USER: it would run as root');
  else {
    const user = lastUser.args.split(':')[0];
    if (user === 'root' || user === '0') at(lastUser, 'DL3002 the last USER is root');
    if (firstRun >= 0 && final.instructions.indexOf(lastUser) > firstRun) at(lastUser, 'USER comes after CMD/ENTRYPOINT');
  }
  if (firstRun < 0) problems.push('the final stage has no CMD or ENTRYPOINT');
  const healthchecks = final.instructions.filter((instruction) => instruction.keyword === 'HEALTHCHECK');
  if (healthchecks.length === 0) problems.push('the final stage has no HEALTHCHECK (write HEALTHCHECK NONE to say there is none on purpose)');
  for (const healthcheck of healthchecks) {
    const { rest } = splitFlags(healthcheck.args);
    if (rest !== 'NONE' && !(rest.startsWith('CMD ') && execForm(rest.slice(4).trim()))) at(healthcheck, 'HEALTHCHECK must be NONE or CMD in exec form');
  }
  return problems;
}

/** `.dockerignore` as Docker applies it (the subset of patterns ours uses: `*`, `**`, `!` exceptions, directory prefixes). */
export function dockerignoreMatcher(text: string): (relativePath: string) => boolean {
  const rules = text.split('\n').map((line) => line.trim()).filter((line) => line && !line.startsWith('#')).map((line) => {
    const negate = line.startsWith('!');
    const pattern = (negate ? line.slice(1) : line).replace(/^\/+|\/+$/g, '');
    const source = pattern.split('/').map((part) => part === '**' ? '.*' : part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')).join('/');
    return { negate, regex: new RegExp(`^${source.replace(/\.\*\//g, '(?:.*/)?')}$`) };
  });
  return (relativePath) => {
    const parts = relativePath.replace(/\/+$/, '').split('/');
    let ignored = false;
    for (const rule of rules) {
      // A pattern that matches a directory excludes what is under it.
      for (let length = 1; length <= parts.length; length++) {
        if (rule.regex.test(parts.slice(0, length).join('/'))) {
          ignored = !rule.negate;
          break;
        }
      }
    }
    return ignored;
  };
}

const SOURCE_FOLDERS = ['common', 'control-plane', 'gateway', 'worker-agent', 'proto'];

function sourceFiles(directory: string): string[] {
  return fs.readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'generated' ? [] : sourceFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [full] : [];
  });
}

let envNames: Set<string> | undefined;

/**
 * Every environment variable name the server and agent code reads: `process.env.X`, `env.X`,
 * `env['X']`, and the names the config readers map their fields to (string literals such as
 * `port: 'PORT'` in gateway-config.ts, `optionField(…, 'WORKER_ENGINE', …)` in agent-options.ts,
 * `env: 'REQUESTS_IN_FLIGHT_PER_KEY'` in budget-kinds.ts). A grep, as a reviewer would do it.
 */
export function envNamesInCode(): Set<string> {
  if (envNames) return envNames;
  envNames = new Set();
  for (const file of SOURCE_FOLDERS.flatMap((folder) => sourceFiles(path.join(ROOT, folder)))) {
    const text = fs.readFileSync(file, 'utf8');
    for (const match of text.matchAll(/\benv(?:\.|\[['"])([A-Z][A-Z0-9_]+)/g)) envNames.add(match[1]);
    for (const match of text.matchAll(/['"`]([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{3,})['"`]/g)) envNames.add(match[1]);
  }
  return envNames;
}
