package idemdb

// This file is written by hand (sqlc leaves it alone): the protocol sends some of the
// generated queries in pipelined flights (idem/flight.go) rather than through the
// generated methods, and takes their SQL and arguments from here. statement_test.go checks
// that each Statement matches what the generated method sends.

// Statement is one generated query with its arguments, in the generated method's order.
type Statement struct {
	SQL  string
	Args []any
}

// Statement of LockKey.
func (a LockKeyParams) Statement() Statement {
	return Statement{lockKey, []any{a.LockHi, a.LockLo, a.Scope, a.Key}}
}

// Statement of AwaitKey.
func (a AwaitKeyParams) Statement() Statement {
	return Statement{awaitKey, []any{a.LockHi, a.LockLo, a.Scope, a.Key}}
}

// Statement of GetKey.
func (a GetKeyParams) Statement() Statement {
	return Statement{getKey, []any{a.Scope, a.Key}}
}

// Statement of ClaimKeyRow.
func (a ClaimKeyRowParams) Statement() Statement {
	return Statement{claimKeyRow, []any{a.Scope, a.Key, a.Operation, a.Fingerprint, a.RetentionUs}}
}

// Statement of CompleteKey.
func (a CompleteKeyParams) Statement() Statement {
	return Statement{completeKey, []any{a.Scope, a.Key, a.Operation, a.Fingerprint, a.ResponseStatus, a.ResponseHeaders, a.ResponseBody, a.RetentionUs}}
}

// Statement of CompleteKeyOver.
func (a CompleteKeyOverParams) Statement() Statement {
	return Statement{completeKeyOver, []any{a.Scope, a.Key, a.Operation, a.Fingerprint, a.ResponseStatus, a.ResponseHeaders, a.ResponseBody, a.RetentionUs}}
}

// Statement of LockKeyOnly.
func (a LockKeyOnlyParams) Statement() Statement {
	return Statement{lockKeyOnly, []any{a.LockHi, a.LockLo}}
}
