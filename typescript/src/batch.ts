#!/usr/bin/env node
/**
 * The batch entry point of the agreement harness (`tests/reference_decoder.rs` in the Rust
 * crate), speaking the reference decoder's `--batch` protocol: a JSON job list on stdin,
 *
 * ```text
 * [{"file": PATH | "hex": HEX, "mapping": "binary" | "sse" | "compat", "decoder": {...},
 *   "splits": [[i, j, ...], ...], "chunks": [n, ...]}, ...]
 * ```
 *
 * and, per job, the verdicts for each split list and then each chunk size, in the manifest's
 * `expect` shape, as one JSON line: `[[verdict, ...], ...]`. One process for a whole suite.
 *
 * `mcp-framing-decode --batch < jobs.json`, or `mcp-framing-decode FILE [--mapping M]` for the
 * verdict of one body.
 *
 * @module
 */

import { readFileSync } from 'node:fs';

import { decodeBody, type Mapping } from './body.js';
import { optionsFromManifest, type ManifestDecoder } from './batch-options.js';
import { toManifest } from './verdict.js';

interface Job {
  file?: string;
  hex?: string;
  mapping?: Mapping;
  decoder?: ManifestDecoder | null;
  splits?: number[][];
  chunks?: number[];
}

function runJob(job: Job): unknown[] {
  const body = job.hex !== undefined ? Uint8Array.from(Buffer.from(job.hex, 'hex')) : new Uint8Array(readFileSync(job.file!));
  const mapping = job.mapping ?? 'binary';
  const options = optionsFromManifest(job.decoder);
  const feeds: number[][] = (job.splits ?? [[]]).map((cuts) => [...cuts].sort((a, b) => a - b));
  for (const n of job.chunks ?? []) {
    const cuts: number[] = [];
    for (let at = n; at < body.length; at += n) {
      cuts.push(at);
    }
    feeds.push(cuts);
  }
  return feeds.map((cuts) => toManifest(decodeBody(body, mapping, options, cuts)));
}

const USAGE = 'usage: mcp-framing-decode FILE [--mapping binary|sse|compat] | mcp-framing-decode --batch < jobs.json';

const HELP = `${USAGE}

The verdict of one framed body (FILE, in the manifest's shape of SPEC.md §14), or, with --batch,
the verdicts of a JSON job list read on stdin (the protocol of the repository's agreement
harness, tests/reference_decoder.rs).

  --mapping M   how FILE carries the frames: binary (default), sse or compat
  --batch       read [{"file" | "hex", "mapping", "decoder", "splits", "chunks"}, ...] on stdin
  -h, --help    print this help
`;

/** A bad command line: what is wrong and the usage, status 2. */
function usageError(message: string): number {
  process.stderr.write(`mcp-framing-decode: ${message}\n${USAGE}\n(mcp-framing-decode --help for more)\n`);
  return 2;
}

function main(argv: string[]): number {
  if (argv.includes('-h') || argv.includes('--help')) {
    process.stdout.write(HELP);
    return 0;
  }
  if (argv[0] === '--batch') {
    const jobs = JSON.parse(readFileSync(0, 'utf8')) as Job[];
    process.stdout.write(`${JSON.stringify(jobs.map(runJob))}\n`);
    return 0;
  }
  const file = argv[0];
  if (file === undefined || file.startsWith('-')) {
    return usageError(file === undefined ? 'no FILE' : `unknown option ${JSON.stringify(file)}`);
  }
  const at = argv.indexOf('--mapping');
  const mapping = at === -1 ? 'binary' : argv[at + 1];
  if (mapping !== 'binary' && mapping !== 'sse' && mapping !== 'compat') {
    return usageError(`--mapping ${JSON.stringify(mapping ?? '')}: binary, sse or compat`);
  }
  let verdict: unknown;
  try {
    [verdict] = runJob({ file, mapping, splits: [[]] }); // a decoder reports, never throws: this is the read
  } catch (error) {
    return usageError(`cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  process.stdout.write(`${JSON.stringify(verdict, null, 2)}\n`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
