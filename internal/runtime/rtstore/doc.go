// Package rtstore declares the storage seam of the runtime: the Store
// interface, the row and parameter types passing through it and the errors
// every implementation returns. It is a leaf: it imports only journal, so
// store implementations do not depend on model providers. It must not
// import runtime, a store implementation, a driver or net/http.
package rtstore
