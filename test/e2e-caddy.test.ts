/** The SDK suite through the real `caddy` binary running deploy/caddy/Caddyfile (forward_auth → keygate HTTP authz). */
import { sdkSuite } from './helpers/sdk-suite.ts';
import { startCaddy } from './helpers/proxies.ts';

sdkSuite({
  name: 'Caddy forward_auth',
  sendsBody: false,
  start: ({ httpPort, upstreamPort }) => startCaddy({ authzPort: httpPort, upstreamPort }),
});
