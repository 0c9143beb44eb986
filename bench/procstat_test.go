package bench

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    ProcStat
		wantErr bool
	}{
		{name: "plain", in: "2427 (cat) R 2425 2425 28096 0 -1 4194304 101 0 0 0 150 50 0 0 20 0 7 0 301742 3133440 410 18446744073709551615 0 0",
			want: ProcStat{PID: 2427, CPU: 2 * time.Second, RSS: 410 * 4096, Threads: 7}},
		{name: "comm with spaces and parens", in: "77 (a (b) c) S 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 3 0 5 100 9 0",
			want: ProcStat{PID: 77, CPU: 30 * time.Millisecond, RSS: 9 * 4096, Threads: 3}},
		{name: "empty", in: "", wantErr: true},
		{name: "no comm", in: "12 S 1 2 3", wantErr: true},
		{name: "short", in: "12 (x) S 1 2 3", wantErr: true},
		{name: "bad pid", in: "x (y) S 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 3 0 5 100 9", wantErr: true},
		{name: "negative utime", in: "1 (y) S 1 1 1 0 -1 0 0 0 0 0 -1 2 0 0 20 0 3 0 5 100 9", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseProcStat([]byte(c.in), 4096)
			if c.wantErr {
				if !errors.Is(err, ErrProcFormat) {
					t.Fatalf("err = %v, want ErrProcFormat", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("2427 (cat) R 2425 2425 28096 0 -1 4194304 101 0 0 0 150 50 0 0 20 0 7 0 301742 3133440 410 1"))
	f.Add([]byte("1 ((() S"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseProcStat(b, 4096)
		if err == nil && (s.CPU < 0 || s.RSS < 0 || s.PID <= 0) {
			t.Fatalf("accepted nonsense: %+v", s)
		}
	})
}

func TestReadProcStatSelf(t *testing.T) {
	a, err := ReadProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if a.PID != os.Getpid() || a.RSS <= 0 || a.Threads < 1 {
		t.Fatalf("self stat %+v", a)
	}
	// Burn CPU until the kernel has charged at least 50 ms more to this process.
	deadline := time.Now().Add(5 * time.Second)
	x := 1.0
	var b ProcStat
	for {
		for i := 0; i < 1e6; i++ {
			x = x*1.0000001 + 1e-9
		}
		if b, err = ReadProcStat(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if b.CPU-a.CPU >= 50*time.Millisecond || time.Now().After(deadline) {
			break
		}
	}
	runtime.KeepAlive(x)
	if b.CPU-a.CPU < 50*time.Millisecond {
		t.Fatalf("CPU went from %v to %v while spinning", a.CPU, b.CPU)
	}
	if c := Cores(a, b); c <= 0 || c > float64(runtime.NumCPU())+0.5 {
		t.Errorf("cores = %v", c)
	}
	if _, err := ReadProcStat(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

func TestParseMachineCPU(t *testing.T) {
	m, err := ParseMachineCPU([]byte("cpu  100 10 40 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Total != 10*time.Second || m.Busy != 1500*time.Millisecond {
		t.Errorf("got %+v", m)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4", "cpu 1 2 x 4 5", "cpu 1 2"} {
		if _, err := ParseMachineCPU([]byte(bad)); !errors.Is(err, ErrProcFormat) {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
	a, err := ReadMachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	if a.Total <= 0 || a.Busy > a.Total {
		t.Errorf("machine %+v", a)
	}
	b := MachineCPU{Busy: a.Busy + time.Second, Total: a.Total + 4*time.Second}
	if f := BusyFraction(a, b); f != 0.25 {
		t.Errorf("busy fraction %v", f)
	}
}
