package main

import (
	"bytes"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/bench"
)

func parse(t *testing.T, args ...string) (bench.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o options
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return o.config(given, io.Discard)
}

func TestConfig(t *testing.T) {
	cfg, err := parse(t, "--profile", "standard", "--capacity-steps", "5, 50,200", "--rate-steps", "10,150", "--llm-first-token", "300ms")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Scenarios, []string{"latency", "capacity", "rate", "webrtc"}) {
		t.Errorf("scenarios %v", cfg.Scenarios)
	}
	if !reflect.DeepEqual(cfg.CapacitySteps, []int{5, 50, 200}) || !reflect.DeepEqual(cfg.RateSteps, []float64{10, 150}) {
		t.Errorf("steps %v %v", cfg.CapacitySteps, cfg.RateSteps)
	}
	if cfg.Latencies.LLMFirstToken != 300*time.Millisecond || cfg.Latencies.TTSFirstByte != 150*time.Millisecond || cfg.Latencies.LLMTokensPerSec != 60 {
		t.Errorf("latencies %+v", cfg.Latencies)
	}
	cfg, err = parse(t, "--profile", "standard", "--scenarios", "rate")
	if err != nil || !reflect.DeepEqual(cfg.Scenarios, []string{"rate"}) {
		t.Errorf("explicit scenarios lost to the profile: %v %v", cfg.Scenarios, err)
	}
	cfg, err = parse(t, "--profile", "rate")
	if err != nil || !reflect.DeepEqual(cfg.Scenarios, []string{"rate"}) || !reflect.DeepEqual(cfg.RateSteps, []float64{150, 200, 300, 400, 500, 600, 800, 1000}) {
		t.Errorf("rate profile: %v %v %v", cfg.Scenarios, cfg.RateSteps, err)
	}
	cfg, err = parse(t, "--profile", "rate", "--rate-steps", "50,60")
	if err != nil || !reflect.DeepEqual(cfg.RateSteps, []float64{50, 60}) {
		t.Errorf("rate profile with steps given: %v %v", cfg.RateSteps, err)
	}
	for _, bad := range [][]string{{"--profile", "huge"}, {"--capacity-steps", "5,x"}, {"--rate-steps", "-1"}} {
		if _, err := parse(t, bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestRunUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb); code != 0 {
		t.Errorf("--help exited %d", code)
	}
	if code := run([]string{"--nope"}, &out, &errb); code != 2 {
		t.Errorf("a bad flag exited %d", code)
	}
	errb.Reset()
	if code := run([]string{"--base-url", "http://127.0.0.1:1"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--api-key") {
		t.Errorf("attach without a key exited %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"--scenarios", "latency", "--profile", "x"}, &out, &errb); code != 2 {
		t.Errorf("a bad profile exited %d", code)
	}
}

func TestEnvList(t *testing.T) {
	var e envList
	if err := e.Set("PARLEY_X=1"); err != nil {
		t.Fatal(err)
	}
	if err := e.Set("nokey"); err == nil {
		t.Error("accepted a value without =")
	}
	if err := e.Set("=v"); err == nil {
		t.Error("accepted an empty key")
	}
	if e.String() != "PARLEY_X=1" {
		t.Errorf("%q", e.String())
	}
}

func TestRenderFromJSON(t *testing.T) {
	dir := t.TempDir()
	base := dir + "/r/latest"
	rep := &bench.Report{Machine: bench.ThisMachine(), Parley: bench.ParleyBuild{Commit: "abc"}, Valid: true}
	if err := rep.WriteFiles(base); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--from-json", base + ".json", "--out", dir + "/again/latest"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if code := run([]string{"--from-json", dir + "/nope.json", "--out", dir + "/x"}, &out, &errb); code != 1 {
		t.Errorf("a missing JSON exited %d", code)
	}
}
