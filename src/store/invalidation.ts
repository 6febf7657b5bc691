/**
 * Store-driven invalidation: Redis server-assisted client-side caching in broadcast mode.
 *
 * A *link* is a pair of connections to one Redis server: the data connection that the sidecar reads
 * through, and a subscriber on `__redis__:invalidate`. Tracking is enabled on the data connection
 * with `CLIENT TRACKING on REDIRECT <subscriber id> BCAST PREFIX <key:> PREFIX <acct:>`, so the
 * server pushes the name of every changed key under those prefixes (written by any client) to the
 * subscriber, before it replies to the writer. A link is *tracked* only once that command has
 * succeeded for the current pair of connections; any close, reconnect or failed heartbeat of
 * either connection makes it untracked at once (tracking is per connection and is lost with it).
 *
 * Standalone and Sentinel use one link (both connections resolve the master the same way; the
 * subscriber's unique connection name is checked on the data connection's server, so a pair split
 * across two servers during a failover is never trusted). Cluster uses one link per master, with
 * the subscriber on the same node, since each master only reports writes to its own slots; any
 * change of the master set counts as losing tracking.
 *
 * The subscriber speaks RESP2: ioredis drops RESP3 `invalidate` pushes, while in RESP2 the server
 * delivers invalidations as ordinary pub/sub messages (payload: an array of key names, or null for
 * "everything", e.g. FLUSHALL).
 *
 * Staleness bound (`boundMs`): what Redis cannot announce — a connection that dies without FIN or
 * RST, a dataset swapped under the connection (`SWAPDB`), a planned Sentinel failover that leaves
 * the old master answering — is caught by a heartbeat every quarter of the bound: one round trip on
 * each connection (`PING` on the subscriber; `CLIENT TRACKINGINFO`, and where it applies the
 * dataset marker and `ROLE`, pipelined on the data connection). A link counts as tracked only
 * while the last fully confirmed heartbeat was *sent* less than `boundMs` ago: the subscriber's
 * PONG arrives after every invalidation the server queued before it, so a confirmation proves the
 * cache has seen every change made before the heartbeat was sent. Past the bound without one, the
 * link is lost (cache dropped) and tracking is set up again from scratch.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { after, every, systemClock, type Clock } from '../core/clock.ts';
import { heartbeatEvery, lapseIn, withinBound } from './staleness.ts';

export const INVALIDATE_CHANNEL = '__redis__:invalidate';

export interface TrackerEvents {
  /** Keys changed in the store; `null` means everything (FLUSHALL, FLUSHDB). */
  invalidate: [keys: string[] | null];
  /** Tracking is no longer confirmed: a link broke, reconnected, or the topology changed. */
  down: [reason: string];
  /** Tracking is confirmed on every link. */
  up: [];
}

/** The invalidation source the cache listens to. */
export interface Tracker extends EventEmitter<TrackerEvents> {
  /** `true` only while tracking is confirmed on every link (caching is safe). */
  readonly tracked: boolean;
  /** Connection re-establishments seen (data or subscriber, any node). */
  readonly reconnects: number;
  close(): void;
}

export interface TrackingOptions {
  readonly prefixes: readonly string[];
  /**
   * Staleness bound: a link is tracked only while its last confirmed heartbeat was sent less than
   * this long ago. The heartbeat runs every quarter of it.
   */
  readonly boundMs: number;
  /** Delay before retrying a failed attempt to enable tracking. */
  readonly retryMs: number;
  /**
   * Dataset marker (standalone, Sentinel): a key holding a random value, created if absent when
   * tracking is enabled and compared on every heartbeat; a different value (or none) means the
   * dataset under the connection was replaced without an invalidation (`SWAPDB`).
   */
  readonly datasetMarker?: string;
  /** The data connection must be a master (Sentinel): `ROLE` is checked on every heartbeat. */
  readonly requireMaster?: boolean;
  readonly log: Logger;
  /** The heartbeat, retry and lapse timers and the bound's clock, monotonic (default `systemClock`). */
  readonly clock?: Clock;
}

/** Creates the subscriber connection of a link, with the given unique connection name. */
export type SubscriberFactory = (connectionName: string) => Redis;

interface LinkHandlers {
  invalidate(keys: string[] | null): void;
  state(tracked: boolean, reason: string): void;
}

const noop = () => {};

/** One data connection and its redirect subscriber on the same server. */
export class TrackingLink {
  reconnects = 0;
  /** Tracking enabled on the current pair of connections (see `tracked` for the bound). */
  #on = false;
  /** When the last fully confirmed heartbeat (or the tracking setup) was sent (on the injected monotonic clock). */
  #confirmedAt = 0;
  /** The dataset marker's value read when tracking was enabled. */
  #marker: string | null = null;
  #lapse: (() => void) | undefined;
  #markerWarned = false;
  /** A Sentinel failover is under way: no tracking until it ends. */
  #paused = false;
  readonly #data: Redis;
  readonly #sub: Redis;
  readonly #subName: string;
  readonly #opts: TrackingOptions;
  readonly #h: LinkHandlers;
  readonly #label: string;
  /** Bumped by every connection event; an attempt only counts if it is unchanged. */
  #gen = 0;
  /** CLIENT ID + SUBSCRIBE for the current subscriber connection. */
  #subSetup: Promise<number> | null = null;
  #attempting = false;
  #closed = false;
  #retry: (() => void) | undefined;
  readonly #beat: () => void;
  readonly #clock: Clock;
  #seenReady = { data: false, sub: false };
  readonly #detach: () => void;
  readonly #watched = new WeakSet<object>();

  constructor(data: Redis, makeSub: SubscriberFactory, opts: TrackingOptions, handlers: LinkHandlers, label: string) {
    this.#data = data;
    this.#subName = `keygate-inval-${randomBytes(6).toString('hex')}`;
    this.#sub = makeSub(this.#subName);
    this.#opts = opts;
    this.#h = handlers;
    this.#label = label;

    const onDataReady = () => this.#connected('data');
    const onDataClose = () => this.#lost('data connection closed');
    const onDataConnect = () => this.#watchStream(data, 'data');
    data.on('ready', onDataReady);
    data.on('close', onDataClose);
    data.on('connect', onDataConnect);
    this.#watchStream(data, 'data');
    this.#detach = () => {
      data.off('ready', onDataReady);
      data.off('close', onDataClose);
      data.off('connect', onDataConnect);
    };
    this.#sub.on('connect', () => this.#watchStream(this.#sub, 'invalidation'));
    this.#sub.on('error', (err: Error) => opts.log.debug({ link: label, err: { message: err.message } }, 'invalidation subscriber error'));
    this.#sub.on('ready', () => {
      this.#subSetup = this.#setupSubscriber();
      this.#subSetup.catch(noop);
      this.#connected('sub');
    });
    this.#sub.on('close', () => {
      this.#subSetup = null;
      this.#lost('invalidation connection closed');
    });
    this.#sub.on('messageBuffer', (channel: Buffer, message: unknown) => {
      if (channel.toString() !== INVALIDATE_CHANNEL) return;
      this.#h.invalidate(Array.isArray(message) ? message.map((k) => String(k)) : null);
    });
    this.#clock = opts.clock ?? systemClock;
    this.#beat = every(this.#clock, heartbeatEvery(opts.boundMs), () => this.#heartbeat());
    if (data.status === 'wait') data.connect().catch(noop);
    if (data.status === 'ready') this.#seenReady.data = true;
    this.#kick();
  }

  /** Tracking is on and was confirmed within the staleness bound. */
  get tracked(): boolean {
    return this.#on && withinBound(this.#confirmedAt, this.#clock.monotonic(), this.#opts.boundMs);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#beat();
    this.#retry?.();
    this.#lapse?.();
    this.#detach();
    this.#gen++;
    this.#on = false;
    this.#sub.disconnect();
  }

  /** A failover is under way (Sentinel announced it): tracking dropped now and not set up again until `masterSwitched`. */
  pause(reason: string): void {
    if (this.#closed) return;
    this.#paused = true;
    this.#lost(reason);
  }

  /**
   * The master moved (or the failover was given up): drop tracking now, before any further answer,
   * and reconnect both connections, which resolve the master through the sentinels.
   */
  masterSwitched(reason: string): void {
    if (this.#closed) return;
    this.#paused = false;
    this.#lost(reason);
    this.#data.disconnect(true);
    this.#sub.disconnect(true);
  }

  /**
   * ioredis reports 'close' in the loop's close phase, after requests read in the same iteration;
   * the socket's 'end' (peer closed) and 'error' come earlier, so tracking is dropped before any
   * request that arrived after the connection broke is answered.
   */
  #watchStream(conn: Redis, which: string): void {
    const stream = (conn as unknown as { stream?: NodeJS.EventEmitter }).stream;
    if (!stream || this.#watched.has(stream)) return;
    this.#watched.add(stream);
    const lost = () => {
      if (!this.#closed) this.#lost(`${which} connection broken`);
    };
    stream.once('end', lost);
    stream.once('error', lost);
  }

  async #setupSubscriber(): Promise<number> {
    const id = Number(await this.#sub.client('ID'));
    await this.#sub.subscribe(INVALIDATE_CHANNEL);
    return id;
  }

  #connected(which: 'data' | 'sub'): void {
    if (this.#seenReady[which]) this.reconnects++;
    this.#seenReady[which] = true;
    this.#lost(`${which} connection re-established`);
    this.#kick();
  }

  #lost(reason: string): void {
    this.#gen++;
    this.#lapse?.();
    if (this.#on) {
      this.#on = false;
      this.#opts.log.warn({ link: this.#label, reason }, 'cache invalidation link lost; cache dropped');
      this.#h.state(false, reason);
    }
  }

  /** Extends the tracked window to `sentAt + boundMs`; past it without a newer proof, the link is lost. */
  #confirm(sentAt: number): void {
    // Once the window has closed the link stays lost: the lapse check drops it and sets it up anew
    // (a cached answer must never outlive a gap in the proof).
    if (sentAt <= this.#confirmedAt || !this.tracked) return;
    this.#confirmedAt = sentAt;
    this.#armLapse();
  }

  #armLapse(): void {
    const sentAt = this.#confirmedAt;
    this.#lapse?.();
    this.#lapse = after(this.#clock, lapseIn(sentAt, this.#clock.monotonic(), this.#opts.boundMs), () => this.#checkLapse());
  }

  #checkLapse(): void {
    if (!this.#on || this.#closed || this.tracked) return;
    this.#lost(`no heartbeat answer within ${this.#opts.boundMs} ms`);
    this.#kick();
  }

  /** Reads the dataset marker, creating it first when it is absent. */
  async #readMarker(): Promise<string | null> {
    const key = this.#opts.datasetMarker;
    if (!key) return null;
    try {
      await this.#data.set(key, randomBytes(16).toString('hex'), 'NX');
    } catch (err) {
      const msg = (err as Error).message;
      if (!/^(NOPERM|READONLY)/.test(msg)) throw err;
      if (!this.#markerWarned) {
        this.#markerWarned = true;
        this.#opts.log.warn({ link: this.#label, err: { message: msg } }, 'cannot create the dataset marker; SWAPDB to a database without it is not detected');
      }
    }
    return await this.#data.get(key);
  }

  /** One round trip on the data connection: tracking redirect, dataset marker, role. */
  async #dataCheck(): Promise<{ redirect: number; marker: string | null; role: string | null }> {
    const p = this.#data.pipeline().call('CLIENT', 'TRACKINGINFO');
    if (this.#opts.datasetMarker) p.get(this.#opts.datasetMarker);
    if (this.#opts.requireMaster) p.call('ROLE');
    const res = (await p.exec()) ?? [];
    for (const [err] of res) if (err) throw err;
    const info = res[0]![1];
    const redirect = Array.isArray(info) ? Number(info[info.indexOf('redirect') + 1]) : NaN;
    const marker = this.#opts.datasetMarker ? ((res[1]![1] as string | null) ?? null) : null;
    const roleReply = this.#opts.requireMaster ? res.at(-1)![1] : null;
    const role = Array.isArray(roleReply) ? String(roleReply[0]) : null;
    return { redirect, marker, role };
  }

  #kick(): void {
    if (this.#closed) return;
    setImmediate(() => void this.#attempt());
  }

  #scheduleRetry(): void {
    this.#retry?.();
    this.#retry = after(this.#clock, this.#opts.retryMs, () => void this.#attempt());
  }

  async #attempt(): Promise<void> {
    if (this.#closed || this.#attempting || this.#on || this.#paused) return;
    if (this.#data.status === 'wait') this.#data.connect().catch(noop);
    if (this.#data.status !== 'ready' || this.#sub.status !== 'ready' || !this.#subSetup) return; // a ready event kicks again
    this.#attempting = true;
    const g = this.#gen;
    const sentAt = this.#clock.monotonic();
    try {
      const id = await this.#subSetup;
      // The subscriber answers (it may have died silently), and it is on the data connection's
      // server: its unique name is checked there.
      const [, who] = await Promise.all([this.#sub.ping(), this.#data.client('LIST', 'ID', String(id))]);
      if (!String(who).includes(` name=${this.#subName} `)) throw new Error('invalidation subscriber is not on the data connection server');
      if (g !== this.#gen) return;
      await this.#data.client('TRACKING', 'off');
      await this.#data.client('TRACKING', 'on', 'REDIRECT', String(id), 'BCAST', ...this.#opts.prefixes.flatMap((p) => ['PREFIX', p]));
      // After tracking is on: a later replacement of the dataset changes what the heartbeat reads.
      const marker = await this.#readMarker();
      if (this.#opts.requireMaster) {
        const role = (await this.#data.call('ROLE')) as unknown[];
        if (String(role[0]) !== 'master') throw new Error(`data connection is on a ${String(role[0])}, not the master`);
      }
      if (g !== this.#gen || this.#closed) return;
      this.#marker = marker;
      this.#on = true;
      this.#confirmedAt = sentAt;
      this.#armLapse();
      this.#opts.log.info({ link: this.#label }, 'cache invalidation tracking on');
      this.#h.state(true, 'tracking on');
    } catch (err) {
      if (g === this.#gen && !this.#closed) {
        this.#opts.log.warn({ link: this.#label, err: { message: (err as Error).message } }, 'enabling cache invalidation failed; retrying');
        this.#scheduleRetry();
      }
    } finally {
      this.#attempting = false;
      if (!this.#on && g !== this.#gen) this.#kick();
    }
  }

  /**
   * Both connections answer, the server still redirects our tracking to our subscriber, the dataset
   * marker is unchanged and (Sentinel) the server is still the master. A full success extends the
   * tracked window from the moment the heartbeat was sent.
   */
  #heartbeat(): void {
    if (!this.#on || this.#closed) return;
    const g = this.#gen;
    const subSetup = this.#subSetup;
    const sentAt = this.#clock.monotonic();
    const subOk = this.#sub.ping().then(
      () => true,
      (err: Error) => {
        if (g === this.#gen) {
          this.#lost(`invalidation heartbeat failed: ${err.message}`);
          // Re-establish from scratch: a new subscriber connection, then tracking again.
          this.#sub.disconnect(true);
        }
        return false;
      },
    );
    Promise.all([subOk, this.#dataCheck(), subSetup])
      .then(([ok, check, id]) => {
        if (g !== this.#gen || !ok) return;
        let problem: string | null = null;
        if (check.redirect !== id) problem = 'tracking no longer redirected to the subscriber';
        else if (this.#opts.datasetMarker && check.marker !== this.#marker) problem = 'dataset replaced (marker changed): SWAPDB or a restore';
        else if (this.#opts.requireMaster && check.role !== 'master') problem = `data connection is on a ${check.role}, not the master`;
        if (problem === null) return this.#confirm(sentAt);
        this.#lost(problem);
        if (check.role !== null && check.role !== 'master') {
          // Demoted (a planned failover): reconnect both, which resolve the master again.
          this.#data.disconnect(true);
          this.#sub.disconnect(true);
        }
        this.#kick();
      })
      .catch((err: Error) => {
        if (g !== this.#gen) return;
        // The data connection did not answer: lost; ioredis' socket timeout replaces a dead socket.
        this.#lost(`heartbeat failed: ${err.message}`);
        this.#kick();
      });
  }
}

/** Standalone and Sentinel: one link. */
export class SingleTracker extends EventEmitter<TrackerEvents> implements Tracker {
  readonly #link: TrackingLink;

  constructor(data: Redis, makeSub: SubscriberFactory, opts: TrackingOptions) {
    super();
    this.#link = new TrackingLink(
      data,
      makeSub,
      opts,
      {
        invalidate: (keys) => this.emit('invalidate', keys),
        state: (up, reason) => (up ? this.emit('up') : this.emit('down', reason)),
      },
      'primary',
    );
  }

  get tracked(): boolean {
    return this.#link.tracked;
  }

  get reconnects(): number {
    return this.#link.reconnects;
  }

  /** Sentinel announced a failover: cache dropped at once, not used again until it ends. */
  pause(reason: string): void {
    this.#link.pause(reason);
  }

  /** Sentinel announced a new master (or gave up): cache dropped, both connections follow it. */
  masterSwitched(reason: string): void {
    this.#link.masterSwitched(reason);
  }

  close(): void {
    this.#link.close();
  }
}

/**
 * Cluster: one link per master (invalidations are per node). Tracked only while every current
 * master's link is tracked; a change of the master set (failover, node added or removed) drops
 * tracking until every new master has confirmed it.
 */
export class ClusterTracker extends EventEmitter<TrackerEvents> implements Tracker {
  readonly #cluster: Cluster;
  readonly #makeSub: (host: string, port: number, name: string) => Redis;
  readonly #opts: TrackingOptions;
  readonly #links = new Map<string, { node: Redis; link: TrackingLink }>();
  #tracked = false;
  #closed = false;
  #reconnectsOfClosed = 0;
  readonly #onTopology = () => this.#sync();
  readonly #onClusterLost = () => this.#recompute('cluster connection lost');

  constructor(cluster: Cluster, makeSub: (host: string, port: number, name: string) => Redis, opts: TrackingOptions) {
    super();
    this.#cluster = cluster;
    this.#makeSub = makeSub;
    this.#opts = opts;
    for (const ev of ['+node', '-node', 'refresh', 'ready'] as const) cluster.on(ev, this.#onTopology);
    for (const ev of ['close', 'end', 'reconnecting'] as const) cluster.on(ev, this.#onClusterLost);
    this.#sync();
  }

  get tracked(): boolean {
    if (!this.#tracked) return false;
    for (const { link } of this.#links.values()) if (!link.tracked) return false;
    return true;
  }

  get reconnects(): number {
    let n = this.#reconnectsOfClosed;
    for (const { link } of this.#links.values()) n += link.reconnects;
    return n;
  }

  close(): void {
    this.#closed = true;
    for (const ev of ['+node', '-node', 'refresh', 'ready'] as const) this.#cluster.off(ev, this.#onTopology);
    for (const ev of ['close', 'end', 'reconnecting'] as const) this.#cluster.off(ev, this.#onClusterLost);
    for (const { link } of this.#links.values()) link.close();
    this.#links.clear();
    this.#tracked = false;
  }

  #sync(): void {
    if (this.#closed) return;
    const masters = new Map<string, Redis>();
    for (const node of this.#cluster.nodes('master')) masters.set(`${node.options.host}:${node.options.port}`, node);
    let changed = false;
    for (const [key, entry] of this.#links) {
      if (masters.get(key) !== entry.node) {
        this.#reconnectsOfClosed += entry.link.reconnects;
        entry.link.close();
        this.#links.delete(key);
        changed = true;
      }
    }
    for (const [key, node] of masters) {
      if (this.#links.has(key)) continue;
      const [host, port] = [node.options.host!, node.options.port!];
      const link = new TrackingLink(
        node,
        (name) => this.#makeSub(host, port, name),
        this.#opts,
        {
          invalidate: (keys) => this.emit('invalidate', keys),
          state: (_up, reason) => this.#recompute(`${key}: ${reason}`),
        },
        key,
      );
      this.#links.set(key, { node, link });
      changed = true;
    }
    if (changed && this.#tracked) {
      this.#tracked = false;
      this.#opts.log.warn({ masters: [...masters.keys()] }, 'cluster topology changed; cache dropped');
      this.emit('down', 'cluster topology changed');
    }
    this.#recompute('cluster topology');
  }

  #recompute(reason: string): void {
    const all =
      !this.#closed &&
      this.#cluster.status === 'ready' &&
      this.#links.size > 0 &&
      [...this.#links.values()].every(({ link }) => link.tracked);
    if (all === this.#tracked) return;
    this.#tracked = all;
    if (all) this.emit('up');
    else this.emit('down', reason);
  }
}
