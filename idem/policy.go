package idem

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// MinPolicyDuration is the shortest Lease, Retention or Timeout a [Policy] may set, the
// same minimum the x-idempotent marker has: the table keeps durations in microseconds, and
// a shorter one is a mistake (a lease of 1ns would be stored as 0).
const MinPolicyDuration = time.Millisecond

// ErrInvalidPolicy is wrapped by the errors of [NewPolicy] and by the error [Store.Do]
// returns, before any SQL, for a policy that breaks one of the rules of [Policy].
var ErrInvalidPolicy = errors.New("idem: invalid policy")

// NewPolicy checks p and returns a copy of it. The rules (those of the x-idempotent
// marker): Lease, Retention and Timeout are zero (the documented default) or at least
// [MinPolicyDuration], never negative; the retention (after defaults) is at least the
// lease (after defaults), so a completed answer is replayable for at least as long as a
// claim can block retries; Isolation is "" or one of pgx's four levels. The error wraps
// [ErrInvalidPolicy] and names each field that breaks a rule, and the rule (several
// joined with errors.Join).
func NewPolicy(p Policy) (*Policy, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	return &p, nil
}

// MustPolicy is [NewPolicy] that panics with its error: for package-level policy
// variables (the generated code's), so a bad policy fails the program at init, not a
// request.
func MustPolicy(p Policy) *Policy {
	q, err := NewPolicy(p)
	if err != nil {
		panic(err)
	}
	return q
}

// check returns nil for a policy that keeps the rules of [NewPolicy], else an error
// wrapping ErrInvalidPolicy per broken rule. It allocates nothing for a valid policy.
func (p *Policy) check() error {
	if p == nil {
		return fmt.Errorf("%w: nil *Policy", ErrInvalidPolicy)
	}
	var errs []error
	if err := p.checkDuration("Lease", p.Lease, DefaultLease); err != nil {
		errs = append(errs, err)
	}
	if err := p.checkDuration("Retention", p.Retention, DefaultRetention); err != nil {
		errs = append(errs, err)
	}
	if err := p.checkDuration("Timeout", p.Timeout, 0); err != nil {
		errs = append(errs, err)
	}
	if err := p.checkDuration("Wait", p.Wait, 0); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && p.retention() < p.lease() {
		errs = append(errs, p.invalid("Retention", "%s is shorter than the lease (%s): a completed answer must be replayable for at least as long as a claim can block retries",
			p.retention(), p.lease()))
	}
	if k := p.KeySchema; k != nil {
		if k.MinLength < 0 || k.MaxLength < 0 || (k.MaxLength > 0 && k.MinLength > k.MaxLength) {
			errs = append(errs, p.invalid("KeySchema", "MinLength %d and MaxLength %d: want 0 ≤ MinLength ≤ MaxLength (0: no bound)", k.MinLength, k.MaxLength))
		}
		if err := k.compile(); err != nil {
			errs = append(errs, p.invalid("KeySchema", "Pattern %q does not compile: %v", k.Pattern, err))
		}
	}
	switch p.Isolation {
	case "", pgx.Serializable, pgx.RepeatableRead, pgx.ReadCommitted, pgx.ReadUncommitted:
	default:
		errs = append(errs, p.invalid("Isolation", "%q is not an isolation level (want \"\" for the database's default, or pgx.Serializable, pgx.RepeatableRead, pgx.ReadCommitted, pgx.ReadUncommitted)", string(p.Isolation)))
	}
	return errors.Join(errs...)
}

// checkDuration applies the duration rule to one field whose zero means def (0: no bound).
func (p *Policy) checkDuration(field string, d, def time.Duration) error {
	if d >= MinPolicyDuration || d == 0 {
		return nil
	}
	zero := "no bound"
	if def > 0 {
		zero = "the default, " + def.String()
	}
	if d < 0 {
		return p.invalid(field, "%s is negative (0 means %s)", d, zero)
	}
	return p.invalid(field, "%s is shorter than the %s minimum (0 means %s)", d, MinPolicyDuration, zero)
}

// invalid formats one broken rule: `idem: invalid policy "createThing": Lease: ...`.
func (p *Policy) invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w %q: %s: %s", ErrInvalidPolicy, p.Operation, field, fmt.Sprintf(format, args...))
}

// mustNotBeNegative panics for a negative count given to an option (a programming error,
// like a negative count to strings.Repeat): an option has no error to return, and a
// silent default would hide the mistake.
func mustBePositive(option string, d time.Duration) {
	if d <= 0 {
		panic(fmt.Sprintf("idem.%s(%s): want a positive duration", option, d))
	}
}

func mustNotBeNegative(option string, n int64, zeroMeans string) {
	if n < 0 {
		panic(fmt.Sprintf("idem.%s(%d): negative (0 means %s)", option, n, zeroMeans))
	}
}
