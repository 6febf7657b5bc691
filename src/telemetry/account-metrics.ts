/**
 * Per-account metrics, opt-in (`KEYGATE_METRICS_ACCOUNT_LABELS=true`): decisions by account,
 * result and code, and booked spend and tokens by account. `account` is the only label that grows
 * with the data, so it is bounded: the first `maxAccounts` accounts seen get a series of their own,
 * later ones are summed under `account="_other"` (until the process restarts); decisions made
 * before a key was known (no key, malformed or unknown keys) are counted under `account="_none"`.
 * Never a key, nor a key id.
 *
 * Installed only when opted in: its observers are not on the decision path otherwise. When on, a
 * decision costs one Map lookup and one typed-array increment; samples are built at scrape time.
 */
import { Counter, type Registry } from 'prom-client';
import type { CheckOutcome, DecisionObserver } from '../authorizer.ts';
import type { MeteredObserver } from './metered.ts';
import { codeIndex, CODES, ALLOW_CODE } from './metrics.ts';

/** Label of accounts past the cap. */
export const OTHER_ACCOUNT = '_other';
/** Label of decisions made before an account was known. */
export const NO_ACCOUNT = '_none';

class AccountRow {
  readonly decisions = new Float64Array(CODES.length);
  spendMicros = 0;
  inputTokens = 0;
  outputTokens = 0;
}

export class AccountMetrics {
  readonly #max: number;
  readonly #rows = new Map<string, AccountRow>();
  readonly #other = new AccountRow();
  readonly #none = new AccountRow();

  readonly decisionObserver: DecisionObserver;
  readonly meteredObserver: MeteredObserver;

  constructor(registry: Registry, maxAccounts: number) {
    this.#max = maxAccounts;
    const registers = [registry];
    const each = (fn: (account: string, row: AccountRow) => void) => {
      for (const [a, r] of this.#rows) fn(a, r);
      fn(OTHER_ACCOUNT, this.#other);
    };
    const none = this.#none;
    new Counter({
      name: 'keygate_account_decisions_total',
      help: `Decisions by account (the first ${maxAccounts} accounts seen; later ones as "${OTHER_ACCOUNT}", before a key was known "${NO_ACCOUNT}"), result and code.`,
      labelNames: ['account', 'result', 'code'] as const,
      registers,
      collect() {
        this.reset();
        const emit = (account: string, row: AccountRow) => {
          for (let c = 0; c < CODES.length; c++) {
            const n = row.decisions[c]!;
            // Every account's allows appear, and "_other" with every code from the start (a baseline for rate()).
            if (n > 0 || c === 0 || account === OTHER_ACCOUNT) this.inc({ account, result: c === 0 ? 'allow' : 'deny', code: CODES[c] ?? ALLOW_CODE }, n);
          }
        };
        each(emit);
        emit(NO_ACCOUNT, none);
      },
    });
    new Counter({
      name: 'keygate_account_spend_micro_units_total',
      help: 'Micro-units booked by metering, by account (bounded as keygate_account_decisions_total).',
      labelNames: ['account'] as const,
      registers,
      collect() {
        this.reset();
        each((account, row) => this.inc({ account }, row.spendMicros));
      },
    });
    new Counter({
      name: 'keygate_account_tokens_total',
      help: 'Tokens booked by metering, by account and direction (input|output).',
      labelNames: ['account', 'direction'] as const,
      registers,
      collect() {
        this.reset();
        each((account, row) => {
          this.inc({ account, direction: 'input' }, row.inputTokens);
          this.inc({ account, direction: 'output' }, row.outputTokens);
        });
      },
    });

    this.decisionObserver = (outcome: CheckOutcome) => {
      const a = outcome.accountId;
      const row = a === undefined ? this.#none : this.#row(a);
      const c = codeIndex(outcome.decision);
      row.decisions[c] = row.decisions[c]! + 1;
    };
    this.meteredObserver = (m) => {
      const row = this.#row(m.accountId);
      if (m.costMicros > 0) row.spendMicros += m.costMicros;
      if (m.inputTokens > 0) row.inputTokens += m.inputTokens;
      if (m.outputTokens > 0) row.outputTokens += m.outputTokens;
    };
  }

  /** Accounts with a series of their own. */
  get accounts(): number {
    return this.#rows.size;
  }

  #row(account: string): AccountRow {
    let row = this.#rows.get(account);
    if (row !== undefined) return row;
    if (this.#rows.size >= this.#max) return this.#other;
    row = new AccountRow();
    this.#rows.set(account, row);
    return row;
  }
}
