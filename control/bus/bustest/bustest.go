// Package bustest is the conformance suite for bus.Bus: every implementation (in-process and
// Redis) runs the same tests, so that code written against one behaves the same on the other.
// It is for tests only and must never be imported by non-test code.
//
// The tests use the real clock (Redis reads its own), with periods of a few hundred
// milliseconds, and wait by polling with deadlines.
package bustest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/bus"
)

// Run runs the conformance suite against the buses newBus returns. newBus is called once per
// subtest and must return a fresh, empty bus (for Redis: a random key prefix) that uses the
// default subscription buffer (bus.DefaultSubscriptionBuffer) or a smaller one; it should
// close the bus and remove its keys in t.Cleanup. Closing it twice must be harmless, since
// the suite closes buses itself.
//
// The goroutine-leak test runs first and alone; the others then run in parallel.
func Run(t *testing.T, newBus func(t *testing.T) bus.Bus) {
	t.Run("NoGoroutineLeak", func(t *testing.T) { testNoGoroutineLeak(t, newBus) })
	tests := []struct {
		name string
		fn   func(*testing.T, bus.Bus)
	}{
		{"PubSub/RoundTrip", testPubSubRoundTrip},
		{"PubSub/MultiChannel", testPubSubMultiChannel},
		{"PubSub/Ordering", testPubSubOrdering},
		{"PubSub/ManySubscribers", testPubSubManySubscribers},
		{"PubSub/CloseUnsubscribes", testPubSubClose},
		{"PubSub/SlowSubscriberDrops", testPubSubSlowSubscriber},
		{"Keys/SetGetDelete", testSetGetDelete},
		{"Keys/SetNXContention", testSetNXContention},
		{"Keys/TTLExpiry", testTTLExpiry},
		{"Keys/SetWithoutTTLPersists", testSetWithoutTTLPersists},
		{"Keys/CompareAndDelete", testCompareAndDelete},
		{"Keys/Refresh", testRefresh},
		{"Counter/IncrByConcurrent", testIncrByConcurrent},
		{"Counter/IncrByTTL", testIncrByTTL},
		{"Counter/IncrByNotInteger", testIncrByNotInteger},
		{"RateLimit/AllowRefuseRetry", testAllowRefuseRetry},
		{"RateLimit/KeysIndependent", testAllowKeysIndependent},
		{"RateLimit/InvalidLimit", testAllowInvalidLimit},
		{"InvalidArguments", testInvalidArguments},
		{"CanceledContext", testCanceledContext},
		{"Ping", testPing},
		{"CloseIdempotent", testCloseIdempotent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newBus(t))
		})
	}
}

// wait is how long a test waits for something that should happen at once.
const wait = 5 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// poll calls cond every few milliseconds until it is true, failing t at the deadline.
func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		<-tick.C
	}
}

func subscribe(t *testing.T, ctx context.Context, b bus.Bus, channels ...string) bus.Subscription {
	t.Helper()
	s, err := b.Subscribe(ctx, channels...)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", channels, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func publish(t *testing.T, ctx context.Context, b bus.Bus, channel string, payload []byte) {
	t.Helper()
	if err := b.Publish(ctx, channel, payload); err != nil {
		t.Fatalf("Publish(%q): %v", channel, err)
	}
}

// recv returns the next message or fails t.
func recv(t *testing.T, s bus.Subscription) bus.Message {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case m, ok := <-s.Messages():
		if !ok {
			t.Fatal("Messages closed while a message was expected")
		}
		return m
	case <-timer.C:
		t.Fatalf("no message within %s", wait)
	}
	return bus.Message{}
}

// expectClosed drains s until its Messages channel is closed, failing t if that does not happen.
func expectClosed(t *testing.T, s bus.Subscription) {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-s.Messages():
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("Messages not closed within %s of Close", wait)
		}
	}
}

func mustGet(t *testing.T, ctx context.Context, b bus.Bus, key string) []byte {
	t.Helper()
	v, err := b.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return v
}

func isGone(t *testing.T, ctx context.Context, b bus.Bus, key string) bool {
	t.Helper()
	_, err := b.Get(ctx, key)
	if err != nil && !errors.Is(err, bus.ErrNotFound) {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return errors.Is(err, bus.ErrNotFound)
}

func testNoGoroutineLeak(t *testing.T, newBus func(t *testing.T) bus.Bus) {
	ctx := testContext(t)
	before := runtime.NumGoroutine()
	b := newBus(t)
	s1, err := b.Subscribe(ctx, "leak-a", "leak-b")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.Subscribe(ctx, "leak-a")
	if err != nil {
		t.Fatal(err)
	}
	publish(t, ctx, b, "leak-a", []byte("x"))
	recv(t, s1)
	recv(t, s2)
	if _, err := b.Allow(ctx, "leak", bus.Limit{Rate: 1, Period: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatalf("subscription Close: %v", err)
	}
	expectClosed(t, s1)
	if err := b.Close(); err != nil {
		t.Fatalf("bus Close: %v", err)
	}
	expectClosed(t, s2) // closed by the bus
	if err := s2.Close(); err != nil {
		t.Fatalf("subscription Close after bus Close: %v", err)
	}

	deadline := time.Now().Add(wait)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines before the bus, %d after Close:\n%s", before, runtime.NumGoroutine(), buf)
		}
		<-tick.C
	}
}

func testPubSubRoundTrip(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	s := subscribe(t, ctx, b, "rt")
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = byte(rand.IntN(256))
	}
	payloads := [][]byte{
		[]byte("hello"),
		all,
		{},
		{0, 0, 0},
		[]byte("*1\r\n$5\r\nhello\r\n"), // RESP framing inside a payload
		[]byte("ünïcødé ✓"),
		big,
	}
	for _, p := range payloads {
		sent := bytes.Clone(p)
		publish(t, ctx, b, "rt", sent)
		if len(sent) > 0 {
			sent[0] ^= 0xff // the bus must have copied what it was given
		}
	}
	for i, p := range payloads {
		m := recv(t, s)
		if m.Channel != "rt" {
			t.Errorf("message %d: channel %q, want %q", i, m.Channel, "rt")
		}
		if !bytes.Equal(m.Payload, p) {
			t.Errorf("message %d: payload of %d bytes differs from the %d bytes sent", i, len(m.Payload), len(p))
		}
	}
}

func testPubSubMultiChannel(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	s := subscribe(t, ctx, b, "mc-a", "mc-b", "mc-a") // a repeated name counts once
	other := subscribe(t, ctx, b, "mc-c")
	publish(t, ctx, b, "mc-a", []byte("1"))
	publish(t, ctx, b, "mc-c", []byte("not for s"))
	publish(t, ctx, b, "mc-b", []byte("2"))
	publish(t, ctx, b, "mc-a", []byte("3"))
	publish(t, ctx, b, "mc-a", []byte("end"))

	var got []string
	for {
		m := recv(t, s)
		if string(m.Payload) == "end" {
			break
		}
		got = append(got, m.Channel+"="+string(m.Payload))
	}
	want := []string{"mc-a=1", "mc-b=2", "mc-a=3"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q (each once, no mc-c)", got, want)
	}
	if m := recv(t, other); m.Channel != "mc-c" || string(m.Payload) != "not for s" {
		t.Errorf("mc-c subscriber got %s=%q", m.Channel, m.Payload)
	}
}

func testPubSubOrdering(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	const n = 500
	s := subscribe(t, ctx, b, "ord-1", "ord-2")
	done := make(chan error, 1)
	go func() {
		next := map[string]int{"ord-1": 0, "ord-2": 0}
		for range 2 * n {
			select {
			case m, ok := <-s.Messages():
				if !ok {
					done <- errors.New("Messages closed early")
					return
				}
				seq, err := strconv.Atoi(string(m.Payload))
				if err != nil || seq != next[m.Channel] {
					done <- fmt.Errorf("channel %s: got %q, want %d", m.Channel, m.Payload, next[m.Channel])
					return
				}
				next[m.Channel]++
			case <-time.After(wait):
				done <- fmt.Errorf("stalled at %v", next)
				return
			}
		}
		done <- nil
	}()
	for i := range n {
		publish(t, ctx, b, "ord-1", strconv.AppendInt(nil, int64(i), 10))
		publish(t, ctx, b, "ord-2", strconv.AppendInt(nil, int64(i), 10))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := s.Dropped(); d != 0 {
		t.Errorf("Dropped = %d with a reader keeping up", d)
	}
}

func testPubSubManySubscribers(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	const subs, n = 8, 100
	ss := make([]bus.Subscription, subs)
	for i := range ss {
		ss[i] = subscribe(t, ctx, b, "fan")
	}
	for i := range n {
		publish(t, ctx, b, "fan", strconv.AppendInt(nil, int64(i), 10))
	}
	var wg sync.WaitGroup
	errs := make(chan error, subs)
	for i, s := range ss {
		wg.Go(func() {
			for want := range n {
				select {
				case m, ok := <-s.Messages():
					if !ok || string(m.Payload) != strconv.Itoa(want) {
						errs <- fmt.Errorf("subscriber %d: got %q (open %v), want %d", i, m.Payload, ok, want)
						return
					}
				case <-time.After(wait):
					errs <- fmt.Errorf("subscriber %d: stalled at %d", i, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func testPubSubClose(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	s1 := subscribe(t, ctx, b, "cl")
	s2 := subscribe(t, ctx, b, "cl")
	if err := s1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	expectClosed(t, s1)
	if err := s1.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	publish(t, ctx, b, "cl", []byte("after"))
	if m := recv(t, s2); string(m.Payload) != "after" {
		t.Errorf("remaining subscriber got %q", m.Payload)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, s2)
	publish(t, ctx, b, "cl", []byte("nobody listens")) // no subscriber is not an error
}

func testPubSubSlowSubscriber(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	const n = 3 * bus.DefaultSubscriptionBuffer
	s := subscribe(t, ctx, b, "slow")
	start := time.Now()
	published := make(chan error, 1)
	go func() { // nobody reads: the publisher must not wait
		for i := range n {
			if err := b.Publish(ctx, "slow", strconv.AppendInt(nil, int64(i), 10)); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	select {
	case err := <-published:
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
	case <-time.After(4 * wait):
		t.Fatalf("publishing %d messages to an idle subscriber blocked for %s", n, 4*wait)
	}
	t.Logf("published %d messages to an idle subscriber in %s", n, time.Since(start))

	received, last := 0, -1
	poll(t, 10*time.Second, "received + dropped = published", func() bool {
		for {
			select {
			case m := <-s.Messages():
				seq, err := strconv.Atoi(string(m.Payload))
				if err != nil || seq <= last {
					t.Fatalf("message %q after %d: order lost", m.Payload, last)
				}
				if received == 0 && seq != 0 {
					t.Fatalf("first message is %d: the oldest buffered messages must be kept", seq)
				}
				last = seq
				received++
				continue
			default:
			}
			return uint64(received)+s.Dropped() == n
		}
	})
	if s.Dropped() == 0 || received == 0 {
		t.Errorf("received %d, dropped %d of %d: want some of each", received, s.Dropped(), n)
	}
}

func testSetGetDelete(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	if _, err := b.Get(ctx, "k"); !errors.Is(err, bus.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
	}
	v := []byte{0, 1, 2, 0xff, '\r', '\n'}
	if err := b.Set(ctx, "k", v, 0); err != nil {
		t.Fatal(err)
	}
	v[0] = 9 // the bus must have copied it
	if got := mustGet(t, ctx, b, "k"); !bytes.Equal(got, []byte{0, 1, 2, 0xff, '\r', '\n'}) {
		t.Fatalf("Get = %v", got)
	}
	got := mustGet(t, ctx, b, "k")
	got[1] = 7 // and must hand out copies
	if again := mustGet(t, ctx, b, "k"); again[1] != 1 {
		t.Fatal("mutating a Get result changed the stored value")
	}
	if err := b.Set(ctx, "k", []byte("second"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, ctx, b, "k"); string(got) != "second" {
		t.Fatalf("Get after overwrite = %q", got)
	}
	if err := b.Set(ctx, "empty", nil, 0); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, ctx, b, "empty"); len(got) != 0 {
		t.Fatalf("empty value came back as %q", got)
	}
	if err := b.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if !isGone(t, ctx, b, "k") {
		t.Fatal("key still there after Delete")
	}
	if err := b.Delete(ctx, "k"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
}

func testSetNXContention(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int
	)
	startGate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-startGate
			ok, err := b.SetNX(ctx, "lock", []byte("owner-"+strconv.Itoa(i)), time.Minute)
			if err != nil {
				t.Errorf("SetNX: %v", err)
				return
			}
			if ok {
				mu.Lock()
				winners = append(winners, i)
				mu.Unlock()
			}
		})
	}
	close(startGate)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d winners %v, want exactly 1", len(winners), winners)
	}
	if got := mustGet(t, ctx, b, "lock"); string(got) != "owner-"+strconv.Itoa(winners[0]) {
		t.Errorf("lock holds %q, winner was %d", got, winners[0])
	}
}

func testTTLExpiry(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	const ttl = 150 * time.Millisecond
	start := time.Now()
	if ok, err := b.SetNX(ctx, "ttl", []byte("a"), ttl); err != nil || !ok {
		t.Fatalf("SetNX = %v, %v", ok, err)
	}
	if ok, err := b.SetNX(ctx, "ttl", []byte("b"), ttl); err != nil || ok {
		t.Fatalf("SetNX on a live key = %v, %v; want false", ok, err)
	}
	if got := mustGet(t, ctx, b, "ttl"); string(got) != "a" {
		t.Fatalf("Get = %q", got)
	}
	poll(t, wait, "the key to expire", func() bool { return isGone(t, ctx, b, "ttl") })
	if el := time.Since(start); el < ttl-10*time.Millisecond {
		t.Errorf("key expired after %s, ttl was %s", el, ttl)
	}
	if ok, err := b.SetNX(ctx, "ttl", []byte("c"), ttl); err != nil || !ok {
		t.Fatalf("SetNX after expiry = %v, %v; want true", ok, err)
	}

	// Set with a ttl expires the same way.
	if err := b.Set(ctx, "ttl-set", []byte("x"), ttl); err != nil {
		t.Fatal(err)
	}
	poll(t, wait, "the Set key to expire", func() bool { return isGone(t, ctx, b, "ttl-set") })
}

func testSetWithoutTTLPersists(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	const ttl = 100 * time.Millisecond
	if err := b.Set(ctx, "p", []byte("1"), ttl); err != nil {
		t.Fatal(err)
	}
	if err := b.Set(ctx, "p", []byte("2"), 0); err != nil { // ttl 0 removes the earlier ttl
		t.Fatal(err)
	}
	if err := b.Set(ctx, "witness", []byte("w"), ttl); err != nil {
		t.Fatal(err)
	}
	poll(t, wait, "the witness key to expire", func() bool { return isGone(t, ctx, b, "witness") })
	if got := mustGet(t, ctx, b, "p"); string(got) != "2" {
		t.Errorf("Get = %q, want the value set without ttl", got)
	}
}

func testCompareAndDelete(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	if ok, err := b.CompareAndDelete(ctx, "cad", []byte("me")); err != nil || ok {
		t.Fatalf("CompareAndDelete of a missing key = %v, %v", ok, err)
	}
	if err := b.Set(ctx, "cad", []byte("owner-1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, wrong := range []string{"owner-2", "owner-10", "owner-", ""} {
		if ok, err := b.CompareAndDelete(ctx, "cad", []byte(wrong)); err != nil || ok {
			t.Fatalf("CompareAndDelete(%q) = %v, %v; want false", wrong, ok, err)
		}
	}
	if got := mustGet(t, ctx, b, "cad"); string(got) != "owner-1" {
		t.Fatalf("a refused CompareAndDelete changed the value to %q", got)
	}
	if ok, err := b.CompareAndDelete(ctx, "cad", []byte("owner-1")); err != nil || !ok {
		t.Fatalf("CompareAndDelete(owner) = %v, %v; want true", ok, err)
	}
	if !isGone(t, ctx, b, "cad") {
		t.Fatal("key still there after CompareAndDelete")
	}
}

func testRefresh(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	const short = 150 * time.Millisecond
	if ok, err := b.Refresh(ctx, "missing", []byte("me"), time.Minute); err != nil || ok {
		t.Fatalf("Refresh of a missing key = %v, %v", ok, err)
	}
	for _, k := range []string{"mine", "theirs", "witness"} {
		if err := b.Set(ctx, k, []byte(k), short); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := b.Refresh(ctx, "mine", []byte("mine"), time.Minute); err != nil || !ok {
		t.Fatalf("Refresh(owner) = %v, %v; want true", ok, err)
	}
	if ok, err := b.Refresh(ctx, "theirs", []byte("mine"), time.Minute); err != nil || ok {
		t.Fatalf("Refresh(not owner) = %v, %v; want false", ok, err)
	}
	poll(t, wait, "the witness key to expire", func() bool { return isGone(t, ctx, b, "witness") })
	poll(t, wait, "the key refreshed by a non-owner to expire on time", func() bool { return isGone(t, ctx, b, "theirs") })
	if got := mustGet(t, ctx, b, "mine"); string(got) != "mine" {
		t.Fatalf("refreshed key = %q", got)
	}
	// Refresh with ttl 0 removes the expiry, as Set does.
	if ok, err := b.Refresh(ctx, "mine", []byte("mine"), 0); err != nil || !ok {
		t.Fatalf("Refresh(ttl 0) = %v, %v", ok, err)
	}
}

func testIncrByConcurrent(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ttl := time.Duration(0)
			if w%2 == 1 {
				ttl = time.Minute
			}
			for range each {
				if _, err := b.IncrBy(ctx, "calls", 1, ttl); err != nil {
					t.Errorf("IncrBy: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := mustGet(t, ctx, b, "calls"); string(got) != strconv.Itoa(workers*each) {
		t.Fatalf("counter = %q, want %d", got, workers*each)
	}
	n, err := b.IncrBy(ctx, "calls", -(workers*each + 5), 0)
	if err != nil || n != -5 {
		t.Fatalf("IncrBy(negative) = %d, %v; want -5", n, err)
	}
	if n, err := b.IncrBy(ctx, "fresh", 7, 0); err != nil || n != 7 {
		t.Fatalf("IncrBy on a missing key = %d, %v; want 7", n, err)
	}
}

func testIncrByTTL(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	const ttl = 150 * time.Millisecond
	if n, err := b.IncrBy(ctx, "c", 1, ttl); err != nil || n != 1 {
		t.Fatalf("IncrBy = %d, %v", n, err)
	}
	if n, err := b.IncrBy(ctx, "c", 1, 0); err != nil || n != 2 { // keeps the ttl
		t.Fatalf("IncrBy = %d, %v", n, err)
	}
	poll(t, wait, "the counter to expire", func() bool { return isGone(t, ctx, b, "c") })
	if n, err := b.IncrBy(ctx, "c", 1, 0); err != nil || n != 1 {
		t.Fatalf("IncrBy after expiry = %d, %v; want 1", n, err)
	}
}

func testIncrByNotInteger(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	for _, v := range []string{"abc", "", "1.5", " 1", "+1", "007", "99999999999999999999"} {
		if err := b.Set(ctx, "nan", []byte(v), 0); err != nil {
			t.Fatal(err)
		}
		for _, ttl := range []time.Duration{0, time.Minute} {
			if _, err := b.IncrBy(ctx, "nan", 1, ttl); !errors.Is(err, bus.ErrNotInteger) {
				t.Errorf("IncrBy on %q (ttl %s): %v, want ErrNotInteger", v, ttl, err)
			}
		}
		if got := mustGet(t, ctx, b, "nan"); string(got) != v {
			t.Errorf("a failed IncrBy changed %q to %q", v, got)
		}
	}
	if err := b.Set(ctx, "max", []byte(strconv.FormatInt(math.MaxInt64, 10)), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.IncrBy(ctx, "max", 1, 0); !errors.Is(err, bus.ErrNotInteger) {
		t.Errorf("IncrBy past MaxInt64: %v, want ErrNotInteger", err)
	}
	if err := b.Set(ctx, "neg", []byte("-12"), 0); err != nil {
		t.Fatal(err)
	}
	if n, err := b.IncrBy(ctx, "neg", 2, 0); err != nil || n != -10 {
		t.Errorf("IncrBy on -12 = %d, %v", n, err)
	}
}

func testAllowRefuseRetry(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	l := bus.Limit{Rate: 1, Period: 200 * time.Millisecond, Burst: 4}
	capacity, interval := l.Capacity(), l.Interval()
	start := time.Now()
	allowed := 0
	var refused bus.Decision
	var refusedAt time.Time
	for i := 0; ; i++ {
		at := time.Now()
		d, err := b.Allow(ctx, "rl", l)
		if err != nil {
			t.Fatal(err)
		}
		if d.Limit != capacity {
			t.Fatalf("Limit = %d, want capacity %d", d.Limit, capacity)
		}
		if !d.Allowed {
			refused, refusedAt = d, at
			break
		}
		if d.RetryAfter != 0 || d.ResetAfter <= 0 || d.ResetAfter > time.Duration(i+1)*interval {
			t.Errorf("allowed request %d: RetryAfter %s, ResetAfter %s", i, d.RetryAfter, d.ResetAfter)
		}
		if i == 0 && d.Remaining != capacity-1 {
			t.Errorf("first request: Remaining %d, want %d", d.Remaining, capacity-1)
		}
		allowed++
		if allowed > 10*capacity {
			t.Fatal("never refused")
		}
	}
	if el := time.Since(start); el < interval {
		if allowed != capacity {
			t.Errorf("allowed %d in a burst of %s, want capacity %d", allowed, el, capacity)
		}
	} else if allowed < capacity {
		t.Errorf("allowed only %d, want at least %d", allowed, capacity)
	}
	if refused.Remaining != 0 || refused.RetryAfter <= 0 || refused.RetryAfter > interval {
		t.Errorf("refusal: Remaining %d, RetryAfter %s (want 0 < RetryAfter ≤ %s)", refused.Remaining, refused.RetryAfter, interval)
	}
	if refused.ResetAfter < refused.RetryAfter || refused.ResetAfter > time.Duration(capacity)*interval {
		t.Errorf("refusal: ResetAfter %s, want between RetryAfter %s and %s", refused.ResetAfter, refused.RetryAfter, time.Duration(capacity)*interval)
	}

	var again bus.Decision
	poll(t, refused.RetryAfter+wait, "a request to pass again", func() bool {
		d, err := b.Allow(ctx, "rl", l)
		if err != nil {
			t.Fatal(err)
		}
		again = d
		return d.Allowed
	})
	if waited := time.Since(refusedAt); waited < refused.RetryAfter-5*time.Millisecond {
		t.Errorf("allowed again after %s, before RetryAfter %s", waited, refused.RetryAfter)
	}
	if again.Remaining != 0 {
		t.Errorf("first request after waiting: Remaining %d, want 0 (one cell earned, one spent)", again.Remaining)
	}
}

func testAllowKeysIndependent(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	l := bus.Limit{Rate: 1, Period: time.Hour}
	if d, err := b.Allow(ctx, "a", l); err != nil || !d.Allowed {
		t.Fatalf("first Allow(a) = %+v, %v", d, err)
	}
	if d, err := b.Allow(ctx, "a", l); err != nil || d.Allowed {
		t.Fatalf("second Allow(a) = %+v, %v; want refused", d, err)
	} else if d.RetryAfter < 59*time.Minute {
		t.Errorf("RetryAfter %s, want about an hour", d.RetryAfter)
	}
	if d, err := b.Allow(ctx, "b", l); err != nil || !d.Allowed {
		t.Fatalf("Allow(b) after exhausting a = %+v, %v", d, err)
	}
	// Rate-limit state does not collide with Set/Get keys of the same name.
	if err := b.Set(ctx, "a", []byte("value"), 0); err != nil {
		t.Fatal(err)
	}
	if d, err := b.Allow(ctx, "a", l); err != nil || d.Allowed {
		t.Fatalf("Allow(a) after Set(a) = %+v, %v; want still refused", d, err)
	}
	if got := mustGet(t, ctx, b, "a"); string(got) != "value" {
		t.Fatalf("Get(a) = %q", got)
	}
}

func testAllowInvalidLimit(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	for _, l := range []bus.Limit{
		{},
		{Rate: 0, Period: time.Second},
		{Rate: -1, Period: time.Second},
		{Rate: 1, Period: 0},
		{Rate: 1, Period: -time.Second},
		{Rate: 1, Period: time.Second, Burst: -1},
		{Rate: 2_000_000, Period: time.Second}, // finer than a microsecond
		{Rate: 1, Period: 200 * 365 * 24 * time.Hour},
		{Rate: 1, Period: time.Hour, Burst: math.MaxInt},
	} {
		if d, err := b.Allow(ctx, "bad", l); !errors.Is(err, bus.ErrInvalid) {
			t.Errorf("Allow(%+v) = %+v, %v; want ErrInvalid", l, d, err)
		}
	}
}

func testInvalidArguments(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, bus.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}
	check("Set empty key", b.Set(ctx, "", []byte("x"), 0))
	check("Set negative ttl", b.Set(ctx, "k", []byte("x"), -time.Second))
	_, err := b.SetNX(ctx, "k", nil, -1)
	check("SetNX negative ttl", err)
	_, err = b.Get(ctx, "")
	check("Get empty key", err)
	check("Delete empty key", b.Delete(ctx, ""))
	_, err = b.CompareAndDelete(ctx, "", nil)
	check("CompareAndDelete empty key", err)
	_, err = b.Refresh(ctx, "k", nil, -time.Second)
	check("Refresh negative ttl", err)
	_, err = b.IncrBy(ctx, "", 1, 0)
	check("IncrBy empty key", err)
	_, err = b.Allow(ctx, "", bus.Limit{Rate: 1, Period: time.Second})
	check("Allow empty key", err)
	check("Publish empty channel", b.Publish(ctx, "", nil))
	_, err = b.Subscribe(ctx)
	check("Subscribe no channel", err)
	_, err = b.Subscribe(ctx, "ok", "")
	check("Subscribe empty channel", err)
}

func testCanceledContext(t *testing.T, b bus.Bus) {
	ctx, cancel := context.WithCancel(testContext(t))
	cancel()
	if _, err := b.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a canceled context: %v", err)
	}
	if err := b.Set(ctx, "k", nil, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Set with a canceled context: %v", err)
	}
	if _, err := b.Subscribe(ctx, "c"); !errors.Is(err, context.Canceled) {
		t.Errorf("Subscribe with a canceled context: %v", err)
	}
}

func testPing(t *testing.T, b bus.Bus) {
	if err := b.Ping(testContext(t)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func testCloseIdempotent(t *testing.T, b bus.Bus) {
	ctx := testContext(t)
	s := subscribe(t, ctx, b, "closing")
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	expectClosed(t, s)
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checks := map[string]error{
		"Ping":    b.Ping(ctx),
		"Publish": b.Publish(ctx, "c", nil),
		"Set":     b.Set(ctx, "k", nil, 0),
	}
	_, checks["Get"] = b.Get(ctx, "k")
	_, checks["SetNX"] = b.SetNX(ctx, "k", nil, 0)
	_, checks["IncrBy"] = b.IncrBy(ctx, "k", 1, 0)
	_, checks["Allow"] = b.Allow(ctx, "k", bus.Limit{Rate: 1, Period: time.Second})
	_, checks["Subscribe"] = b.Subscribe(ctx, "c")
	for op, err := range checks {
		if !errors.Is(err, bus.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", op, err)
		}
	}
}
