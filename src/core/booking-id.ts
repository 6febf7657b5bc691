/**
 * keygate's booking ids (SPEC 15, "The booking id is keygate's"): the id a metered response is
 * booked under, minted by the Check's allow and carried to metering in the ext_authz dynamic
 * metadata (`booking_id`; the HTTP variant's header `x-keygate-booking-id`). A client header never
 * decides it: Envoy's `x-request-id` is only a label in the usage log.
 *
 * Forms (each matches the usage-record id pattern, `BOOK_ID_PATTERN`):
 * - `kb:` + 32 lower-case hex digits: 128 bits from the CSPRNG, minted per allowed request;
 * - `m:` + a random UUID: minted by metering for a stream that came without one (a deployment
 *   that does not forward the ext_authz metadata), counted as `missing-booking-id`;
 * - `r:` + 64 hex digits: an OpenAI background or stored response's usage, a function of its id
 *   (`responseBookingId`), so that it is booked once whichever request and sidecar carried it.
 */
export const BOOKING_ID_PREFIX = 'kb:';
/** The hex digits after the prefix (128 bits). */
export const BOOKING_ID_HEX = 32;
/** A booking id minted by the Check. */
export const BOOKING_ID_PATTERN = /^kb:[0-9a-f]{32}$/;
/** The dynamic metadata field of the ext_authz namespace that carries it (gRPC Check). */
export const BOOKING_ID_FIELD = 'booking_id';
/** The HTTP authz allow's header that carries it (Envoy `dynamic_metadata_from_headers` puts it in the namespace under this name). */
export const BOOKING_ID_HEADER = 'x-keygate-booking-id';
