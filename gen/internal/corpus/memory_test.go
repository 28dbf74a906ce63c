package corpus

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// The peak memory of BenchmarkGenerate and BenchmarkEnums is measured in child processes:
// this test binary, told by its environment to run one generator once on one spec, which
// prints its peaks and exits (TestMain). Two measures, each the median over processes of
// their own per generator, the generators interleaved:
//
//   - the peak resident set (VmHWM), as the command runs (the default GOGC): what the
//     machine gives the generator. It moves by ±15 % between processes of one generator,
//     with where the garbage collector's cycles fall against the run's short peaks of
//     live memory (a parse's): the median of rssRuns processes;
//   - the peak live heap: the largest heap a garbage collection cycle found live
//     (runtime/metrics /gc/heap/live:bytes, read after every cycle), in processes run with
//     GOGC=liveGOGC, a cycle each time the heap grows by a tenth, so that no peak goes
//     unseen between two cycles. It moves by a few % and is what the generator's code
//     holds, which is what a change to it moves: the median of liveRuns processes.
const (
	childEnv     = "IDEMGEN_BENCH_CHILD" // childAlone or childIdemgen
	childSpecEnv = "IDEMGEN_BENCH_SPEC"
	childAlone   = "oapi-codegen"
	childIdemgen = "idemgen"

	rssRuns  = 5
	liveRuns = 3
	liveGOGC = "10"
)

func TestMain(m *testing.M) {
	if run := os.Getenv(childEnv); run != "" {
		os.Exit(child(run, os.Getenv(childSpecEnv)))
	}
	os.Exit(m.Run())
}

// child runs one generator once on spec and prints its VmHWM line and its peak live heap.
func child(run, spec string) int {
	f := generate
	if run == childAlone {
		f = oapiCodegenAlone
	}
	live := watchLiveHeap()
	if err := f(spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	peak := live()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for line := range strings.Lines(string(status)) {
		if strings.HasPrefix(line, "VmHWM:") {
			fmt.Print(line)
		}
	}
	fmt.Printf("PeakLive: %d\n", peak)
	return 0
}

// watchLiveHeap records the live heap after every garbage collection cycle, from a
// cleanup that each cycle runs and that arms the next one; the function it returns ends
// the watch (one more cycle, for the heap still live) and returns the largest, in bytes.
func watchLiveHeap() func() uint64 {
	var peak atomic.Uint64
	var stopped atomic.Bool
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var arm func()
	arm = func() {
		// An object with a pointer: the tiny allocator batches pointer-free ones.
		runtime.AddCleanup(new([2]*int), func(int) {
			if stopped.Load() {
				return
			}
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			arm()
		}, 0)
	}
	arm()
	return func() uint64 {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
		stopped.Store(true)
		return peak.Load()
	}
}

// peaks are a generator's medians, in bytes: of its peak resident set and of its peak
// live heap.
type peaks struct{ rss, live float64 }

// measurePeaks runs oapi-codegen alone on plain and idemgen on marked in processes of
// their own, rssRuns times each as the command runs and liveRuns times each with
// GOGC=liveGOGC, interleaved (the order alternating from one round to the next), and
// returns their medians. Off Linux (no VmHWM) both are NaN.
func measurePeaks(b *testing.B, plain, marked string) (alone, idemgen peaks) {
	if runtime.GOOS != "linux" {
		nan := peaks{math.NaN(), math.NaN()}
		return nan, nan
	}
	var rss, live [2][]float64 // [0] oapi-codegen alone, [1] idemgen
	round := func(i int, gogc string, into *[2][]float64, pick func(peaks) float64) {
		first, second := 0, 1
		if i%2 == 1 {
			first, second = 1, 0
		}
		for _, g := range []int{first, second} {
			run, spec := childAlone, plain
			if g == 1 {
				run, spec = childIdemgen, marked
			}
			into[g] = append(into[g], pick(childPeaks(b, run, spec, gogc)))
		}
	}
	for i := range rssRuns {
		round(i, "", &rss, func(p peaks) float64 { return p.rss })
	}
	for i := range liveRuns {
		round(i, liveGOGC, &live, func(p peaks) float64 { return p.live })
	}
	return peaks{median(rss[0]), median(live[0])}, peaks{median(rss[1]), median(live[1])}
}

func median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	return v[len(v)/2]
}

// childPeaks runs one generator once on spec in a process of its own (with GOGC=gogc
// unless gogc is "") and returns its peaks. The rusage of a child is no use for the resident set: Linux carries the
// parent's peak over the exec.
func childPeaks(b *testing.B, run, spec, gogc string) peaks {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+run, childSpecEnv+"="+spec)
	if gogc != "" {
		cmd.Env = append(cmd.Env, "GOGC="+gogc)
	}
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("%s on %s in a process of its own: %v\n%s", run, spec, err, out)
	}
	var p peaks
	for line := range strings.Lines(string(out)) {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(kb), " kB"))
			if err != nil {
				b.Fatalf("VmHWM: %q: %v", kb, err)
			}
			p.rss = float64(n) * 1024
		}
		if v, ok := strings.CutPrefix(line, "PeakLive: "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				b.Fatalf("PeakLive: %q: %v", v, err)
			}
			p.live = float64(n)
		}
	}
	if p.rss == 0 || p.live == 0 {
		b.Fatalf("%s on %s: no VmHWM or PeakLive in the child's output:\n%s", run, spec, out)
	}
	return p
}
