package payments

import _ "embed"

// OpenAPI is the service's spec (openapi.yaml), embedded: the service validates requests
// against it (idemvalidate) before the idempotency protocol runs.
//
//go:embed openapi.yaml
var OpenAPI []byte
