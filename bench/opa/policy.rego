# The keygate decision as an OPA-Envoy policy, for the side-by-side benchmark (bench/run.ts with
# OPA_ENVOY_BIN): the key from `Authorization: Bearer` or `x-api-key`, its record by SHA-256 digest
# (data.keygate.keys, the shape of bench/opa/data.example.json), active and not expired, its account
# not disabled, and for a model-restricted key the body's `model` among the allowed ones. An allow
# carries the account and key id headers, as keygate's does. The key format check (prefix, length,
# checksum) has no Rego builtin for its checksum, so a malformed key is refused by the lookup.
package keygate.authz

import rego.v1

http := input.attributes.request.http

key := substring(http.headers.authorization, 7, -1) if startswith(http.headers.authorization, "Bearer ")

key := http.headers["x-api-key"] if not http.headers.authorization

record := data.keygate.keys[crypto.sha256(key)]

expired if {
	record.expires_at != null
	time.now_ns() >= record.expires_at * 1000000
}

model_ok if record.models == null

model_ok if {
	record.models != null
	some m in record.models
	m == input.parsed_body.model
}

model_ok if {
	record.models != null
	some m in record.models
	m == concat("/", ["openai", input.parsed_body.model])
}

allowed if {
	record.status == "active"
	not expired
	not data.keygate.disabled_accounts[record.account]
	model_ok
}

default result := {"allowed": false, "http_status": 401}

result := {
	"allowed": true,
	"headers": {"x-keygate-account-id": record.account, "x-keygate-key-id": record.id},
} if allowed
