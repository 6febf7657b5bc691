/**
 * A stub LLM upstream for end-to-end tests: records every request that reaches it and answers in
 * the OpenAI, Anthropic and Google response shapes (the same stub `keygate dev` runs).
 */
import { listenStubUpstream, type UpstreamRequest } from '../../src/dev/stub-upstream.ts';

export { UPSTREAM_TEXT, type UpstreamRequest } from '../../src/dev/stub-upstream.ts';

export interface StubUpstream {
  readonly port: number;
  readonly requests: UpstreamRequest[];
  close(): Promise<void>;
}

export async function startStubUpstream(): Promise<StubUpstream> {
  const requests: UpstreamRequest[] = [];
  const { server, port } = await listenStubUpstream(0, '127.0.0.1', (r) => requests.push(r));
  return {
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
