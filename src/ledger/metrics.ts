/** The ledger's Prometheus metrics (docs/ledger.md, "Metrics"), on the registry of the process that runs the sink. */
import { Counter, Gauge, type Registry } from 'prom-client';

export class LedgerMetrics {
  readonly rows: Counter<'result'>;
  readonly retries: Counter<'stage'>;
  readonly lag: Gauge;
  readonly dropped: Gauge;
  readonly rejected: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    this.rows = new Counter({ name: 'keygate_ledger_rows_total', help: 'Usage-log entries the ledger sink committed to PostgreSQL: written (a new row) or duplicate (the booking was already there)', labelNames: ['result'], registers });
    this.retries = new Counter({ name: 'keygate_ledger_retries_total', help: 'Ledger sink operations retried after a failure, by stage (postgres, redis)', labelNames: ['stage'], registers });
    this.lag = new Gauge({ name: 'keygate_ledger_lag_seconds', help: 'Age of the oldest usage-log entry the ledger has not acknowledged (0 when none)', registers });
    this.dropped = new Gauge({ name: 'keygate_usage_log_dropped_unacknowledged', help: 'Usage-log entries the Redis cap (KEYGATE_USAGE_LOG_MAX) dropped before the ledger acknowledged them, over every account (read from Redis)', registers });
    this.rejected = new Counter({ name: 'keygate_ledger_rejected_entries_total', help: 'Usage-log entries that could not be a row (malformed) and were acknowledged without one', registers });
  }
}
