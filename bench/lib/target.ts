/**
 * One benchmark target in its own process (so that the load generator never shares its event loop):
 *   scripts/node bench/lib/target.ts keygate       the sidecar (`startSidecar`), configured from the environment
 *   scripts/node bench/lib/target.ts noop-grpcjs   the floor: @grpc/grpc-js serving Check with a fixed OK answer
 *   scripts/node bench/lib/target.ts noop-h2       the limit: a bare node:http2 handler answering a fixed gRPC OK
 *                                                  after reading the request (what node:http2 itself costs)
 *   scripts/node bench/lib/target.ts noop-extproc  the ext_proc floor: @grpc/grpc-js serving Process, answering
 *                                                  every ProcessingRequest with the empty response of its phase
 *                                                  (none in observability_mode) and ending at the client's end
 *   scripts/node bench/lib/target.ts noop-extproc-h2  the ext_proc limit: a bare node:http2 handler answering every
 *                                                  ProcessingRequest with a prebuilt CONTINUE frame of its phase
 *                                                  (found from the message's first tag byte; nothing decoded beyond
 *                                                  the gRPC framing), OK at the client's end
 *   scripts/node bench/lib/target.ts console      `keygate console` (`startConsole`: the management API, the web
 *                                                  page, webhook delivery), configured from the environment
 *                                                  (REDIS_URL, KEYGATE_REVEAL_KEY, KEYGATE_CONSOLE_*)
 * Reports `{ port, pid }` over IPC once listening; exits cleanly on SIGTERM (so `--cpu-prof` is written).
 */
import * as http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { loadConfig } from '../../src/config.ts';
import { startSidecar } from '../../src/main.ts';
import { loadConsoleApiConfig } from '../../src/console-api/config.ts';
import { startConsole } from '../../src/console-api/main.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { authorizationService, loadEnvoyProtos } from '../../proto/envoy-protos.ts';
import { encodeMessage } from '../../src/transport/grpc/codec.ts';
import { checkMethod, grpcFrame } from './bodies.ts';

const kind = process.argv[2];
const OK = { status: { code: 0 } };

async function noopGrpcJs(): Promise<{ port: number; close(): Promise<void> }> {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024, 'grpc.max_concurrent_streams': 1000 });
  server.addService(authorizationService().service, {
    Check: (_call: unknown, cb: grpc.sendUnaryData<object>) => cb(null, OK),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { port, close: () => new Promise((r) => server.tryShutdown(() => r())) };
}

async function noopExtProc(): Promise<{ port: number; close(): Promise<void> }> {
  const def = loadEnvoyProtos(['envoy/service/ext_proc/v3/external_processor.proto']);
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024, 'grpc.max_concurrent_streams': 1000 });
  const phases = ['request_headers', 'response_headers', 'request_body', 'response_body', 'request_trailers', 'response_trailers'];
  server.addService(def['envoy.service.ext_proc.v3.ExternalProcessor'] as grpc.ServiceDefinition, {
    Process: (call: grpc.ServerDuplexStream<Record<string, unknown>, object>) => {
      call.on('data', (m: Record<string, unknown>) => {
        if (m.observability_mode) return;
        const phase = phases.find((p) => m[p] != null);
        if (phase) call.write({ [phase]: {} });
      });
      call.on('end', () => call.end());
      call.on('error', () => {});
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { port, close: () => new Promise((r) => server.tryShutdown(() => r())) };
}

async function noopH2(): Promise<{ port: number; close(): Promise<void> }> {
  const body = grpcFrame(checkMethod().responseSerialize(OK));
  const server = http2.createServer({ settings: { maxConcurrentStreams: 1000 } });
  server.on('stream', (stream) => {
    stream.on('data', () => {});
    stream.on('end', () => {
      if (stream.destroyed) return;
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(body);
    });
    stream.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  return { port: typeof addr === 'object' && addr ? addr.port : 0, close: () => new Promise((r) => server.close(() => r())) };
}

/**
 * ProcessingRequest's phase fields 2-7 (request/response headers, body, trailers) → the framed
 * ProcessingResponse CONTINUE of that phase (fields 1-6, each an empty message), by the message's
 * first byte (the tag of the phase field, which an encoder writes first: Envoy and the bench do).
 */
const EXT_PROC_CONTINUE: (Buffer | undefined)[] = [];
for (let f = 2; f <= 7; f++) EXT_PROC_CONTINUE[(f << 3) | 2] = grpcFrame(encodeMessage([[f - 1, []]]));

async function noopExtProcH2(): Promise<{ port: number; close(): Promise<void> }> {
  const server = http2.createServer({ settings: { maxConcurrentStreams: 1000, initialWindowSize: 1 << 20 } });
  server.on('stream', (stream) => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    let pending: Buffer | null = null;
    stream.on('data', (chunk: Buffer) => {
      const b = pending === null ? chunk : Buffer.concat([pending, chunk]);
      let i = 0;
      while (b.length - i >= 5) {
        const len = b.readUInt32BE(i + 1);
        if (b.length - i < 5 + len) break;
        const answer = EXT_PROC_CONTINUE[b[i + 5]!];
        if (answer !== undefined) stream.write(answer);
        i += 5 + len;
      }
      pending = i === b.length ? null : b.subarray(i);
    });
    stream.on('end', () => {
      if (!stream.destroyed) stream.end();
    });
    stream.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  return { port: typeof addr === 'object' && addr ? addr.port : 0, close: () => new Promise((r) => server.close(() => r())) };
}

async function keygate(): Promise<{ port: number; close(): Promise<void> }> {
  const config = loadConfig({ grpcPort: 0, httpPort: 0, adminPort: 0 }, process.env);
  const sidecar = await startSidecar(config, createLogger(config.logLevel));
  // measured from ready: the store and its invalidation link are up
  for (let i = 0; i < 500 && !sidecar.ready(); i++) await new Promise((r) => setTimeout(r, 20));
  return { port: sidecar.grpcPort, close: () => sidecar.close() };
}

async function consoleServer(): Promise<{ port: number; close(): Promise<void> }> {
  const config = loadConsoleApiConfig({ port: 0, redisUrl: process.env.REDIS_URL }, process.env);
  const srv = await startConsole(config, createLogger('warn'), { revealKey: process.env.KEYGATE_REVEAL_KEY });
  return { port: srv.port, close: () => srv.close() };
}

const starters: Record<string, () => Promise<{ port: number; close(): Promise<void> }>> = {
  keygate,
  'noop-grpcjs': noopGrpcJs,
  'noop-h2': noopH2,
  'noop-extproc': noopExtProc,
  'noop-extproc-h2': noopExtProcH2,
  console: consoleServer,
};

const start = kind ? starters[kind] : undefined;
if (!start) {
  process.stderr.write(`target: unknown kind ${JSON.stringify(kind)}; one of ${Object.keys(starters).join(', ')}\n`);
  process.exit(2);
}
const t = await start();
let closing = false;
const stop = () => {
  if (closing) return;
  closing = true;
  const force = setTimeout(() => process.exit(0), 3000);
  force.unref();
  t.close().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('disconnect', stop);
// `{ gc: true }` from the runner (memory phase, with --expose-gc): a full collection, then an ack
process.on('message', (m: { gc?: boolean }) => {
  if (m?.gc) {
    (globalThis as { gc?: () => void }).gc?.();
    process.send?.({ gcDone: true, usage: process.memoryUsage() });
  }
});
process.send?.({ port: t.port, pid: process.pid });
