// Package hammer is a load-and-correctness tool for any idempotent HTTP endpoint, exposed
// as `idemgen hammer` ([Main]) and reusable from Go ([Run]).
//
// It sends Requests requests spread over Keys distinct idempotency keys: key i (0-based)
// gets Requests/Keys duplicates, and the first Requests%Keys keys one more. Each key's
// duplicates are sent at the same instant, and every response is checked:
//
//   - an execution is a 2xx response without "Idempotent-Replayed: true". More than one
//     execution for a key is a DUPLICATE EXECUTION: the endpoint is not idempotent;
//   - a replay is a response with "Idempotent-Replayed: true". It must match the key's
//     original response byte for byte (status and body; and Location when both carry one).
//     The original is the first execution of the key; failing that, the first non-replayed
//     4xx other than 408, 409, 425 and 429 (those are "try again" answers that a server
//     does not store). A replay of a key without an original in this run (its original
//     was lost to a transport error, or the key was used by an earlier run) is counted as
//     unverified (each key's first replay included), and the key's later replays are
//     compared with its first instead;
//   - 5xx responses and transport errors (including per-request timeouts) are failures;
//   - so is any 4xx other than the protocol's 409 (the key is in progress) and 422 (the key
//     was used with another payload), replays included: the endpoint refused the request
//     (a missing header, an invalid key, 401, 404, 429, ...) and nothing ran. The first one
//     is kept as a sample;
//   - so is a key that got answers but neither an execution nor a replay (every answer a
//     4xx, 5xx or transport error): the run tested nothing for it. A key answered only by
//     replays is no failure: it was executed before (by an earlier run with the same keys).
//     When the run is interrupted, such a key is counted as unknown instead (its 409s may
//     mean it was running); the interruption fails the run.
//
// Key i is KeyPrefix+i, or with KeyFormat "uuid" (for a key declared with format: uuid) a
// version 4 UUID derived from KeyPrefix and i; either way the same KeyPrefix gives the
// same keys, and the default KeyPrefix is random per run.
//
// # Scheduling
//
// At most Concurrency requests are in flight at any time, and a key's duplicates leave
// together. A single dispatcher walks the keys in order and cuts each key's duplicates into
// bursts of min(Concurrency, duplicates left) requests. For each burst it first acquires
// one slot of a Concurrency-sized semaphore per request (only the dispatcher acquires,
// so a partly acquired burst can never deadlock with another), then starts one goroutine
// per request; each builds its request and reports ready, and once all are ready the
// dispatcher closes the burst's start channel, releasing them at once. A slot is freed
// when its response body has been read. Bursts of different keys overlap when the slots
// allow (Concurrency 10 with 3 duplicates per key runs three keys at a time). A key with
// more duplicates than Concurrency is sent as consecutive bursts, each started once the
// previous one has completed, so its later bursts find the key completed and exercise
// replays. This keeps both guarantees exact (the bound is never exceeded; no burst is
// split by the bound) at the cost of some idle slots while the dispatcher gathers a burst
// or waits for a key's previous burst.
//
// Redirects are not followed: the first response is the one recorded. Response bodies are
// read in full; the first [MaxBodyBytes] bytes and the total length are compared.
//
// Latencies run from a burst's release to the end of its response body, for requests that
// got an HTTP response. Percentiles use the nearest-rank method.
//
// Cancelling the context stops dispatching, aborts requests in flight (counted as
// cancelled, not as transport errors) and returns the partial result.
package hammer
