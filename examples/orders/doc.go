// Package orders is the smallest service built with idemgen, the one the README's five
// steps build: a spec with one marked operation (openapi.yaml), the generated handlers
// (package api), and, in example_test.go and orders_test.go, the business, the wiring
// (a pool and a scope function: no Redis, no metrics) and its idemtest test.
package orders

//go:generate go tool idemgen generate -package api -o api openapi.yaml
