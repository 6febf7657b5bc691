/**
 * Sentinel's announcements of a failover, heard on every configured sentinel.
 *
 * A planned failover (`SENTINEL FAILOVER`) closes nothing: the old master keeps answering, first as
 * a master that no longer receives writes, later as a replica, and the sidecar's connections to it
 * stay up. The sentinel leading a failover publishes `+failover-state-send-slaveof-noone` just
 * before it promotes the replica, and `+switch-master <name> <old-ip> <old-port> <new-ip> <new-port>`
 * once its configuration points at the new master (or `-failover-abort-…` when it gives up).
 * Between the two, writes may go to the new master while the old one still answers as a master,
 * so the store is paused: the cache is dropped and every lookup is a 503 (fail closed). On the
 * switch (or the abort) both connections reconnect, resolving the master through the sentinels,
 * and tracking is set up there. A pause that no announcement ends is lifted after `maxPauseMs`
 * the same way. (The heartbeat's `ROLE` check catches a demotion no sentinel told us about.)
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ParsedRedisUrl } from '../redis-url.ts';
import { systemClock, type Clock, type TimerHandle } from '../core/clock.ts';

const START = '+failover-state-send-slaveof-noone';
const SWITCH = '+switch-master';
const ABORT = '-failover-abort-*';

export interface FailoverHandlers {
  /** A failover of our master started: stop answering from the old master. */
  started(reason: string): void;
  /** The sentinels point at a (possibly new) master: move there. */
  switched(reason: string): void;
}

export interface SentinelWatch {
  close(): void;
}

/** The master name of an instance in a sentinel event (`master <name> …` or `slave … @ <name> …`). */
function masterOf(message: string): string | undefined {
  const words = message.split(' ');
  if (words[0] === 'master') return words[1];
  const at = words.indexOf('@');
  return at >= 0 ? words[at + 1] : undefined;
}

/** Subscribes to the failover events of `p.masterName` on each sentinel of `p`. */
export function watchSentinels(p: ParsedRedisUrl, h: FailoverHandlers, log: Logger, maxPauseMs = 60_000, clock: Clock = systemClock): SentinelWatch {
  let lastSwitch = '';
  let paused: TimerHandle | undefined;
  const switched = (reason: string) => {
    clock.clearTimeout(paused);
    paused = undefined;
    h.switched(reason);
  };
  const conns = p.hosts.map(({ host, port }) => {
    const c = new Redis({
      host,
      port,
      ...(p.sentinelUsername !== undefined ? { username: p.sentinelUsername } : {}),
      ...(p.sentinelPassword !== undefined ? { password: p.sentinelPassword } : {}),
      enableOfflineQueue: true,
      maxRetriesPerRequest: null,
      retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
      protocol: 2,
    });
    c.on('error', (err: Error) => log.debug({ sentinel: `${host}:${port}`, err: { message: err.message } }, 'sentinel watch connection error'));
    // ioredis subscribes again after each reconnect.
    c.subscribe(START, SWITCH).catch(() => {});
    c.psubscribe(ABORT).catch(() => {});
    c.on('message', (channel: string, message: string) => {
      if (channel === SWITCH) {
        const [name, , , ip, newPort] = message.split(' ');
        if (name !== p.masterName || message === lastSwitch) return;
        lastSwitch = message; // every sentinel announces the same switch
        log.warn({ master: `${ip}:${newPort}` }, 'sentinel switched master; cache dropped, reconnecting');
        switched(`sentinel switched master to ${ip}:${newPort}`);
      } else if (channel === START && masterOf(message) === p.masterName) {
        log.warn('sentinel failover under way; cache dropped, lookups refused until the switch');
        h.started('sentinel failover under way');
        clock.clearTimeout(paused);
        paused = clock.setTimeout(() => switched('no end of the sentinel failover announced'), maxPauseMs).unref();
      }
    });
    c.on('pmessage', (_pattern: string, channel: string, message: string) => {
      if (paused === undefined || masterOf(message) !== p.masterName) return;
      log.warn({ event: channel }, 'sentinel failover given up; reconnecting');
      switched(`sentinel failover given up (${channel})`);
    });
    return c;
  });
  return {
    close() {
      clock.clearTimeout(paused);
      for (const c of conns) c.disconnect();
    },
  };
}
