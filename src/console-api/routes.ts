/**
 * The `/v1` resources of the management API, one route module each. Every handler runs one
 * operation of the management console library (the CLI's too) after the scope checks of `auth.ts`,
 * and answers in the JSON forms the CLI's `--json` prints (`src/console/views.ts`). Crediting a
 * wallet and recording usage are operator operations (`requireAllAccounts`): an account's owner must
 * not fund its own wallet.
 */
import type { FastifyInstance } from 'fastify';
import type { ConsoleService } from '../console/service.ts';
import { registerAccountRoutes } from './account-routes.ts';
import { registerAuditRoutes } from './audit-routes.ts';
import { registerKeyRoutes } from './key-routes.ts';
import { bookingLimit } from './route-common.ts';
import { registerTokenRoutes } from './token-routes.ts';
import { registerUsageLogRoutes } from './usage-log-routes.ts';

/** `currency`: the deployment's currency code, shown with every balance. */
export function registerRoutes(app: FastifyInstance, mc: ConsoleService, bookingPerMinute: number, currency = 'USD'): void {
  /** Book-keeping writes: a bucket per token of their own, apart from the token's other requests. */
  const booking = bookingLimit(bookingPerMinute);
  registerKeyRoutes(app, mc);
  registerAccountRoutes(app, mc, booking, currency);
  registerUsageLogRoutes(app, mc, booking);
  registerAuditRoutes(app, mc);
  registerTokenRoutes(app, mc);
}
