package hammer

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Result is what a run saw. Counts are numbers of requests unless said otherwise.
type Result struct {
	Method string // HTTP method sent
	URL    string // URL as configured (before placeholders are replaced)

	Planned     int    // requests the run was to send (Config.Requests)
	Keys        int    // distinct idempotency keys (Config.Keys)
	KeyFormat   string // KeyFormatPrefix or KeyFormatUUID
	KeyPrefix   string // the keys' prefix; with KeyFormatUUID, their seed
	Concurrency int    // bound on requests in flight

	// Requests is the number of requests that completed: an HTTP response or a transport
	// error. Planned minus Requests were cancelled or never sent.
	Requests int
	// Retries is Config.Retries; Attempts counts the attempts the requests sent (with
	// Retries 0, one per request sent).
	Retries, Attempts int
	// Elapsed is the wall time from the start of dispatching to the last response.
	Elapsed time.Duration
	// RequestsPerSecond is Requests / Elapsed, in requests per second.
	RequestsPerSecond float64

	// Status counts HTTP responses by status code.
	Status map[int]int
	// ServerErrors counts 5xx responses.
	ServerErrors int
	// ClientErrors counts 4xx responses other than the protocol's 409 (key in progress)
	// and 422 (key used with another payload), replays included: refused requests.
	ClientErrors int
	// TransportErrors counts requests without an HTTP response (connection errors,
	// per-request timeouts, unreadable bodies), cancelled ones excluded.
	TransportErrors int
	// Timeouts counts the TransportErrors that are timeouts.
	Timeouts int
	// Canceled counts requests aborted because the run's context was cancelled.
	Canceled int
	// Interrupted is set when the context was cancelled before every request completed.
	Interrupted bool

	// Executions counts non-replayed 2xx responses, over all keys.
	Executions int
	// DuplicateExecutions counts executions beyond the first of their key, over all keys.
	// Anything but 0 means the endpoint is not idempotent.
	DuplicateExecutions int
	// DuplicatedKeys counts keys executed more than once.
	DuplicatedKeys int
	// UnexecutedKeys counts keys that got answers (or transport errors) but neither an
	// execution nor a replay: nothing shows the endpoint ever ran them (every answer a
	// 4xx, 5xx or transport error). In an interrupted run such keys are counted in
	// UnknownKeys instead; keys none of whose requests completed are counted in neither.
	UnexecutedKeys int
	// UnknownKeys counts, in an interrupted run, keys that got answers (or transport
	// errors) but neither an execution nor a replay: the run stopped before it could tell
	// whether they ran (a 409 means the key is being processed). They are not counted in
	// UnexecutedKeys, and do not fail the run by themselves (the interruption does).
	UnknownKeys int
	// ReplayOnlyKeys counts keys without an execution in this run but with replays: their
	// response was stored before (by an earlier run with the same keys, or a stored 4xx).
	ReplayOnlyKeys int

	// Replays counts responses with "Idempotent-Replayed: true".
	Replays int
	// ReplayMismatches counts replays that differ from their key's original response.
	ReplayMismatches int
	// UnverifiedReplays counts replays of keys with no original response in this run (no
	// execution, no stored 4xx: see ReplayOnlyKeys), each key's first replay included.
	// Nothing shows they match an original; each key's later replays are compared with
	// its first instead: UnverifiedReplays-UnverifiedKeys of them.
	UnverifiedReplays int
	// UnverifiedKeys counts the keys of UnverifiedReplays.
	UnverifiedKeys int

	// Latency percentiles (nearest rank) and maximum over HTTP responses, from a request's
	// release to the end of its body. Zero without responses.
	P50, P90, P99, Max time.Duration

	// PerKey holds one entry per key, by index.
	PerKey []KeyResult
	// MismatchSamples shows up to MaxSamples mismatched replays.
	MismatchSamples []Mismatch
	// ErrorSamples shows up to MaxSamples distinct transport error messages.
	ErrorSamples []ErrorSample
	// FirstClientError is the first response counted in ClientErrors (the first key's,
	// by index, that got one); nil without one.
	FirstClientError *Answer
	// FirstRefusal is the first answer neither replayed nor a 2xx of the first key never
	// executed (see UnexecutedKeys); nil when there is none, or when that key's requests
	// all failed in transport.
	FirstRefusal *Answer
}

// MaxSamples bounds Result.MismatchSamples and Result.ErrorSamples.
const MaxSamples = 5

// KeyResult is what one key saw.
type KeyResult struct {
	Index            int    // 0-based key index ({{i}})
	Key              string // idempotency key sent
	Requests         int    // requests completed for the key
	Executions       int    // non-replayed 2xx responses
	Replays          int    // replayed responses
	ReplayMismatches int    // replays differing from the original
	ServerErrors     int    // 5xx responses
	ClientErrors     int    // 4xx responses other than 409 and 422
	TransportErrors  int
}

// Mismatch describes one replay that differs from its key's original response.
type Mismatch struct {
	Key        string `json:"key"`
	Count      int    `json:"count"`      // identical mismatching replays of this key
	Unverified bool   `json:"unverified"` // Original is the key's first replay, not a non-replayed response
	Original   string `json:"original"`   // `201, 34 bytes: "{...}"` (body cut to 120 bytes)
	Replay     string `json:"replay"`     // same form as Original
}

// Answer is one response shown as a sample: the key it answered, and the response.
type Answer struct {
	Key string `json:"key"`
	// Response is `400, 57 bytes: "{...}"` (the body cut to 300 bytes) or, for a JSON
	// object with a "detail" string (a problem detail), `400, 141 bytes, detail: "..."`
	// (the detail cut to 500 bytes).
	Response string `json:"response"`
}

// ErrorSample is one transport error message and how many requests got it.
type ErrorSample struct {
	Error string `json:"error"`
	Count int    `json:"count"`
}

// OK reports whether the run found nothing wrong: no 5xx, transport error, mismatched
// replay, duplicate execution, 4xx other than 409 and 422, or key never executed, and it
// was not interrupted.
func (r *Result) OK() bool { return len(r.Problems()) == 0 }

// Problems lists what is wrong with the run, in order of gravity; empty when OK.
func (r *Result) Problems() []string {
	var p []string
	if r.DuplicateExecutions > 0 {
		p = append(p, fmt.Sprintf("DUPLICATE EXECUTION (%d keys executed more than once)", r.DuplicatedKeys))
	}
	if r.ReplayMismatches > 0 {
		p = append(p, plural(r.ReplayMismatches, "mismatched replay"))
	}
	if r.ServerErrors > 0 {
		p = append(p, plural(r.ServerErrors, "5xx response"))
	}
	if r.TransportErrors > 0 {
		p = append(p, plural(r.TransportErrors, "transport error"))
	}
	if r.ClientErrors > 0 {
		p = append(p, plural(r.ClientErrors, "4xx response")+" other than 409 and 422")
	}
	if r.UnexecutedKeys > 0 {
		p = append(p, plural(r.UnexecutedKeys, "key")+" never executed")
	}
	if r.Interrupted {
		p = append(p, fmt.Sprintf("interrupted after %d of %d requests", r.Requests, r.Planned))
	}
	return p
}

// analyze turns the records into a Result.
func analyze(cfg *Config, records []record, keys []keyState, elapsed time.Duration, canceled bool) *Result {
	r := &Result{
		Method: cfg.Method, URL: cfg.URL, Planned: cfg.Requests, Keys: cfg.Keys,
		KeyFormat: cfg.KeyFormat, KeyPrefix: cfg.KeyPrefix, Concurrency: cfg.Concurrency, Elapsed: elapsed, Retries: cfg.Retries,
		Status: make(map[int]int), PerKey: make([]KeyResult, cfg.Keys),
	}
	for i := range r.PerKey {
		r.PerKey[i] = KeyResult{Index: i, Key: cfg.key(i)}
	}
	var lat []time.Duration
	errCount := map[string]int{}
	var errOrder []string
	for i := range records {
		rec := &records[i]
		if !rec.done {
			continue
		}
		r.Attempts += rec.attempts
		if rec.canceled {
			r.Canceled++
			continue
		}
		kr := &r.PerKey[rec.key]
		kr.Requests++
		r.Requests++
		if rec.err != nil {
			r.TransportErrors++
			kr.TransportErrors++
			if isTimeout(rec.err) {
				r.Timeouts++
			}
			msg := rec.err.Error()
			if errCount[msg] == 0 {
				errOrder = append(errOrder, msg)
			}
			errCount[msg]++
			continue
		}
		lat = append(lat, rec.latency)
		r.Status[rec.status]++
		switch {
		case rec.status >= 500:
			r.ServerErrors++
			kr.ServerErrors++
		case clientError(rec.status):
			r.ClientErrors++
			kr.ClientErrors++
		}
		if rec.replayed {
			kr.Replays++
		} else if rec.status >= 200 && rec.status < 300 {
			kr.Executions++
		}
	}
	r.Interrupted = canceled && r.Requests < r.Planned

	for i := range keys {
		ks, kr := &keys[i], &r.PerKey[i]
		r.Executions += kr.Executions
		r.Replays += kr.Replays
		if ks.clientError != nil && r.FirstClientError == nil {
			r.FirstClientError = &Answer{Key: kr.Key, Response: describeAnswer(*ks.clientError)}
		}
		switch {
		case kr.Executions == 0 && kr.Replays > 0:
			r.ReplayOnlyKeys++
		case kr.Executions == 0 && kr.Requests > 0 && r.Interrupted:
			r.UnknownKeys++
		case kr.Executions == 0 && kr.Requests > 0:
			r.UnexecutedKeys++
			if ks.refusal != nil && r.FirstRefusal == nil {
				r.FirstRefusal = &Answer{Key: kr.Key, Response: describeAnswer(*ks.refusal)}
			}
		case kr.Executions > 1:
			r.DuplicatedKeys++
			r.DuplicateExecutions += kr.Executions - 1
		}
		ref, unverified := ks.ref2xx, false
		if ref == nil {
			ref = ks.ref4xx
		}
		if ref == nil {
			ref, unverified = ks.firstReplay, true
			r.UnverifiedReplays += kr.Replays
			if kr.Replays > 0 {
				r.UnverifiedKeys++
			}
		}
		// Report samples in a stable order.
		var bad []observed
		for obs, n := range ks.replays {
			if !ref.matches(obs) {
				kr.ReplayMismatches += n
				bad = append(bad, obs)
			}
		}
		r.ReplayMismatches += kr.ReplayMismatches
		slices.SortFunc(bad, func(a, b observed) int {
			return strings.Compare(describe(a), describe(b))
		})
		for _, obs := range bad {
			if len(r.MismatchSamples) < MaxSamples {
				r.MismatchSamples = append(r.MismatchSamples, Mismatch{
					Key: kr.Key, Count: ks.replays[obs], Unverified: unverified,
					Original: describe(*ref), Replay: describe(obs),
				})
			}
		}
	}
	for _, msg := range errOrder {
		if len(r.ErrorSamples) < MaxSamples {
			r.ErrorSamples = append(r.ErrorSamples, ErrorSample{Error: msg, Count: errCount[msg]})
		}
	}

	if r.Elapsed > 0 {
		r.RequestsPerSecond = float64(r.Requests) / r.Elapsed.Seconds()
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50, r.P90, r.P99, r.Max = percentile(lat, 50), percentile(lat, 90), percentile(lat, 99), lat[len(lat)-1]
	}
	return r
}

// percentile returns the nearest-rank p-th percentile of sorted, non-empty d.
func percentile(d []time.Duration, p int) time.Duration {
	rank := (p*len(d) + 99) / 100 // ceil(p/100 * n)
	return d[max(rank, 1)-1]
}

// Body excerpts, in bytes: of a replay in a mismatch report; of a refused response
// (Answer); of a refused response's problem detail.
const (
	mismatchCut = 120
	answerCut   = 300
	detailCut   = 500
)

// describe renders a response for a mismatch report: status, length and the body's first
// mismatchCut bytes.
func describe(o observed) string {
	return fmt.Sprintf("%d, %d bytes: %q", o.status, o.length, cut(o.body, mismatchCut)) + locationOf(o)
}

// describeAnswer renders a refused response for an Answer: when the body is a JSON
// object with a "detail" string (an RFC 9457 problem detail), the detail up to detailCut
// bytes, else the body up to answerCut bytes.
func describeAnswer(o observed) string {
	var p struct {
		Detail *string `json:"detail"`
	}
	if json.Unmarshal([]byte(o.body), &p) == nil && p.Detail != nil && *p.Detail != "" {
		return fmt.Sprintf("%d, %d bytes, detail: %q", o.status, o.length, cut(*p.Detail, detailCut)) + locationOf(o)
	}
	return fmt.Sprintf("%d, %d bytes: %q", o.status, o.length, cut(o.body, answerCut)) + locationOf(o)
}

// locationOf is ", Location URL", or "" when o carries none.
func locationOf(o observed) string {
	if o.location == "" {
		return ""
	}
	return ", Location " + o.location
}

// cut returns s when it has at most n bytes, else its first n bytes or fewer, ending on a
// UTF-8 character boundary, and "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// fmtDur rounds d to about three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

// plural returns "1 key", "2 keys".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// sortedCodes returns the status codes of r.Status in ascending order.
func (r *Result) sortedCodes() []int {
	codes := make([]int, 0, len(r.Status))
	for c := range r.Status {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// WriteTable writes the human-readable summary to w.
func (r *Result) WriteTable(w io.Writer) {
	var b strings.Builder
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-12s %s\n", label, fmt.Sprintf(format, args...))
	}
	loud := func(format string, args ...any) {
		fmt.Fprintf(&b, "!!! %s\n", fmt.Sprintf(format, args...))
	}

	line("hammer", "%s %s", r.Method, r.URL)
	line("requests", "%d in %s (%.1f req/s); %s, %s each; concurrency %d",
		r.Requests, fmtDur(r.Elapsed), r.RequestsPerSecond, r.describeKeys(), r.perKey(), r.Concurrency)
	if r.Retries > 0 {
		line("attempts", "%d (up to %d retries per request with its key: transport errors, 409, 429, 5xx not stored)", r.Attempts, r.Retries)
	}
	if r.Interrupted {
		loud("INTERRUPTED: %d of %d requests completed, %d cancelled; partial summary", r.Requests, r.Planned, r.Canceled)
	}

	var codes []string
	for _, c := range r.sortedCodes() {
		codes = append(codes, fmt.Sprintf("%d: %d", c, r.Status[c]))
	}
	if len(codes) == 0 {
		codes = []string{"no responses"}
	}
	line("status", "%s", strings.Join(codes, "   "))
	if r.ClientErrors > 0 {
		loud("REFUSED: %s other than 409 and 422 (requests the endpoint refused: nothing ran for them)", plural(r.ClientErrors, "4xx response"))
		if a := r.FirstClientError; a != nil {
			loud("  first, key %s: %s", a.Key, a.Response)
		}
	}

	switch {
	case r.DuplicateExecutions > 0:
		line("executions", "%d on %s", r.Executions, plural(r.Keys, "key"))
		loud("DUPLICATE EXECUTION: %d of %d keys executed more than once (%d extra executions)",
			r.DuplicatedKeys, r.Keys, r.DuplicateExecutions)
		shown := 0
		for _, k := range r.PerKey {
			if k.Executions > 1 {
				if shown == 10 {
					loud("  ... and %d more keys", r.DuplicatedKeys-shown)
					break
				}
				loud("  key %s: executed %d times", k.Key, k.Executions)
				shown++
			}
		}
	case r.UnexecutedKeys > 0:
		line("executions", "%d (at most one per key; %s NEVER EXECUTED%s)", r.Executions, plural(r.UnexecutedKeys, "key"), r.keyNotes("; "))
		loud("NEVER EXECUTED: %d of %d keys got neither an execution nor a replay", r.UnexecutedKeys, r.Keys)
		if a := r.FirstRefusal; a != nil && (r.FirstClientError == nil || *a != *r.FirstClientError) {
			loud("  first answer, key %s: %s", a.Key, a.Response)
		}
	case r.ReplayOnlyKeys > 0 || r.UnknownKeys > 0:
		line("executions", "%d (at most one per key%s)", r.Executions, r.keyNotes("; "))
	default:
		line("executions", "%d (exactly one per key)", r.Executions)
	}

	switch {
	case r.Replays == 0:
		line("replays", "0")
	case r.ReplayMismatches == 0:
		line("replays", "%s", r.matchingReplays())
	default:
		line("replays", "%d, %d MISMATCHED", r.Replays, r.ReplayMismatches)
		what := "their key's original response"
		if r.UnverifiedReplays > 0 {
			what += " (or, lacking one in this run, its first replay)"
		}
		loud("REPLAY MISMATCH: %d of %d replays differ from %s", r.ReplayMismatches, r.Replays, what)
		for _, m := range r.MismatchSamples {
			what := "original"
			if m.Unverified {
				what = "first replay"
			}
			loud("  key %s (%d replays)", m.Key, m.Count)
			loud("    %-12s %s", what, m.Original)
			loud("    %-12s %s", "replay", m.Replay)
		}
		if r.UnverifiedReplays > 0 {
			line("", "%s of keys with no original response in this run (compared with their key's first replay)",
				plural(r.UnverifiedReplays, "replay"))
		}
	}

	if r.Requests > r.TransportErrors {
		line("latency", "p50 %s   p90 %s   p99 %s   max %s", fmtDur(r.P50), fmtDur(r.P90), fmtDur(r.P99), fmtDur(r.Max))
	}
	if r.TransportErrors == 0 {
		line("transport", "0 errors")
	} else {
		line("transport", "%s (%s)", strings.ToUpper(plural(r.TransportErrors, "error")), plural(r.Timeouts, "timeout"))
		for _, e := range r.ErrorSamples {
			line("", "%dx %s", e.Count, e.Error)
		}
	}

	if p := r.Problems(); len(p) > 0 {
		line("result", "FAIL: %s", strings.Join(p, "; "))
	} else {
		line("result", "OK")
	}
	io.WriteString(w, b.String())
}

// matchingReplays describes replays none of which mismatched: "9, all match their key's
// original response byte for byte", and for keys with no original response in this run
// what their replays were compared with.
func (r *Result) matchingReplays() string {
	verified := r.Replays - r.UnverifiedReplays
	later := r.UnverifiedReplays - r.UnverifiedKeys // compared with their key's first replay
	unverified := "the " + strconv.Itoa(later) + " after each key's first match it byte for byte"
	if later == 0 {
		unverified = "one per key, nothing to compare"
	}
	switch {
	case r.UnverifiedReplays == 0:
		return fmt.Sprintf("%d, all match their key's original response byte for byte", r.Replays)
	case verified == 0:
		return fmt.Sprintf("%d, of keys with no original response in this run; %s", r.Replays, unverified)
	default:
		return fmt.Sprintf("%d: %d match their key's original response byte for byte; %d are of keys with no original response in this run, and %s",
			r.Replays, verified, r.UnverifiedReplays, unverified)
	}
}

// describeKeys describes the keys for the summary: "10 keys (hammer-1f2e3d4c-*)", or
// with uuid keys "10 uuid keys (seed hammer-1f2e3d4c-; key 0 is 3f2a...)".
func (r *Result) describeKeys() string {
	if r.KeyFormat == KeyFormatUUID && len(r.PerKey) > 0 {
		return fmt.Sprintf("%s (seed %s; key 0 is %s)", plural(r.Keys, "uuid key"), r.KeyPrefix, r.PerKey[0].Key)
	}
	return fmt.Sprintf("%s (%s*)", plural(r.Keys, "key"), r.KeyPrefix)
}

// perKey says how many requests each key got: "1 request", "5 requests", "4-5 requests".
func (r *Result) perKey() string {
	n := r.Planned / r.Keys
	if r.Planned%r.Keys != 0 {
		return fmt.Sprintf("%d-%d requests", n, n+1)
	}
	return plural(n, "request")
}

// keyNotes is, each after sep, "N keys answered only by replays (...)" and "N keys
// unknown (...)", for the keys there are; "" without such keys.
func (r *Result) keyNotes(sep string) string {
	var s string
	if r.ReplayOnlyKeys > 0 {
		s += sep + plural(r.ReplayOnlyKeys, "key") + " answered only by replays (executed before this run)"
	}
	if r.UnknownKeys > 0 {
		s += sep + plural(r.UnknownKeys, "key") + " unknown (interrupted before an execution or a replay)"
	}
	return s
}

// jsonSummary is the -json form of a Result. Durations are in milliseconds.
type jsonSummary struct {
	OK                  bool               `json:"ok"`
	Problems            []string           `json:"problems"`
	Method              string             `json:"method"`
	URL                 string             `json:"url"`
	Planned             int                `json:"planned"`
	Requests            int                `json:"requests"`
	Retries             int                `json:"retries"`
	Attempts            int                `json:"attempts"`
	Keys                int                `json:"keys"`
	KeyFormat           string             `json:"key_format"`
	KeyPrefix           string             `json:"key_prefix"`
	Concurrency         int                `json:"concurrency"`
	ElapsedMS           float64            `json:"elapsed_ms"`
	RequestsPerSecond   float64            `json:"requests_per_second"`
	Status              map[string]int     `json:"status"`
	Executions          int                `json:"executions"`
	DuplicateExecutions int                `json:"duplicate_executions"`
	DuplicatedKeys      int                `json:"duplicated_keys"`
	UnexecutedKeys      int                `json:"unexecuted_keys"`
	UnknownKeys         int                `json:"unknown_keys"`
	ReplayOnlyKeys      int                `json:"replay_only_keys"`
	Replays             int                `json:"replays"`
	ReplayMismatches    int                `json:"replay_mismatches"`
	UnverifiedReplays   int                `json:"unverified_replays"`
	UnverifiedKeys      int                `json:"unverified_keys"`
	ServerErrors        int                `json:"server_errors"`
	ClientErrors        int                `json:"client_errors"`
	TransportErrors     int                `json:"transport_errors"`
	Timeouts            int                `json:"timeouts"`
	Canceled            int                `json:"canceled"`
	Interrupted         bool               `json:"interrupted"`
	LatencyMS           map[string]float64 `json:"latency_ms"`
	DuplicateKeys       []jsonKey          `json:"duplicate_keys,omitempty"`
	MismatchSamples     []Mismatch         `json:"mismatch_samples,omitempty"`
	ErrorSamples        []ErrorSample      `json:"error_samples,omitempty"`
	FirstClientError    *Answer            `json:"first_client_error,omitempty"`
	FirstRefusal        *Answer            `json:"first_refusal,omitempty"`
}

type jsonKey struct {
	Key        string `json:"key"`
	Executions int    `json:"executions"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// WriteJSON writes the summary to w as one indented JSON object. Its fields are those of
// Result in snake_case, with the same meaning (unverified_replays: replays of keys with
// no original response in this run, each key's first included; unverified_keys: those
// keys; unknown_keys: keys undecided when the run was interrupted). Status codes are
// object keys; durations are in milliseconds; duplicate_keys lists every key executed
// more than once.
func (r *Result) WriteJSON(w io.Writer) error {
	s := jsonSummary{
		OK: r.OK(), Problems: r.Problems(), Method: r.Method, URL: r.URL,
		Planned: r.Planned, Requests: r.Requests, Retries: r.Retries, Attempts: r.Attempts, Keys: r.Keys, KeyFormat: r.KeyFormat, KeyPrefix: r.KeyPrefix,
		Concurrency: r.Concurrency, ElapsedMS: ms(r.Elapsed), RequestsPerSecond: r.RequestsPerSecond,
		Status:     make(map[string]int, len(r.Status)),
		Executions: r.Executions, DuplicateExecutions: r.DuplicateExecutions,
		DuplicatedKeys: r.DuplicatedKeys, UnexecutedKeys: r.UnexecutedKeys, UnknownKeys: r.UnknownKeys,
		ReplayOnlyKeys: r.ReplayOnlyKeys,
		Replays:        r.Replays, ReplayMismatches: r.ReplayMismatches, UnverifiedReplays: r.UnverifiedReplays, UnverifiedKeys: r.UnverifiedKeys,
		ServerErrors: r.ServerErrors, ClientErrors: r.ClientErrors, TransportErrors: r.TransportErrors, Timeouts: r.Timeouts,
		Canceled: r.Canceled, Interrupted: r.Interrupted,
		LatencyMS:       map[string]float64{"p50": ms(r.P50), "p90": ms(r.P90), "p99": ms(r.P99), "max": ms(r.Max)},
		MismatchSamples: r.MismatchSamples, ErrorSamples: r.ErrorSamples,
		FirstClientError: r.FirstClientError, FirstRefusal: r.FirstRefusal,
	}
	if s.Problems == nil {
		s.Problems = []string{}
	}
	for c, n := range r.Status {
		s.Status[strconv.Itoa(c)] = n
	}
	for _, k := range r.PerKey {
		if k.Executions > 1 {
			s.DuplicateKeys = append(s.DuplicateKeys, jsonKey{k.Key, k.Executions})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}
