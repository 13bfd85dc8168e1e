// Package api holds the code oapi-codegen generates from api/openapi.yaml:
// models, the chi server, the strict-server interface and the embedded
// spec. Nothing in it is hand-written; it imports nothing of hxd's.
package api

//go:generate go tool oapi-codegen -config cfg.yaml ../../../api/openapi.yaml
