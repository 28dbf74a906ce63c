package idem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/pgtest"
)

// badPolicies break one rule each; want is what the error must say (field and rule).
var badPolicies = []struct {
	name string
	p    Policy
	want string
}{
	{"retention under 1ms", Policy{Retention: 500 * time.Nanosecond}, "Retention: 500ns is shorter than the 1ms minimum"},
	{"retention 1µs", Policy{Retention: time.Microsecond}, "Retention: 1µs is shorter than the 1ms minimum"},
	{"lease under 1ms", Policy{Lease: 999 * time.Microsecond, Retention: time.Hour}, "Lease: 999µs is shorter than the 1ms minimum"},
	{"timeout under 1ms", Policy{Timeout: time.Nanosecond}, "Timeout: 1ns is shorter than the 1ms minimum"},
	{"negative lease", Policy{Lease: -time.Second}, "Lease: -1s is negative"},
	{"negative retention", Policy{Retention: -time.Hour}, "Retention: -1h0m0s is negative"},
	{"negative timeout", Policy{Timeout: -time.Second}, "Timeout: -1s is negative (0 means no bound)"},
	{"retention under the lease", Policy{Lease: time.Minute, Retention: time.Second}, "Retention: 1s is shorter than the lease (1m0s)"},
	{"default retention under the lease", Policy{Lease: 48 * time.Hour}, "Retention: 24h0m0s is shorter than the lease (48h0m0s)"},
	{"retention under the default lease", Policy{Retention: time.Second}, "Retention: 1s is shorter than the lease (30s)"},
	{"unknown isolation", Policy{Isolation: "snapshot"}, `Isolation: "snapshot" is not an isolation level`},
}

func TestNewPolicy(t *testing.T) {
	for _, tt := range badPolicies {
		tt.p.Operation = "createThing"
		got, err := NewPolicy(tt.p)
		if got != nil || !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), `"createThing": `+tt.want) {
			t.Errorf("%s: NewPolicy = %v, %v; want an ErrInvalidPolicy saying %q", tt.name, got, err, tt.want)
		}
		func() {
			defer func() {
				if v, ok := recover().(error); !ok || !errors.Is(v, ErrInvalidPolicy) {
					t.Errorf("%s: MustPolicy panicked with %v; want its ErrInvalidPolicy", tt.name, v)
				}
			}()
			MustPolicy(tt.p)
		}()
	}
	// Several broken rules are all reported.
	_, err := NewPolicy(Policy{Lease: -1, Timeout: time.Microsecond, Isolation: "x"})
	for _, field := range []string{"Lease:", "Timeout:", "Isolation:"} {
		if !strings.Contains(fmt.Sprint(err), field) {
			t.Errorf("three broken rules: %v; want %s named", err, field)
		}
	}
	for _, good := range []Policy{
		{}, // every default
		{Lease: time.Millisecond, Retention: time.Millisecond, Timeout: time.Millisecond},
		{Lease: 24 * time.Hour},       // retention (default) = lease
		{Retention: 30 * time.Second}, // = the default lease
		{Lease: time.Second, Isolation: pgx.Serializable},
		{Isolation: pgx.ReadUncommitted, Timeout: 10 * time.Second},
	} {
		got, err := NewPolicy(good)
		if err != nil || got == nil || *got != good {
			t.Errorf("NewPolicy(%+v) = %+v, %v; want it back", good, got, err)
		}
	}
	p := MustPolicy(Policy{Operation: "createThing"})
	if n := testing.AllocsPerRun(100, func() { _ = p.check() }); n != 0 {
		t.Errorf("checking a valid policy allocates %v times per call, want 0", n)
	}
}

// Store.Do refuses a policy that breaks a rule before any SQL, keyed or not: the store's
// pool is closed, so any statement would fail with another error. The business never runs.
func TestDoRefusesInvalidPolicyBeforeSQL(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	s := NewStore(pool)
	var runs atomic.Int64
	fn := func(ctx context.Context, tx Tx) (*Response, error) { runs.Add(1); return nil, errBusiness }
	for _, tt := range badPolicies {
		for _, key := range []*string{ptr("k"), nil} {
			p := tt.p
			r, err := s.Do(context.Background(), &p, key, parts("x"), fn)
			if r != nil || !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s (key %v): Do = %+v, %v; want an ErrInvalidPolicy saying %q", tt.name, key != nil, r, err, tt.want)
			}
		}
	}
	if _, err := s.Do(context.Background(), nil, ptr("k"), parts("x"), fn); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("nil policy: %v; want ErrInvalidPolicy", err)
	}
	if runs.Load() != 0 {
		t.Fatalf("the business ran %d times under invalid policies", runs.Load())
	}
}

// The case the hardening issue found: Retention 500ns was truncated to 0µs in SQL, and the
// same key and body ran the business three times in three calls. Now each call is refused.
func TestSubMillisecondRetentionRunsNothing(t *testing.T) {
	e := newEnv(t)
	p := policy("createThing")
	p.Retention = 500 * time.Nanosecond
	for i := range 3 {
		if r, err := e.store.Do(context.Background(), p, ptr("k"), parts("x"), insertOne("x")); !errors.Is(err, ErrInvalidPolicy) {
			t.Fatalf("call %d: %+v, %v; want ErrInvalidPolicy", i, r, err)
		}
	}
	if e.rows("") != 0 || e.keyRows() != 0 {
		t.Fatalf("%d business rows, %d keys; want 0, 0", e.rows(""), e.keyRows())
	}
}

// Options with a value refuse a bad one when they are built, with a panic naming the
// option (they have no error to return): never a silent default.
func TestOptionsRefuseBadValues(t *testing.T) {
	for name, build := range map[string]func(){
		"WithMaxRetries(-1)":       func() { WithMaxRetries(-1) },
		"WithMaxResponseBytes(0)":  func() { WithMaxResponseBytes(0) },
		"WithMaxResponseBytes(-5)": func() { WithMaxResponseBytes(-5) },
	} {
		func() {
			defer func() {
				if v := recover(); !strings.Contains(fmt.Sprint(v), strings.SplitN(name, "(", 2)[0]) {
					t.Errorf("%s: panic %v; want one naming the option", name, v)
				}
			}()
			build()
		}()
	}
	WithMaxRetries(0)       // disables retries: valid
	WithMaxResponseBytes(1) // valid
}
