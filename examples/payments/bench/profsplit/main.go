// Command profsplit splits a CPU (or allocation) profile of BenchmarkHandler by what the
// time went to per request: request decoding and validation, the fingerprint, the
// recorder, the flights (pgx and idem's pipeline), the generated glue, GC, the scheduler.
// It reads `go tool pprof -traces` output on stdin and prints, per category, the total
// and the amount per request (-n, the requests the profile covers: -benchtime plus the 50
// of the warm-up):
//
//	go -C examples test ./payments/bench -run '^$' -bench 'Handler/idem$' -variants '^idem$' \
//		-benchtime 15000x -cpuprofile /tmp/idem.cpu -o /tmp/bench.test
//	go tool pprof -traces /tmp/bench.test /tmp/idem.cpu | go -C examples run ./payments/bench/profsplit -n 15050
//
// With -sample_index=alloc_space (or alloc_objects) on a -memprofile (run with
// -memprofilerate 1 for exact counts), the same split is of bytes (objects) allocated.
//
// A sample is attributed by its stack: a frame of pgx (or of idem's flight, or the
// floor's pipeline) makes it a flight; else kin-openapi makes it validation; else the
// innermost frame of this repository decides (see classify). Samples outside the
// handler (GC's background workers, the scheduler, pgx's background reader) get their
// own rows; the benchmark's setup and its harness (building requests, newKey) are
// reported and left out of the per-request total.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 0, "requests the profile covers (per-request column; 0: totals only)")
	detail := flag.String("detail", "", "also print, for the categories containing this text, the innermost frames of this repository their samples fell in")
	flag.Parse()
	totals := map[string]float64{}
	frames := map[string]map[string]float64{}
	var unit string
	var value float64
	var stack []string
	flush := func() {
		if stack != nil {
			c := classify(stack)
			totals[c] += value
			if *detail != "" && strings.Contains(c, *detail) {
				if frames[c] == nil {
					frames[c] = map[string]float64{}
				}
				frames[c][innermost(stack)] += value
			}
		}
		stack = nil
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			continue
		}
		if !strings.HasPrefix(line, " ") || strings.HasPrefix(strings.TrimSpace(line), "bytes:") {
			continue // the header; an allocation sample's size label
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if line[:11] != "           " { // a new sample: "   10ms   frame"
			v, u, err := parseValue(fields[0])
			if err != nil {
				fmt.Fprintln(os.Stderr, "profsplit:", err)
				os.Exit(1)
			}
			value, unit = v, u
			stack = []string{strings.Join(fields[1:], " ")}
			continue
		}
		stack = append(stack, strings.Join(fields, " "))
	}
	flush()
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "profsplit:", err)
		os.Exit(1)
	}
	print(totals, unit, *n)
	for c, fs := range frames {
		fmt.Printf("\n%s:\n", c)
		names := make([]string, 0, len(fs))
		for f := range fs {
			names = append(names, f)
		}
		sort.Slice(names, func(i, j int) bool { return fs[names[i]] > fs[names[j]] })
		for _, f := range names {
			per := fs[f]
			if *n > 0 {
				per /= float64(*n)
			}
			fmt.Printf("  %10.2f  %s\n", per, f)
		}
	}
}

// innermost is the innermost frame of this repository in stack and the frame it called
// (the leaf when none).
func innermost(stack []string) string {
	for i, f := range stack {
		if strings.HasPrefix(f, repo) {
			if i > 0 {
				return strings.TrimPrefix(f, repo) + " → " + stack[i-1]
			}
			return strings.TrimPrefix(f, repo)
		}
	}
	return stack[len(stack)-1] + " … " + stack[0]
}

// parseValue reads a sample's value: a duration (10ms) or a count with an optional unit
// suffix (4.50kB, 12).
func parseValue(s string) (float64, string, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return float64(d.Microseconds()), "µs", nil
	}
	mult := map[string]float64{"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
	for _, suf := range []string{"kB", "MB", "GB", "B"} {
		if strings.HasSuffix(s, suf) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(s, suf), 64)
			return v * mult[suf], "B", err
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, "", err
}

// Categories, in the order they are printed.
const (
	catDecode    = "request decoding (body JSON, params)"
	catValidate  = "validation (idemvalidate, kin-openapi)"
	catFinger    = "fingerprint"
	catRecorder  = "recorder, headers encoding, replay writer"
	catAnswer    = "answer JSON (the business's response)"
	catFlights   = "flights (pgx encode/decode, pipeline, socket I/O)"
	catProtocol  = "protocol other (Do, key, lock id, claim logic, contexts)"
	catGlue      = "generated glue (parts, closures)"
	catService   = "service (account, business, routing)"
	catGCBg      = "GC background marking"
	catSched     = "scheduler, netpoll, idle"
	catRuntime   = "runtime other"
	catHarness   = "(harness: requests, recorder, keys)"
	catSetup     = "(setup: cluster, pools, migrations)"
	catNoHandler = "(other, outside the handler)"
)

var order = []string{catDecode, catValidate, catFinger, catRecorder, catAnswer, catFlights, catProtocol, catGlue,
	catService, catGCBg, catSched, catRuntime, catHarness, catSetup, catNoHandler}

const repo = "github.com/idemgen/idemgen/"

// classify names the category of a sample from its stack (leaf first).
func classify(stack []string) string {
	in := func(sub string) bool {
		for _, f := range stack {
			if strings.Contains(f, sub) {
				return true
			}
		}
		return false
	}
	if !in("bench.serveOne") {
		switch {
		case in("bench.database") || in("pgembed.") || in("pgxpool.NewWithConfig") || in("createIdleResources") || in("service.Setup"):
			return catSetup
		case in("runtime.gcBgMarkWorker"):
			return catGCBg
		case in("bgreader."):
			return catFlights
		case in("github.com/jackc/"):
			return catFlights // the pool's background work
		case in("runtime.mcall") || in("runtime.schedule") || in("runtime.findRunnable") || in("runtime.netpoll") ||
			in("runtime.park_m") || in("runtime.mstart"):
			return catSched
		case strings.HasPrefix(stack[len(stack)-1], "runtime."):
			return catRuntime
		}
		return catNoHandler
	}
	// The innermost frame of this repository, and what it called.
	i := 0
	for i < len(stack) && !strings.HasPrefix(stack[i], repo) {
		i++
	}
	below := stack[:i]
	frame := stack[i]
	calls := func(sub string) bool {
		for _, f := range below {
			if strings.Contains(f, sub) {
				return true
			}
		}
		return false
	}
	fn := strings.TrimPrefix(frame, repo)
	switch {
	case calls("github.com/jackc/"):
		return catFlights
	case calls("github.com/getkin/"):
		return catValidate
	case strings.HasPrefix(fn, "idem.(*flight)") || strings.HasPrefix(fn, "idem.(*step)") || strings.Contains(fn, "bench.pipeline") ||
		strings.HasPrefix(fn, "idem/internal/idemdb."):
		return catFlights
	case strings.HasPrefix(fn, "idem.Fingerprint") || strings.HasPrefix(fn, "idem.canonicalJSON") ||
		strings.HasPrefix(fn, "idem.appendCanonical") || strings.HasPrefix(fn, "idem.appendField") ||
		strings.HasPrefix(fn, "idem.stringToken") || strings.HasPrefix(fn, "idem.appendToken") ||
		strings.HasPrefix(fn, "idem.(*fingerprintBuffer)") || strings.HasPrefix(fn, "idem.init.func") && calls("encoding/json") ||
		strings.Contains(fn, "bench.(*protocolFloor).begin") && calls("sha256"):
		return catFinger
	case strings.HasPrefix(fn, "idem.record") || strings.HasPrefix(fn, "idem.(*recorder)") || strings.HasPrefix(fn, "idem.(*Store).Record") ||
		strings.HasPrefix(fn, "idem.Record") || strings.HasPrefix(fn, "idem.(*Response)") || strings.HasPrefix(fn, "idem.HeaderLine") ||
		strings.HasPrefix(fn, "idem.(*HeaderLine)") || strings.HasPrefix(fn, "idem.encodeStoredHeader") ||
		strings.HasPrefix(fn, "idem.appendJSONString") || strings.HasPrefix(fn, "idem.headerLines") || strings.HasPrefix(fn, "idem.(*Store).capResponse") ||
		strings.HasPrefix(fn, "idem.(*call).complete") && calls("encoding/json") ||
		strings.Contains(fn, "api.idemResponse"):
		return catRecorder
	case strings.Contains(fn, "Response.Visit") || strings.Contains(fn, "bench.runBusiness") && calls("encoding/json"):
		return catAnswer
	case strings.HasPrefix(fn, "idem/idemvalidate"):
		return catValidate
	case strings.Contains(fn, "api.(*strictHandler)") || strings.Contains(fn, "api.(*ServerInterfaceWrapper)") ||
		strings.Contains(fn, "bench.handWritten") && (calls("encoding/json") || calls("io.ReadAll")):
		return catDecode
	case strings.Contains(fn, "api.(*idempotentServer)"):
		return catGlue
	case strings.HasPrefix(fn, "idem."):
		return catProtocol
	case strings.Contains(fn, "bench.serveOne") || strings.Contains(fn, "bench.newKey"):
		return catHarness
	case strings.Contains(fn, "payments/service.") || strings.Contains(fn, "payments/bench.") || strings.Contains(fn, "payments/api."):
		return catService
	}
	return catService
}

func print(totals map[string]float64, unit string, n int) {
	seen := map[string]bool{}
	cats := append([]string(nil), order...)
	var extra []string
	for c := range totals {
		if !seen[c] {
			extra = append(extra, c)
		}
	}
	sort.Strings(extra)
	for _, c := range order {
		seen[c] = true
	}
	var handler, all float64
	for _, c := range cats {
		all += totals[c]
		if !strings.HasPrefix(c, "(") {
			handler += totals[c]
		}
	}
	fmt.Printf("%-58s %12s %12s\n", "category", "total "+unit, "per request")
	row := func(c string, v float64) {
		per := ""
		if n > 0 {
			per = fmt.Sprintf("%12.2f", v/float64(n))
		}
		fmt.Printf("%-58s %12.0f %s\n", c, v, per)
	}
	for _, c := range cats {
		if totals[c] != 0 {
			row(c, totals[c])
		}
	}
	row("per-request total (without the parenthesised rows)", handler)
	row("profile total", all)
}
