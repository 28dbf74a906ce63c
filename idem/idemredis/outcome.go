package idemredis

import (
	"errors"

	"github.com/idemgen/idemgen/idem"
)

// Outcomes of the Redis store besides idem's own (an [idem.Observer] sees them, and
// [idem.Response.Outcome] holds the final one). idem's outcomes keep their meaning, with
// one difference: nothing is rolled back here, since the business is not atomic with the
// key.
const (
	// OutcomeUnavailable: Redis could not be reached or refused the claim (down, timed
	// out, out of memory): answered 503 with Retry-After, the business not run.
	OutcomeUnavailable idem.Outcome = "unavailable"
	// OutcomeCompletionLost: the business ran and its response is the answer, but it
	// was not recorded: the lease ran out during the business and a newer request holds
	// the key (the fenced completion, [ErrFenced]), or Redis failed the completion. A
	// retry runs the business again: the desync the Redis store accepts.
	OutcomeCompletionLost idem.Outcome = "completion_lost"
	// OutcomeFenced, an event: the completion was refused because a newer request holds
	// the key (followed by OutcomeCompletionLost).
	OutcomeFenced idem.Outcome = "fenced"
	// OutcomeLateCompletion, an event: the lease ran out during the business but no one
	// claimed the key since, so the completion was recorded all the same (followed by
	// idem.OutcomeCompleted).
	OutcomeLateCompletion idem.Outcome = "late_completion"
)

// ErrFenced is the error the store logs, and the idem.complete span carries, when a
// completion is refused because the lease ran out during the business and a newer
// request claimed the key: the newer owner's claim is never overwritten.
var ErrFenced = errors.New("idemredis: the lease ran out during the business and a newer request holds the key: completion refused")

// ErrUnavailable is wrapped by the error the idem.claim span carries when Redis could not
// be reached or refused the claim (answered 503).
var ErrUnavailable = errors.New("idemredis: Redis unavailable")
