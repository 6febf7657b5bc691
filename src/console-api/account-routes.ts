/**
 * The account resource of the management API: show an account (status, wallet, currency), change
 * its rates, price multiplier or billing, disable and enable it, credit its wallet. Every change is
 * an operator's (`requireAllAccounts`): an account's owner must not fund its own wallet.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ConsoleService } from '../console/service.ts';
import { accountJson, creditJson } from '../console/views.ts';
import { requireAccount, requireAllAccounts } from './auth.ts';
import * as S from './schemas.ts';
import { UNFINISHED_HEADER } from '../console/best-effort.ts';
import { changeErrors, errors, ratesOf, SECURITY, type BookingLimit } from './route-common.ts';

/**
 * An account with whether it has a wallet at all (never credited: none), the deployment's currency
 * and how its live sidecars read a model name without a provider.
 */
async function accountView(mc: ConsoleService, currency: string, account: string): Promise<z.infer<typeof S.Account>> {
  const a = accountJson(await mc.accountInfo(account));
  // A wallet exists once credited: crediting is the one write that makes the wallet's balance.
  const m = await mc.accountPriceMultiplier(account); // section 16: shown when set
  return { ...a, wallet: { ...a.wallet, exists: a.wallet.rule === 'credited' }, currency, ...(m !== '1' ? { price_multiplier: m } : {}) };
}

/** `currency`: the deployment's currency code, shown with every balance; `booking`: the crediting's rate limit. */
export function registerAccountRoutes(app: FastifyInstance, mc: ConsoleService, booking: BookingLimit, currency: string): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.get(
    '/v1/accounts/:account',
    { schema: { tags: ['accounts'], operationId: 'getAccount', summary: "Show an account: status and wallet", security: SECURITY, params: S.AccountParams, response: { 200: S.Account, ...errors(400, 404) } } },
    async (req) => {
      requireAccount(req, req.params.account, `no account with id ${req.params.account}`);
      return accountView(mc, currency, req.params.account);
    },
  );

  r.patch(
    '/v1/accounts/:account',
    {
      schema: {
        tags: ['accounts'],
        operationId: 'updateAccount',
        summary: "Set or remove the account's request and token rates, set its price multiplier or its billing (operator)",
        security: SECURITY,
        params: S.AccountParams,
        body: S.UpdateAccountBody,
        response: { 200: S.Account, ...changeErrors(400, 403) },
      },
    },
    async (req) => {
      const p = requireAllAccounts(req, "change an account's rates, price multiplier or billing");
      // The multiplier first: it is the one change checked only when written (the others by the schema), so a bad one changes nothing.
      if (req.body.price_multiplier !== undefined) await mc.setAccountPriceMultiplier(req.params.account, String(req.body.price_multiplier), p.actor);
      if (req.body.rate !== undefined || req.body.token_rate !== undefined) await mc.setAccountRates(req.params.account, ratesOf(req.body), p.actor);
      if (req.body.billing !== undefined) await mc.setAccountBilling(req.params.account, req.body.billing, p.actor);
      return accountView(mc, currency, req.params.account);
    },
  );

  for (const verb of ['disable', 'enable'] as const) {
    r.post(
      `/v1/accounts/:account/${verb}`,
      {
        schema: {
          tags: ['accounts'],
          operationId: `${verb}Account`,
          summary: verb === 'disable' ? "Refuse every key of the account (operator)" : "Accept the account's keys again (operator)",
          security: SECURITY,
          params: S.AccountParams,
          response: { 200: S.Account, ...changeErrors(400, 403) },
        },
      },
      async (req, reply) => {
        const p = requireAllAccounts(req, `${verb} an account`);
        const set = await mc.setAccountStatus(req.params.account, verb === 'disable' ? 'disabled' : 'active', p.actor);
        if (set.unfinished) reply.header(UNFINISHED_HEADER, set.unfinished.join(', '));
        return accountView(mc, currency, req.params.account);
      },
    );
  }

  r.post(
    '/v1/accounts/:account/credits',
    {
      schema: {
        tags: ['accounts'],
        operationId: 'creditAccount',
        summary: "Add to the account's prepaid wallet (operator; idempotent on reference: a repeat answers credited: false)",
        security: SECURITY,
        params: S.AccountParams,
        body: S.CreditBody,
        response: { 200: S.Credited, ...changeErrors(400, 403, 413, 422) },
      },
      config: booking,
      // Scope before the body: an account-scoped token learns nothing about what it sent.
      preValidation: async (req) => void requireAllAccounts(req, 'crediting a wallet'),
    },
    async (req) => {
      const p = requireAllAccounts(req, 'crediting a wallet');
      return creditJson(await mc.creditAccount(req.params.account, req.body.amount_micros, req.body.reference, p.actor));
    },
  );
}
