package api

import _ "embed" // the contract file

// OpenAPI is api/openapi.yaml byte for byte. Never modify it.
//
//go:embed openapi.yaml
var OpenAPI []byte
