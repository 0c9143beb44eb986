package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc (proc(5)): 100 on every Linux
// architecture Go runs on (the kernel's own HZ is hidden from user space).
const clockTicks = 100

// ErrProcFormat is returned for /proc content that does not parse.
var ErrProcFormat = errors.New("bench: unexpected /proc format")

// ProcStat is one reading of a process's CPU time and memory from /proc/<pid>/stat.
type ProcStat struct {
	PID int       `json:"pid"`
	At  time.Time `json:"at"`
	// CPU is user plus system time, in USER_HZ resolution (10 ms).
	CPU time.Duration `json:"cpu_ns"`
	// RSS is the resident set in bytes.
	RSS     int64 `json:"rss_bytes"`
	Threads int   `json:"threads"`
}

// ReadProcStat reads /proc/<pid>/stat now.
func ReadProcStat(pid int) (ProcStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcStat{}, fmt.Errorf("bench: read /proc/%d/stat: %w", pid, err)
	}
	s, err := ParseProcStat(b, os.Getpagesize())
	s.At = time.Now()
	return s, err
}

// ParseProcStat parses the content of /proc/<pid>/stat (proc(5)). The command name in
// parentheses may hold spaces and parentheses itself, so the fields are counted from the last
// ')'. RSS is reported in pages and converted with pageSize.
func ParseProcStat(b []byte, pageSize int) (ProcStat, error) {
	var s ProcStat
	open := bytes.IndexByte(b, '(')
	rparen := bytes.LastIndexByte(b, ')')
	if open <= 0 || rparen < open {
		return s, fmt.Errorf("%w: no (comm) in stat", ErrProcFormat)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil || pid <= 0 {
		return s, fmt.Errorf("%w: pid %q", ErrProcFormat, bytes.TrimSpace(b[:open]))
	}
	s.PID = pid
	// Fields after the comm: 3 state, 4 ppid, … 14 utime, 15 stime, 20 num_threads, 24 rss.
	f := bytes.Fields(b[rparen+1:])
	field := func(n int) (int64, error) {
		i := n - 3
		if i >= len(f) {
			return 0, fmt.Errorf("%w: stat has %d fields, want %d", ErrProcFormat, len(f)+2, n)
		}
		v, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%w: field %d is %q", ErrProcFormat, n, f[i])
		}
		return v, nil
	}
	var ut, st, th, rss int64
	for _, x := range []struct {
		n   int
		dst *int64
	}{{14, &ut}, {15, &st}, {20, &th}, {24, &rss}} {
		if *x.dst, err = field(x.n); err != nil {
			return ProcStat{}, err
		}
	}
	if ut > 1<<40 || st > 1<<40 || rss > 1<<40 {
		return ProcStat{}, fmt.Errorf("%w: implausible values", ErrProcFormat)
	}
	s.CPU = time.Duration(ut+st) * (time.Second / clockTicks)
	s.RSS = rss * int64(pageSize)
	s.Threads = int(th)
	return s, nil
}

// MachineCPU is one reading of the whole machine's CPU time from /proc/stat, summed over every
// core.
type MachineCPU struct {
	At    time.Time     `json:"at"`
	Busy  time.Duration `json:"busy_ns"`  // every state but idle and iowait
	Total time.Duration `json:"total_ns"` // every state
}

// ReadMachineCPU reads /proc/stat now.
func ReadMachineCPU() (MachineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, fmt.Errorf("bench: read /proc/stat: %w", err)
	}
	m, err := ParseMachineCPU(b)
	m.At = time.Now()
	return m, err
}

// ParseMachineCPU parses the aggregate "cpu" line of /proc/stat: user nice system idle iowait
// irq softirq steal (guest times are already inside user and nice, so they are not added).
func ParseMachineCPU(b []byte) (MachineCPU, error) {
	line := b
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		line = b[:i]
	}
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return MachineCPU{}, fmt.Errorf("%w: no aggregate cpu line", ErrProcFormat)
	}
	var total, idle int64
	for i := 1; i < len(f) && i <= 8; i++ {
		v, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil || v < 0 {
			return MachineCPU{}, fmt.Errorf("%w: cpu field %d is %q", ErrProcFormat, i, f[i])
		}
		total += v
		if i == 4 || i == 5 {
			idle += v
		}
	}
	tick := time.Second / clockTicks
	return MachineCPU{Busy: time.Duration(total-idle) * tick, Total: time.Duration(total) * tick}, nil
}

// Cores returns the average number of cores a process used between two readings.
func Cores(a, b ProcStat) float64 {
	wall := b.At.Sub(a.At)
	if wall <= 0 {
		return 0
	}
	return float64(b.CPU-a.CPU) / float64(wall)
}

// BusyFraction returns the fraction (0–1) of the machine's CPU time that was busy between two
// readings.
func BusyFraction(a, b MachineCPU) float64 {
	t := b.Total - a.Total
	if t <= 0 {
		return 0
	}
	return float64(b.Busy-a.Busy) / float64(t)
}
