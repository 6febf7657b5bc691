/**
 * A plain node:http client for tests that need exact control of the wire: repeated headers sent as
 * separate lines (fetch would join them), no retries, a fresh connection per request.
 */
import { request } from 'node:http';

export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

export interface RawRequest {
  readonly method?: string;
  readonly path: string;
  /** An array value is sent as that many header lines. */
  readonly headers?: Record<string, string | string[]>;
  readonly body?: string | Buffer;
}

export function send(port: number, r: RawRequest): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method: r.method ?? 'GET', path: r.path, headers: r.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(r.body);
  });
}

/** The parsed JSON body, with a readable failure when it is not JSON. */
export function json(res: RawResponse): any {
  try {
    return JSON.parse(res.body);
  } catch {
    throw new Error(`expected a JSON body, got ${res.status}: ${res.body.slice(0, 200)}`);
  }
}
