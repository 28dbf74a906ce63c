package idemredis

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
)

// 50 duplicates released together: one runs the business, and while it runs (it waits
// until the 49 others have their answer) every other one is answered 409. A later one
// replays. Nothing is a 5xx.
func TestFiftyDuplicatesOneExecution(t *testing.T) {
	e := newEnv(t, nil)
	const n = 50
	var (
		runs     atomic.Int32
		answered = make(chan struct{}, n)
		start    = make(chan struct{})
		ready    sync.WaitGroup
		done     sync.WaitGroup
		results  = make([]*idem.Response, n)
	)
	fn := func(ctx context.Context) (*idem.Response, error) {
		runs.Add(1)
		for range n - 1 {
			select {
			case <-answered:
			case <-time.After(10 * time.Second):
				t.Error("the duplicates did not all get their answer while the business ran")
				return created(1), nil
			}
		}
		return created(1), nil
	}
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			resp, err := e.store.Do(context.Background(), testPolicy, ptr("dup"), body("p"), fn)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			results[i] = resp
			if resp.Outcome != idem.OutcomeCompleted {
				answered <- struct{}{}
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	byOutcome := map[idem.Outcome]int{}
	for _, r := range results {
		if r == nil {
			continue
		}
		byOutcome[r.Outcome]++
		if r.Status >= 500 {
			t.Errorf("a %d answer", r.Status)
		}
		if r.Outcome == idem.OutcomeInProgress && r.Status != http.StatusConflict {
			t.Errorf("in_progress with status %d", r.Status)
		}
	}
	if runs.Load() != 1 || byOutcome[idem.OutcomeCompleted] != 1 || byOutcome[idem.OutcomeInProgress] != n-1 {
		t.Fatalf("%d executions, answers %v; want 1 execution, 1 completed, %d in_progress", runs.Load(), byOutcome, n-1)
	}
	resp, err := e.store.Do(context.Background(), testPolicy, ptr("dup"), body("p"), fn)
	if err != nil || resp.Outcome != idem.OutcomeReplayed {
		t.Errorf("after: %+v %v, want a replay", resp, err)
	}
}

// 500 keys × 8 duplicates in a shuffled order on 16 workers released together: each key's
// business runs exactly once, every other answer is a byte-identical replay or a 409,
// none a 5xx, and afterwards every key replays its one answer.
func TestManyKeysManyDuplicates(t *testing.T) {
	e := newEnv(t, nil)
	const keys, dups, workers = 500, 8, 16
	jobs := make([]int, 0, keys*dups)
	for k := range keys {
		for range dups {
			jobs = append(jobs, k)
		}
	}
	rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	var (
		runs     [keys]atomic.Int32
		mu       sync.Mutex
		answers  = map[idem.Outcome]int{}
		original [keys][]byte
		replays  [keys][][]byte
		queue    = make(chan int, len(jobs))
		start    = make(chan struct{})
		ready    sync.WaitGroup
		done     sync.WaitGroup
	)
	for _, k := range jobs {
		queue <- k
	}
	close(queue)
	for range workers {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			for k := range queue {
				key := fmt.Sprintf("key-%d", k)
				resp, err := e.store.Do(context.Background(), testPolicy, ptr(key), body(key), func(context.Context) (*idem.Response, error) {
					time.Sleep(time.Millisecond) // a business that takes a little while: duplicates meet it running
					return created(int(runs[k].Add(1)) + 1000*k), nil
				})
				if err != nil {
					t.Errorf("%s: %v", key, err)
					continue
				}
				mu.Lock()
				answers[resp.Outcome]++
				switch resp.Outcome {
				case idem.OutcomeCompleted:
					original[k] = resp.Body
				case idem.OutcomeReplayed:
					replays[k] = append(replays[k], resp.Body)
				case idem.OutcomeInProgress:
				default:
					t.Errorf("%s: outcome %s, status %d", key, resp.Outcome, resp.Status)
				}
				mu.Unlock()
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	for k := range keys {
		if n := runs[k].Load(); n != 1 {
			t.Errorf("key-%d: business ran %d times", k, n)
		}
		for _, b := range replays[k] {
			if !bytes.Equal(b, original[k]) {
				t.Errorf("key-%d: replay %q differs from %q", k, b, original[k])
			}
		}
	}
	if answers[idem.OutcomeCompleted] != keys || answers[idem.OutcomeCompleted]+answers[idem.OutcomeReplayed]+answers[idem.OutcomeInProgress] != keys*dups {
		t.Errorf("answers %v: want %d completed and the rest replayed or in_progress", answers, keys)
	}
	t.Logf("answers: %v", answers)
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		resp, err := e.store.Do(context.Background(), testPolicy, ptr(key), body(key), func(context.Context) (*idem.Response, error) {
			t.Errorf("%s ran again", key)
			return created(0), nil
		})
		if err != nil || resp.Outcome != idem.OutcomeReplayed || !bytes.Equal(resp.Body, original[k]) {
			t.Fatalf("%s afterwards: %v %v", key, resp, err)
		}
	}
}
