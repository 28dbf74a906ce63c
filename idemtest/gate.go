package idemtest

import (
	"context"
	"errors"
	"sync"
)

// ErrInjected is the error Gate.Pass returns for a business failure CheckOperation injects.
var ErrInjected = errors.New("idemtest: injected business failure")

// Gate is a test's hook inside an operation's business function: the business calls Pass
// where it would call a downstream service (a payment provider), and returns its error.
// Pass counts the business's runs, and lets CheckOperation hold a run in flight (to see
// its duplicates answered 409) or fail one (to see the key released). A Gate is safe for
// concurrent use; its zero value is not: use NewGate.
//
//	func (s gated) CreateOrder(ctx context.Context, tx idem.Tx, req api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
//		if err := s.gate.Pass(ctx); err != nil {
//			return nil, err
//		}
//		return s.Orders.CreateOrder(ctx, tx, req)
//	}
type Gate struct {
	mu      sync.Mutex
	runs    int
	fail    bool
	held    chan struct{} // not nil while holding: closed by release
	entered chan struct{} // gets a value for each run that reaches the held gate
}

// NewGate returns an open gate.
func NewGate() *Gate { return &Gate{} }

// Pass counts one run of the business. It returns ErrInjected when a failure was
// injected for this run; while the gate holds, it blocks until the gate is released
// (nil) or ctx ends (ctx's error).
func (g *Gate) Pass(ctx context.Context) error {
	g.mu.Lock()
	g.runs++
	if g.fail {
		g.fail = false
		g.mu.Unlock()
		return ErrInjected
	}
	held := g.held
	if held != nil {
		select {
		case g.entered <- struct{}{}:
		default: // more runs than the checks wait for: they fail on the first two
		}
	}
	g.mu.Unlock()
	if held == nil {
		return nil
	}
	select {
	case <-held:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Runs returns how many times Pass was called.
func (g *Gate) Runs() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs
}

// hold makes the next runs block in Pass until release is called. entered gets a value
// for each of them (up to 64) as it enters Pass.
func (g *Gate) hold() (entered <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	held, in := make(chan struct{}), make(chan struct{}, 64)
	g.held, g.entered = held, in
	var once sync.Once
	return in, func() {
		once.Do(func() {
			g.mu.Lock()
			g.held, g.entered = nil, nil
			g.mu.Unlock()
			close(held)
		})
	}
}

// failNext makes the next run's Pass return ErrInjected.
func (g *Gate) failNext() {
	g.mu.Lock()
	g.fail = true
	g.mu.Unlock()
}
