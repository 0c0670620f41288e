package inspect

// The child process.
//
// A plugin that crashes, hangs or calls exit in its entry points must not
// take the inspector with it, so the parent never dlopens a plugin: it runs
// its own executable again with childEnv set to a JSON request, and that
// process (RunChild, called first thing in main or TestMain) loads the one
// plugin, reads its structs and writes newline-delimited JSON messages to
// file descriptor 3: a {"stage": ...} line before each step that can crash
// and a {"result": ...} line at the end. The parent reads them with a size
// cap, kills the child at the deadline, and judges the facts (rules.go);
// the last stage names the step a crash or hang happened in. Descriptor 3
// rather than stdout, since plugins print there.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"
)

// childEnv carries the request to the child process.
const childEnv = "ACCELKIT_INSPECT_CHILD"

const (
	// stderrKeep is how much of the end of the child's stderr a Report
	// keeps: enough for a loader error or a plugin's last log lines.
	stderrKeep = 4 << 10
	// maxMessages caps what the parent reads from descriptor 3; a result
	// is a few KiB, attribute lists included (they are capped too).
	maxMessages = 1 << 20
	// DefaultTimeout is the time a child gets when Options.Timeout is 0:
	// real plugins load in well under a second without Init; with Init
	// they may probe devices.
	DefaultTimeout = 30 * time.Second
	// reapWait is how long the parent waits for descriptor 3 to reach EOF
	// after the child exits (a grandchild may hold it open).
	reapWait = time.Second
)

// request is what the parent asks of the child.
type request struct {
	Path    string   `json:"path"`
	Init    bool     `json:"init"`
	Preload []string `json:"preload,omitempty"`
	// PlatformSize is the SP_Platform struct_size to preset, the size of
	// the TensorFlow release the plugin is judged against.
	PlatformSize int `json:"platform_size"`
}

// message is one line the child writes.
type message struct {
	Stage  string       `json:"stage,omitempty"`
	Result *childResult `json:"result,omitempty"`
}

// childResult are the raw facts; the parent turns them into findings.
type childResult struct {
	PreloadErrors []string        `json:"preload_errors,omitempty"`
	DlopenError   string          `json:"dlopen_error,omitempty"`
	Symbols       map[string]bool `json:"symbols,omitempty"`
	APINull       bool            `json:"api_null,omitempty"`
	PJRT          *PJRTInfo       `json:"pjrt,omitempty"`
	AttrError     string          `json:"attr_error,omitempty"`
	Device        *DeviceInfo     `json:"device,omitempty"`
	Graph         *GraphInfo      `json:"graph,omitempty"`
	// StatusReadable is false when no TF_NewStatus was reachable from the
	// plugin, so a TF_Status could not be read back.
	StatusReadable bool   `json:"status_readable"`
	NameRaw        []byte `json:"name_raw,omitempty"`
	TypeRaw        []byte `json:"type_raw,omitempty"`
	DeviceTypeRaw  []byte `json:"device_type_raw,omitempty"`
	NameNull       bool   `json:"name_null,omitempty"`
	TypeNull       bool   `json:"type_null,omitempty"`
	DeviceTypeNull bool   `json:"device_type_null,omitempty"`
}

// RunChild turns the process into an inspector child when the parent
// started it as one, and never returns in that case; otherwise it returns
// at once. Call it first in main, and in TestMain of any test binary that
// calls Inspect without Options.Exe, since the parent re-executes its own
// executable (os.Executable) as the child.
func RunChild() {
	req := os.Getenv(childEnv)
	if req == "" {
		return
	}
	os.Unsetenv(childEnv) // not inherited by whatever the plugin starts
	out := os.NewFile(3, "inspect-results")
	if out == nil {
		fmt.Fprintln(os.Stderr, "inspect: child started without its result descriptor (3)")
		os.Exit(2)
	}
	var r request
	if err := json.Unmarshal([]byte(req), &r); err != nil {
		fmt.Fprintf(os.Stderr, "inspect: malformed child request: %v\n", err)
		os.Exit(2)
	}
	w := &childWriter{enc: json.NewEncoder(out)}
	res := childInspect(r, w)
	w.send(message{Result: &res})
	os.Exit(0)
}

type childWriter struct{ enc *json.Encoder }

func (w *childWriter) send(m message) {
	// A failed write means the parent is gone; nothing to tell anyone.
	_ = w.enc.Encode(m)
}

func (w *childWriter) stage(s string) { w.send(message{Stage: s}) }

// runChild starts the child for req and collects what it reported.
func runChild(ctx context.Context, exe string, req request, timeout time.Duration) (*childResult, ChildInfo, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, ChildInfo{}, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, ChildInfo{}, err
	}
	defer pr.Close()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(body), childGORACE())
	cmd.ExtraFiles = []*os.File{pw}
	var tail tailBuffer
	cmd.Stdout = &tail
	cmd.Stderr = &tail
	cmd.WaitDelay = reapWait
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, ChildInfo{}, fmt.Errorf("inspect: starting the child %s: %w", exe, err)
	}
	pw.Close()

	msgs := make(chan []message, 1)
	go func() { msgs <- readMessages(pr) }()
	waitErr := cmd.Wait()
	var got []message
	select {
	case got = <-msgs:
	case <-time.After(reapWait):
		pr.Close() // a grandchild holds the pipe; take what arrived
		got = <-msgs
	}

	info := ChildInfo{ExitCode: -1, Stderr: tail.String()}
	if ps := cmd.ProcessState; ps != nil {
		info.ExitCode = ps.ExitCode()
		info.Signal = signalOf(ps)
	}
	if info.Signal == "" && info.ExitCode == 2 {
		info.Signal = goSignal(info.Stderr)
	}
	if err := parent.Err(); err != nil {
		return nil, info, err // the caller gave up; the plugin is not to blame
	}
	info.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	var res *childResult
	for _, m := range got {
		if m.Stage != "" {
			info.Stage = m.Stage
		}
		if m.Result != nil {
			res = m.Result
		}
	}
	if res != nil && (info.ExitCode != 0 || info.TimedOut) {
		res = nil // a result from a child that then failed is not trusted
	}
	if waitErr != nil && res == nil && !info.TimedOut && info.ExitCode == -1 && info.Signal == "" {
		return nil, info, fmt.Errorf("inspect: waiting for the child: %w", waitErr)
	}
	return res, info, nil
}

// childGORACE keeps a race-enabled inspector's children from sleeping
// the race detector's default second at exit (atexit_sleep_ms), unless the
// user chose a value.
func childGORACE() string {
	g := os.Getenv("GORACE")
	if strings.Contains(g, "atexit_sleep_ms") {
		return "GORACE=" + g
	}
	return "GORACE=" + strings.TrimSpace(g+" atexit_sleep_ms=0")
}

// readMessages decodes the child's lines, up to maxMessages bytes; a line
// that is not a message ends the reading (a plugin wrote to descriptor 3).
func readMessages(r io.Reader) []message {
	var out []message
	sc := bufio.NewScanner(io.LimitReader(r, maxMessages))
	sc.Buffer(make([]byte, 64<<10), maxMessages)
	for sc.Scan() {
		var m message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			break
		}
		out = append(out, m)
	}
	io.Copy(io.Discard, r) // let the child finish writing
	return out
}

// tailBuffer keeps the first and the last stderrKeep/2 bytes written to
// it: the head holds a Go runtime crash's "[signal ...]" line, the tail a
// plugin's last words.
//
// Locking: mu guards all fields; exec copies stdout and stderr to it from
// two goroutines.
type tailBuffer struct {
	mu      sync.Mutex
	head    []byte
	tail    []byte
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := stderrKeep/2 - len(t.head); room > 0 {
		k := min(room, len(p))
		t.head = append(t.head, p[:k]...)
		p = p[k:]
	}
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - stderrKeep/2; over > 0 {
		t.tail = append(t.tail[:0], t.tail[over:]...)
		t.dropped = true
	}
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	sep := ""
	if t.dropped {
		sep = "\n[...]\n"
	}
	return cleanString(t.head, true) + sep + cleanString(t.tail, true)
}

// goSignal finds the signal the Go runtime reports when one arrives in C
// code: it catches the signal, prints "SIGSEGV: segmentation violation"
// (or "[signal SIGSEGV: segmentation violation code=...]" after a "fatal
// error" line) and exits with status 2, so the wait status does not show
// it.
func goSignal(stderr string) string {
	m := goSignalRE.FindStringSubmatch(stderr)
	if m == nil {
		return ""
	}
	return m[1]
}

var goSignalRE = regexp.MustCompile(`(?m)^\[?(?:signal )?(SIG[A-Z0-9]+: [a-z ]+?)(?: code=.*)?\]?$`)

// stageText is the child's last stage, for a message.
func stageText(s string) string {
	if s == "" {
		return "starting"
	}
	return strings.TrimSpace(s)
}
