/** The SDK suite through the real `nginx` binary running deploy/nginx/keygate.conf (auth_request → keygate HTTP authz). */
import { sdkSuite } from './helpers/sdk-suite.ts';
import { startNginx } from './helpers/proxies.ts';

sdkSuite({
  name: 'nginx auth_request',
  sendsBody: false,
  start: ({ httpPort, upstreamPort }) => startNginx({ authzPort: httpPort, upstreamPort }),
});
