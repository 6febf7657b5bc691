/**
 * Owned provider objects (the endpoint catalog's `owned` class): a provider object — an OpenAI
 * background or stored response, say — that keygate saw an account create through a metered
 * request, recorded so that later requests addressing it by id are open to that account only.
 *
 * One Redis hash per object, `<ns>:v1:owned:<provider>:<object id>`, fields below, expiring
 * `OWNED_TTL_SECONDS` after it was written (the providers keep such objects 30 days; keygate keeps
 * the record a little longer). The prefix is tracked, so a sidecar's cached "not owned" answer is
 * dropped when the record is written. Written by metering (the response that created the object),
 * read by the Check; `booked` is set once the object's usage has been booked (a background response
 * is booked once, at its first terminal state, whichever request carried it).
 */
export const OwnedField = {
  account: 'account',
  /** Epoch ms when keygate first saw the object. */
  createdAt: 'created_at',
  /** The key whose request created it. */
  keyId: 'key_id',
  /** Set (to the booking id) once the object's usage was booked. */
  booked: 'booked',
} as const;

/** 35 days: at least the 30 the providers keep background and stored responses. */
export const OWNED_TTL_SECONDS = 35 * 24 * 3600;

/** Provider object ids as keygate accepts them in a key name: 1-256 of a conservative alphabet. */
export const OWNED_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,256}$/;
