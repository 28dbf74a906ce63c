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

// Statement of ClaimKey.
func (a ClaimKeyParams) Statement() Statement {
	return Statement{claimKey, []any{a.Scope, a.Key, a.Operation, a.Fingerprint, a.LeaseToken, a.LeaseUs, a.RetentionUs}}
}

// Statement of TakeOverExpired.
func (a TakeOverExpiredParams) Statement() Statement {
	return Statement{takeOverExpired, []any{a.Operation, a.Fingerprint, a.LeaseToken, a.LeaseUs, a.RetentionUs, a.Scope, a.Key}}
}

// Statement of ReclaimKey.
func (a ReclaimKeyParams) Statement() Statement {
	return Statement{reclaimKey, []any{a.LeaseToken, a.LeaseUs, a.Scope, a.Key, a.Operation, a.Fingerprint}}
}

// Statement of LockOwnKey.
func (a LockOwnKeyParams) Statement() Statement {
	return Statement{lockOwnKey, []any{a.Scope, a.Key, a.LeaseToken}}
}

// Statement of LockOwnKeyAt.
func (a LockOwnKeyAtParams) Statement() Statement {
	return Statement{lockOwnKeyAt, []any{a.RowID, a.Scope, a.Key, a.LeaseToken}}
}

// Statement of GetKey.
func (a GetKeyParams) Statement() Statement {
	return Statement{getKey, []any{a.Scope, a.Key}}
}

// Statement of CompleteKey.
func (a CompleteKeyParams) Statement() Statement {
	return Statement{completeKey, []any{a.ResponseStatus, a.ResponseHeaders, a.ResponseBody, a.RetentionUs, a.Scope, a.Key, a.LeaseToken}}
}

// Statement of CompleteKeyAt.
func (a CompleteKeyAtParams) Statement() Statement {
	return Statement{completeKeyAt, []any{a.ResponseStatus, a.ResponseHeaders, a.ResponseBody, a.RetentionUs, a.RowID, a.Scope, a.Key, a.LeaseToken}}
}
