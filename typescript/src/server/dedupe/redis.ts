/**
 * The Redis / Valkey store (SPEC.md §17.12, record format 1 of §17.12.1): one hash per record
 * under a prefix, one Lua script per operation, byte for byte the Rust crate's
 * (`src/dedupe/redis/*.lua`), so that servers in every language sharing one Redis replay one
 * another's records. Any client that sends a command works: pass a connected node-redis client
 * (`redis`, an optional peer dependency), or anything with its `sendCommand`.
 *
 * @module
 */

import { createHash } from 'node:crypto';

import { StoreError, type ClaimReply, type DedupeStore } from './store.js';

/** The scripts of SPEC.md §17.12.1, their text as the crate ships it. */
export const SCRIPTS = {
  claim: "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\nlocal lease = tonumber(ARGV[3])\nlocal r = redis.call('HMGET', KEYS[1], 's', 'fp', 'g', 'l', 'r')\nif not r[1] then\n  redis.call('HSET', KEYS[1], 's', 'f', 'fp', ARGV[1], 't', ARGV[2], 'g', 1, 'l', now + lease)\n  redis.call('PEXPIRE', KEYS[1], ARGV[4])\n  return {'claimed', 1}\nend\nif r[2] ~= ARGV[1] then return {'conflict', r[2]} end\nif r[1] == 'f' then\n  local left = tonumber(r[4]) - now\n  if left > 0 then return {'in_flight', left} end\n  if ARGV[5] == '1' then\n    local g = tonumber(r[3]) + 1\n    redis.call('HSET', KEYS[1], 't', ARGV[2], 'g', g, 'l', now + lease)\n    redis.call('PEXPIRE', KEYS[1], ARGV[4])\n    return {'claimed', g}\n  end\n  redis.call('HSET', KEYS[1], 's', 'a')\n  redis.call('HDEL', KEYS[1], 't', 'l')\n  return {'abandoned'}\nend\nif r[1] == 'a' then return {'abandoned'} end\nreturn {'done', r[1], r[5]}\n",
  renew: "local r = redis.call('HMGET', KEYS[1], 's', 't')\nif r[1] ~= 'f' or r[2] ~= ARGV[1] then return 0 end\nlocal t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\nredis.call('HSET', KEYS[1], 'l', now + tonumber(ARGV[2]))\nreturn 1\n",
  complete: "local r = redis.call('HMGET', KEYS[1], 's', 't')\nif r[2] ~= ARGV[1] then return 0 end\nif r[1] ~= 'f' then return 1 end\nredis.call('HSET', KEYS[1], 's', ARGV[2], 'r', ARGV[3])\nredis.call('HDEL', KEYS[1], 'l')\nredis.call('PEXPIRE', KEYS[1], ARGV[4])\nreturn 1\n",
  release: "local r = redis.call('HMGET', KEYS[1], 's', 't')\nif r[1] ~= 'f' or r[2] ~= ARGV[1] then return 0 end\nredis.call('DEL', KEYS[1])\nreturn 1\n",
} as const;

/** The default key prefix (SPEC.md §17.12.1). */
export const DEFAULT_PREFIX = 'mcp-framing:dedupe:';

/** What the store needs of a Redis client: node-redis's `sendCommand`. */
export interface RedisCommands {
  sendCommand(args: string[]): Promise<unknown>;
}

/** Options of a {@link RedisStore}. */
export interface RedisStoreOptions {
  /** The key prefix; default `mcp-framing:dedupe:`. */
  prefix?: string;
  /** Redis Cluster: the scripts declare themselves writes (`#!lua`, Redis 7 or Valkey). */
  cluster?: boolean;
}

type ScriptName = keyof typeof SCRIPTS;

/** A store on Redis or Valkey (SPEC.md §17.12). */
export class RedisStore implements DedupeStore {
  private readonly prefix: string;
  private readonly texts: Record<ScriptName, string>;
  private readonly shas: Record<ScriptName, string>;

  constructor(
    private readonly client: RedisCommands,
    options: RedisStoreOptions = {},
  ) {
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    const texts = {} as Record<ScriptName, string>;
    const shas = {} as Record<ScriptName, string>;
    for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
      texts[name] = options.cluster === true ? `#!lua\n${SCRIPTS[name]}` : SCRIPTS[name];
      shas[name] = createHash('sha1').update(texts[name]).digest('hex');
    }
    this.texts = texts;
    this.shas = shas;
  }

  /** Runs a script: `EVALSHA`, and `EVAL` when the server does not know it yet. */
  private async run(name: ScriptName, key: string, argv: string[]): Promise<unknown> {
    const args = ['1', this.prefix + key, ...argv];
    const failed = (error: unknown): StoreError =>
      new StoreError('redis', `redis: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    try {
      return await this.client.sendCommand(['EVALSHA', this.shas[name], ...args]);
    } catch (error) {
      if (!String(error instanceof Error ? error.message : error).startsWith('NOSCRIPT')) {
        throw failed(error);
      }
      try {
        return await this.client.sendCommand(['EVAL', this.texts[name], ...args]);
      } catch (again) {
        throw failed(again);
      }
    }
  }

  async claim(key: string, fingerprint: string, token: string, leaseMs: number, retentionMs: number, reexecute: boolean): Promise<ClaimReply> {
    const reply = await this.run('claim', key, [fingerprint, token, String(ms(leaseMs)), String(ms(retentionMs)), reexecute ? '1' : '0']);
    if (!Array.isArray(reply)) {
      throw new StoreError('corrupt', `unexpected reply to claim: ${String(reply)}`);
    }
    const [kind, a, b] = reply as unknown[];
    switch (kind) {
      case 'claimed':
        return { kind, generation: Number(a) };
      case 'conflict':
        return { kind };
      case 'in_flight':
        return { kind, msLeft: Number(a) };
      case 'abandoned':
        return { kind };
      case 'done':
        if ((a === 'r' || a === 'e' || a === 'n') && typeof b === 'string') {
          return { kind, state: a, payload: b };
        }
    }
    throw new StoreError('corrupt', `unexpected reply to claim: ${JSON.stringify(reply)}`);
  }

  async renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    return flag(await this.run('renew', key, [token, String(ms(leaseMs))]));
  }

  async complete(key: string, token: string, state: 'r' | 'e' | 'n', payload: string, retentionMs: number): Promise<boolean> {
    return flag(await this.run('complete', key, [token, state, payload, String(ms(retentionMs))]));
  }

  async release(key: string, token: string): Promise<boolean> {
    return flag(await this.run('release', key, [token]));
  }
}

/** Durations in whole milliseconds, at least 1 (SPEC.md §17.12.1). */
function ms(value: number): number {
  return Math.max(1, Math.ceil(value));
}

function flag(reply: unknown): boolean {
  if (reply === 1 || reply === 0) {
    return reply === 1;
  }
  throw new StoreError('corrupt', `unexpected reply: ${String(reply)}`);
}
