package idem

import "context"

// The exports below serve stores that run the protocol's rules outside PostgreSQL
// (idem/idemredis): the parts of a request's handling that live in this package's
// unexported code, so that every store behaves alike.

// ContextWithKey returns ctx carrying k, so that [KeyFromContext] in the business code
// a store runs returns it.
func ContextWithKey(ctx context.Context, k KeyInfo) context.Context {
	return context.WithValue(ctx, ctxKey{}, k)
}

// BufferBodies reads the streamed bodies among parts ([BufferMultipart], [BufferReader])
// into memory, at most limit bytes in all, so that they can be fingerprinted
// ([Fingerprint]) and read again by the business code. A body over limit is an error
// wrapping [ErrBodyTooLarge] (a 413); one that cannot be read is another error (a 400).
// Parts of other kinds are left alone.
func BufferBodies(parts []Part, limit int64) error {
	for _, part := range parts {
		if b, ok := part.Value.(bufferer); ok {
			if err := b.buffer(limit); err != nil {
				return err
			}
		}
	}
	return nil
}
