package bench

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Machine describes where a benchmark ran.
type Machine struct {
	Cores     int    `json:"cores"`
	CPUModel  string `json:"cpu_model"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	MemoryMB  int64  `json:"memory_mb"`
}

// ThisMachine reads the machine's description from /proc.
func ThisMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), CPUModel: "unknown", Kernel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(b)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemoryMB = memTotalMB(b)
	}
	return m
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel(cpuinfo []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			if v = strings.TrimSpace(v); v != "" {
				return v
			}
		}
	}
	return "unknown"
}

func memTotalMB(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			var kb int64
			for _, ch := range f[1] {
				if ch < '0' || ch > '9' {
					return 0
				}
				kb = kb*10 + int64(ch-'0')
			}
			return kb / 1024
		}
	}
	return 0
}

// ParleyBuild is the version and commit of the Parley binary measured.
type ParleyBuild struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Tree is the git commit of the working tree the harness ran in, with "-dirty" when it
	// had uncommitted changes (empty outside a repository).
	Tree string `json:"tree,omitempty"`
}

var versionLine = regexp.MustCompile(`^parley (\S+) \(commit ([^,\s]+)`)

// parseVersion reads `parley version` output: "parley v1.2 (commit abc, go1.26, linux/amd64)".
func parseVersion(out string) (version, commit string) {
	m := versionLine.FindStringSubmatch(strings.TrimSpace(out))
	if m == nil {
		return "unknown", "unknown"
	}
	return m[1], m[2]
}

// BuildOf asks the binary for its version and the working tree for its commit.
func BuildOf(ctx context.Context, parleyBin string) ParleyBuild {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b := ParleyBuild{Version: "unknown", Commit: "unknown"}
	if parleyBin != "" {
		if out, err := exec.CommandContext(ctx, parleyBin, "version").Output(); err == nil {
			b.Version, b.Commit = parseVersion(string(out))
		}
	}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		b.Tree = strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			b.Tree += "-dirty"
		}
	}
	return b
}
