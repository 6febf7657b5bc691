/**
 * An OTLP/HTTP sink on loopback for the benchmark: answers every export request 200 (an empty
 * Export…ServiceResponse) and counts requests and bytes, so a sidecar with tracing on exports as it
 * would to a collector without the collector's cost on the machine. Bodies are read and dropped.
 */
import { createServer } from 'node:http';

export interface OtlpSink {
  readonly url: string;
  readonly requests: number;
  readonly bytes: number;
  close(): Promise<void>;
}

export async function startOtlpSink(): Promise<OtlpSink> {
  let requests = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => {
      requests++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    get bytes() {
      return bytes;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
