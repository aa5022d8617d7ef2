// @ts-check
// The server side's speed goals, medians of one run, each ratio to a baseline measured in the
// same run (interleaved round by round, so that a loaded machine slows both alike):
//
// - encoding a 1 MiB result (BodyEncoder, each mapping, as framingHandler writes it and as one
//   buffer) against node:crypto SHA-256 + zlib.crc32 of the same bytes, the floor any framing
//   encoder pays (goal: at most 1.3x in the binary and compatible mappings), by wall and by CPU
//   time;
// - a tools/call with a 64 KiB result through framingHandler (the request opted in, compatible
//   mapping, and binary) against the same call unframed, on loopback: the SDK's server
//   (createMcpHandler on node:http through its Node adapter), the body read whole by fetch
//   (goal: at most 1.15x). The three calls take turns, their order rotated round by round, so
//   that none always follows the same one. Beside each call's latency, the process's CPU time
//   for it (client and server share the process): on a machine other jobs load, latency medians
//   carry their scheduling, CPU time much less of it; and the same calls made in this process
//   without sockets, whose CPU time is the wrapper's own work apart from the HTTP stacks.
//   Where latency is above CPU time, the event loop's idle time tells a wait from the load:
//   client and server share the loop, so it idles only when the call waits on something (a
//   write held back, a timer, a thread); the rest is time runnable but not running (the load).
//
// The load average is printed before and after: a loaded machine makes both measures noisy.
//
//   node bench/server.mjs [--rounds N] [--calls N]

import { createHash } from 'node:crypto';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { crc32 } from 'node:zlib';

import { randomRequestKey } from '../dist/index.js';
import { BodyEncoder, framingHandler } from '../dist/server.js';
import { serve, text as toolText, v2Handler } from '../test/support/sdk-servers.mjs';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '200' }, calls: { type: 'string', default: '400' } } });
const rounds = Number(values.rounds);
const calls = Number(values.calls);

const median = (/** @type {number[]} */ xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const ms = (/** @type {bigint} */ ns) => Number(ns) / 1e6;
const load = () => loadavg().map((l) => l.toFixed(2)).join(', ');
console.log(`load average before: ${load()}`);

// A JSON-RPC response of 1 MiB.
const text = 'bench "quoted" café ✓ lorem ipsum dolor sit amet '.repeat(22_000).slice(0, 1 << 20);
const message = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text }] } }));

/** The wall and CPU time of `f`, in ms. @param {() => unknown} f */
function timed(f) {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  f();
  const wall = ms(process.hrtime.bigint() - start);
  const used = process.cpuUsage(cpu);
  return /** @type {[number, number]} */ ([wall, (used.user + used.system) / 1000]);
}
// `parts`: BodyEncoder.messageParts, what framingHandler writes (a message of 128 KiB or more in
// the binary and compatible mappings: the frame headers, and views of the message between them);
// `one buffer`: BodyEncoder.message, the whole body copied into one new buffer.
const encodings = /** @type {const} */ ([
  ['binary', 'binary', true],
  ['compat', 'compat', true],
  ['sse', 'sse', true],
  ['binary, one buffer', 'binary', false],
  ['compat, one buffer', 'compat', false],
]);
/** @type {Record<string, number[]>} */
const times = { floor: [] };
/** @type {Record<string, number[]>} */
const cpuTimes = { floor: [] };
for (let round = 0; round < rounds; round++) {
  const [wall, cpu] = timed(() => {
    createHash('sha256').update(message).digest();
    crc32(message);
  });
  (times.floor ??= []).push(wall);
  (cpuTimes.floor ??= []).push(cpu);
  for (const [name, mapping, parts] of encodings) {
    const encoder = new BodyEncoder(mapping, { requestKey: '00112233445566778899aabbccddeeff' });
    const [w, c] = timed(() => (parts ? encoder.messageParts(message, true) : encoder.message(message, true)));
    (times[name] ??= []).push(w);
    (cpuTimes[name] ??= []).push(c);
  }
}
const floor = median(times.floor ?? []);
const floorCpu = median(cpuTimes.floor ?? []);
console.log(`encoding a ${message.length}-byte message, median of ${rounds} (node bench/server.mjs): wall, and CPU time of the process`);
console.log(`  SHA-256 + CRC-32 floor  ${floor.toFixed(3)} ms                   cpu ${floorCpu.toFixed(3)} ms`);
for (const [name] of encodings) {
  const t = median(times[name] ?? []);
  const c = median(cpuTimes[name] ?? []);
  console.log(`  ${name.padEnd(22)} ${t.toFixed(3)} ms  ${(t / floor).toFixed(2)}x the floor   cpu ${c.toFixed(3)} ms  ${(c / floorCpu).toFixed(2)}x`);
}

// A tools/call with a 64 KiB result, unframed and through the wrapper.
const handler = v2Handler();
const plain = await serve(handler.fetch);
const framed = await serve(framingHandler(handler.fetch));
const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'big', arguments: { bytes: 64 * 1024, seed: 'b' } } });
const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
/** @type {Record<string, number[]>} per case: the event loop's idle time during each call, in ms */
const idle = {};
/**
 * The call's latency and the process's CPU time for it, in ms; with `name`, the event loop's
 * idle time during it added to `idle`.
 * @param {URL} url @param {Record<string, string>} headers @param {string} [name]
 */
async function call(url, headers, name) {
  const loop = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  const response = await fetch(url, { method: 'POST', headers: { ...base, ...headers }, body });
  await response.arrayBuffer();
  const wall = ms(process.hrtime.bigint() - start);
  const used = process.cpuUsage(cpu);
  if (name !== undefined) {
    (idle[name] ??= []).push(performance.eventLoopUtilization(loop).idle);
  }
  return /** @type {[number, number]} */ ([wall, (used.user + used.system) / 1000]);
}
const optIn = (/** @type {string} */ mapping) => ({
  'mcp-framing': '1',
  'mcp-framing-request-key': randomRequestKey(),
  ...(mapping === 'compat' ? { 'mcp-framing-mapping': 'compat' } : { accept: 'application/vnd.mcp-framing, application/json, text/event-stream' }),
});
/** @type {Record<string, number[]>} */
const latency = { unframed: [], compat: [], binary: [] };
/** @type {Record<string, number[]>} */
const cpu = { unframed: [], compat: [], binary: [] };
for (let i = 0; i < 20; i++) {
  await call(plain.url, {});
  await call(framed.url, optIn('compat'));
  await call(framed.url, optIn('binary'));
}
/**
 * `cases` in round `i`'s order: rotated, so that no case always follows the same one.
 * @template T @param {T[]} cases @param {number} i
 */
const rotated = (cases, i) => [...cases.slice(i % cases.length), ...cases.slice(0, i % cases.length)];
for (let i = 0; i < calls; i++) {
  for (const [name, url, headers] of rotated(
    /** @type {const} */ ([
      ['unframed', plain.url, {}],
      ['compat', framed.url, optIn('compat')],
      ['binary', framed.url, optIn('binary')],
    ]),
    i,
  )) {
    const [wall, used] = await call(url, headers, name);
    latency[name]?.push(wall);
    cpu[name]?.push(used);
  }
}
const unframed = median(latency.unframed ?? []);
const unframedCpu = median(cpu.unframed ?? []);
console.log(`a tools/call with a 64 KiB result on loopback, median of ${calls}: latency, and CPU time of the process`);
console.log(`  unframed               ${unframed.toFixed(3)} ms                      cpu ${unframedCpu.toFixed(3)} ms`);
for (const mapping of ['compat', 'binary']) {
  const t = median(latency[mapping] ?? []);
  const c = median(cpu[mapping] ?? []);
  const label = `framed (${mapping})`.padEnd(22);
  console.log(`  ${label} ${t.toFixed(3)} ms  ${(t / unframed).toFixed(2)}x unframed   cpu ${c.toFixed(3)} ms  ${(c / unframedCpu).toFixed(2)}x`);
}
// A call's latency over its CPU time with the loop never idle is time the process was runnable
// but not running: other processes' turns, which come in whole scheduler ticks (4 ms at 250 Hz),
// more often to a call that runs longer. Near half the calls, a median moves by a whole tick.
console.log(`the event loop's idle time in those calls (waiting in epoll with nothing to run: for a peer, a timer or a thread), mean and largest; calls whose latency exceeds their CPU time by over 1 ms (not running: the machine's load)`);
for (const [name, times] of Object.entries(idle)) {
  const walls = latency[name] ?? [];
  const late = walls.filter((wall, i) => wall - (cpu[name]?.[i] ?? 0) > 1).length;
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  console.log(`  ${name.padEnd(22)} idle ${mean.toFixed(3)} ms, at most ${Math.max(...times).toFixed(3)} ms   ${((100 * late) / walls.length).toFixed(0)}% of calls not running for over 1 ms`);
}
// The same medians over the calls that ran without such a break: the latency a quiet machine
// gives (a call that runs longer is a little more likely to be left out).
const unbroken = (/** @type {string} */ name) => median((latency[name] ?? []).filter((wall, i) => wall - (cpu[name]?.[i] ?? 0) <= 1));
console.log(`the calls that ran without a break of over 1 ms, median latency`);
console.log(`  unframed               ${unbroken('unframed').toFixed(3)} ms`);
for (const mapping of ['compat', 'binary']) {
  console.log(`  ${`framed (${mapping})`.padEnd(22)} ${unbroken(mapping).toFixed(3)} ms  ${(unbroken(mapping) / unbroken('unframed')).toFixed(2)}x unframed`);
}
// The same calls in this process, without sockets (the handlers called with a Request, the body
// read whole): the CPU time of the wrapper's own work, apart from the HTTP stacks.
const wrapped = framingHandler(handler.fetch);
/** The CPU time of one call, in ms. @param {(request: Request) => Promise<Response>} fetchLike @param {Record<string, string>} headers */
async function inProcess(fetchLike, headers) {
  const request = new Request('http://127.0.0.1/mcp', { method: 'POST', headers: { ...base, ...headers }, body });
  const used = process.cpuUsage();
  await (await fetchLike(request)).arrayBuffer();
  const spent = process.cpuUsage(used);
  return (spent.user + spent.system) / 1000;
}
/** @type {Record<string, number[]>} */
const direct = { unframed: [], compat: [], binary: [] };
for (let i = 0; i < calls + 50; i++) {
  for (const [name, fetchLike, headers] of rotated(
    /** @type {const} */ ([
      ['unframed', handler.fetch, {}],
      ['compat', wrapped, optIn('compat')],
      ['binary', wrapped, optIn('binary')],
    ]),
    i,
  )) {
    const used = await inProcess(fetchLike, headers);
    if (i >= 50) {
      direct[name]?.push(used);
    }
  }
}
const directUnframed = median(direct.unframed ?? []);
console.log(`the same call in this process, no sockets, median of ${calls}: CPU time`);
console.log(`  unframed               cpu ${directUnframed.toFixed(3)} ms`);
for (const mapping of ['compat', 'binary']) {
  const c = median(direct[mapping] ?? []);
  console.log(`  ${`framed (${mapping})`.padEnd(22)} cpu ${c.toFixed(3)} ms  ${(c / directUnframed).toFixed(2)}x`);
}
// What pieces of a framed call cost on their own, with Node's APIs alone (the wrapper's share of
// the call above): hashing the result, the final response's JSON check, the request read and
// built again, and a response body read through one more ReadableStream (a pull source) and
// Response (beside the same body read as it is, and read through an identity TransformStream
// behind pipeThrough instead).
const result = Buffer.from(JSON.stringify({ result: { content: [{ type: 'text', text: toolText(64 * 1024, 'b') }] }, jsonrpc: '2.0', id: 1 }));
const chunk = new Uint8Array(result);
/** @type {[string, () => unknown][]} */
const pieces = [
  ['SHA-256 + CRC-32 of the result', () => {
    createHash('sha256').update(result).digest();
    crc32(result);
  }],
  ['JSON.parse of the result', () => JSON.parse(result.toString('latin1'))],
  ['the request read and built again', async () => {
    const request = new Request('http://127.0.0.1/mcp', { method: 'POST', headers: base, body });
    const used = process.cpuUsage();
    const read = new Uint8Array(await request.arrayBuffer());
    new Request(request.url, { method: request.method, headers: request.headers, body: read, signal: request.signal });
    return process.cpuUsage(used);
  }],
  ['a response body read as it is', async () => {
    const inner = new Response(chunk, { headers: { 'content-type': 'text/event-stream' } });
    const used = process.cpuUsage();
    await inner.arrayBuffer();
    return process.cpuUsage(used);
  }],
  ['read through a ReadableStream and a Response', async () => {
    const inner = new Response(chunk, { headers: { 'content-type': 'text/event-stream' } });
    const used = process.cpuUsage();
    const reader = /** @type {ReadableStream<Uint8Array>} */ (inner.body).getReader();
    const outer = new ReadableStream({
      async pull(controller) {
        const next = await reader.read();
        if (next.done) {
          controller.close();
        } else {
          controller.enqueue(next.value);
        }
      },
    }, { highWaterMark: 0 });
    await new Response(outer, { headers: inner.headers }).arrayBuffer();
    return process.cpuUsage(used);
  }],
  ['read through a TransformStream instead', async () => {
    const inner = new Response(chunk, { headers: { 'content-type': 'text/event-stream' } });
    const used = process.cpuUsage();
    const outer = /** @type {ReadableStream<Uint8Array>} */ (inner.body).pipeThrough(new TransformStream());
    await new Response(outer, { headers: inner.headers }).arrayBuffer();
    return process.cpuUsage(used);
  }],
];
/** @type {Record<string, number[]>} */
const pieceCpu = {};
for (let i = 0; i < calls + 50; i++) {
  for (const [name, run] of pieces) {
    const used = process.cpuUsage();
    const own = await run(); // a piece that builds its input first times itself
    const spent = own instanceof Object && 'user' in own ? /** @type {NodeJS.CpuUsage} */ (own) : process.cpuUsage(used);
    if (i >= 50) {
      (pieceCpu[name] ??= []).push((spent.user + spent.system) / 1000);
    }
  }
}
console.log(`pieces of a framed call on their own, median of ${calls}: CPU time`);
for (const [name] of pieces) {
  console.log(`  ${name.padEnd(46)} cpu ${median(pieceCpu[name] ?? []).toFixed(3)} ms`);
}
// What a framed call cannot do without, whatever the code around it: hashing the result, checking
// that the final response is one JSON text (SPEC.md §7.1), reading the request before the handler
// to find a discovery request (the handler then reads a Request built again), and one more
// stream and Response for the framed body. Their sum over the unframed call's CPU time on
// loopback is the least ratio a wrapper doing them reaches on this machine.
const pieceMedian = (/** @type {string} */ name) => median(pieceCpu[name] ?? []);
const unavoidable =
  pieceMedian('SHA-256 + CRC-32 of the result') +
  pieceMedian('JSON.parse of the result') +
  pieceMedian('the request read and built again') +
  Math.max(0, pieceMedian('read through a ReadableStream and a Response') - pieceMedian('a response body read as it is'));
console.log(`  those a framed call cannot do without, together  cpu ${unavoidable.toFixed(3)} ms: ${((unframedCpu + unavoidable) / unframedCpu).toFixed(2)}x the unframed call's CPU time on loopback at the least`);
// The two measures of the 64 KiB goal side by side.
for (const mapping of ['compat', 'binary']) {
  const loopback = median(latency[mapping] ?? []) / unframed;
  const inProcessCpu = median(direct[mapping] ?? []) / directUnframed;
  const quiet = unbroken(mapping) / unbroken('unframed');
  console.log(`64 KiB call framed (${mapping}) / unframed: loopback latency ${loopback.toFixed(2)}x (calls without a break ${quiet.toFixed(2)}x), in-process CPU ${inProcessCpu.toFixed(2)}x (goal 1.15x)`);
}
console.log(`load average after: ${load()}`);
await plain.close();
await framed.close();
await handler.close();
