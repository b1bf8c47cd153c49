//go:build linux

package insandbox

// Sessions are long-lived shells in which commands run one after another,
// so that cd, export and functions persist between them.
//
// The init starts the shell with its stdin a control pipe, stdout and
// stderr pipes, and descriptor 3 a status pipe. For each command it writes
// a few lines to the control pipe: the command text in a variable, then
// `command eval` of it (inside a function, except in bash: see
// sessionPrelude) with stdin from /dev/null and descriptor 3 closed, then
// a per-command random marker on stdout and on stderr, then "TOKEN STATUS"
// on descriptor 3. Everything the pipes carry up to the markers is the
// command's output; the status line ends the command. The command runs in
// the shell itself, not in a subshell: that is what makes state persist.
//
// A timeout (or the host going away) kills every process in the shell's
// session that was started after the command began, leaving the shell and
// background jobs of earlier commands alone. A non-interactive shell then
// goes on with the rest of the command line, so until the shell reports
// the status, whatever it starts is killed at once and whatever it prints
// is dropped; builtins in the rest of the line still run. If the shell does
// not report back within sessionKillGrace (a builtin loop such as
// `while :; do :; done`), it is killed with everything it started and a
// fresh one takes its place: the session's state is lost and the result
// says so (Restarted).

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

var sessionNameRe = regexp.MustCompile(wire.SessionNamePattern)

const (
	// shellStartTimeout bounds the wait for a new shell to report ready.
	shellStartTimeout = 10 * time.Second
	// sessionKillGrace is how long a shell has to report a command's status
	// after the command's processes were killed, before it is replaced.
	sessionKillGrace = 2 * time.Second
	// sessionKillEvery is how often a stopped command's new processes are
	// killed while the shell finishes the command line.
	sessionKillEvery = 20 * time.Millisecond
	// markerGrace is how long the output markers may trail the status
	// line. The shell writes them first, so only a command that moved the
	// shell's own stdout or stderr (exec >file) makes this wait expire.
	markerGrace = 500 * time.Millisecond
	// maxStatusLine bounds a line on the status pipe.
	maxStatusLine = 256
)

// sessionPrelude runs once in every new shell. The function keeps a
// `return` in a command from ending ash and dash, which treat a top-level
// return as exit; bash runs commands at top level instead, where return is
// a harmless error, so that declare and typeset create globals there.
const sessionPrelude = `__boxd_eval() { command eval "$__boxd_cmd"; }
if [ -n "${BASH_VERSION-}" ]; then command printf 'ready bash\n' >&3; else command printf 'ready sh\n' >&3; fi
`

type sessionTable struct {
	mu       sync.Mutex
	sessions map[string]*session
}

var sessionTables sync.Map // *Server -> *sessionTable

func (s *Server) sessions() *sessionTable {
	if t, ok := sessionTables.Load(s); ok {
		return t.(*sessionTable)
	}
	t, _ := sessionTables.LoadOrStore(s, &sessionTable{sessions: make(map[string]*session)})
	return t.(*sessionTable)
}

func (t *sessionTable) get(name string) (*session, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ss := t.sessions[name]; ss != nil && ss.ready() {
		return ss, nil
	}
	return nil, &wire.RemoteError{Code: wire.CodeNotFound, Message: fmt.Sprintf("no session %q", name)}
}

// drop removes ss if it is still the session of its name.
func (t *sessionTable) drop(ss *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessions[ss.spec.Name] == ss {
		delete(t.sessions, ss.spec.Name)
	}
}

type session struct {
	spec    wire.SessionSpec
	user    string // shown in its info: the spec's, else the default (shownUser)
	created time.Time
	sem     chan struct{} // holds a token while a command runs

	mu       sync.Mutex
	sh       *shell // nil while the first shell starts
	commands int64
	restarts int64
	ended    bool
}

// ready: its shell has started and has not died.
func (ss *session) ready() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.sh != nil && !ss.ended && !ss.sh.exited()
}

// dead: removed, ended by a command, or its shell died while idle (killed
// from inside the sandbox, say).
func (ss *session) dead() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.ended || (ss.sh != nil && ss.sh.exited())
}

func (ss *session) info() wire.SessionInfo {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	info := wire.SessionInfo{
		Name: ss.spec.Name, Shell: ss.spec.Shell, User: ss.user, Created: ss.created,
		Busy: len(ss.sem) > 0, Commands: ss.commands, Restarts: ss.restarts,
	}
	if ss.sh != nil {
		info.PID = ss.sh.cmd.child.pid
	}
	return info
}

// shell is one running shell of a session.
type shell struct {
	cmd    *procCmd    // stdin: control pipe; extra[0]: status pipe
	bash   bool        // run commands at top level
	status chan string // status lines; closed when the status pipe ends
	cur    atomic.Pointer[sessionCmd]
	pumps  sync.WaitGroup
	gone   chan struct{} // closed once the shell exited and its output drained
}

func (sh *shell) pid() int { return sh.cmd.child.pid }

func (sh *shell) exited() bool {
	select {
	case <-sh.cmd.child.done:
		return true
	default:
		return false
	}
}

// kill kills the shell and everything in its session.
func (sh *shell) kill() { sh.cmd.kill() }

func (s *Server) sessionCreate(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var spec wire.SessionSpec
	if err := decodeProcArgs(req, &spec); err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	if !sessionNameRe.MatchString(spec.Name) {
		s.replyError(fw, req.Op, fmt.Errorf("%w: session name %q does not match %s", wire.ErrInvalid, spec.Name, wire.SessionNamePattern))
		return
	}
	if spec.Shell == "" {
		spec.Shell = "sh"
	}
	if err := validateExec(&wire.ExecRequest{Args: []string{spec.Shell}, Env: spec.Env, Dir: spec.Dir}); err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	t := s.sessions()
	ss := &session{spec: spec, user: s.shownUser(spec.User), created: time.Now(), sem: make(chan struct{}, 1)}
	t.mu.Lock()
	for name, old := range t.sessions {
		// A busy one is still being dealt with by its command.
		if len(old.sem) == 0 && old.dead() {
			delete(t.sessions, name)
		}
	}
	switch {
	case t.sessions[spec.Name] != nil:
		t.mu.Unlock()
		s.replyError(fw, req.Op, &wire.RemoteError{Code: wire.CodeAlreadyExists, Message: fmt.Sprintf("session %q already exists", spec.Name)})
		return
	case len(t.sessions) >= wire.MaxSessions:
		t.mu.Unlock()
		s.replyError(fw, req.Op, &wire.RemoteError{Code: wire.CodeResourceExhausted, Message: fmt.Sprintf("%d sessions exist, the most a sandbox may have", wire.MaxSessions)})
		return
	}
	t.sessions[spec.Name] = ss // reserves the name while the shell starts
	t.mu.Unlock()

	sh, err := s.startShell(&ss.spec)
	if err != nil {
		t.drop(ss)
		s.replyError(fw, fmt.Sprintf("%s %q", req.Op, spec.Name), err)
		return
	}
	ss.mu.Lock()
	ss.sh = sh
	ss.mu.Unlock()
	fw.WriteJSON(wire.FrameResult, ss.info())
}

// startShell starts a session's shell and waits until it is ready.
func (s *Server) startShell(spec *wire.SessionSpec) (*shell, error) {
	env, dir, u, err := s.processEnv(spec.User, spec.Env, spec.Dir, false)
	if err != nil {
		return nil, err
	}
	path, err := lookPath(spec.Shell, env)
	if err != nil {
		return nil, &wire.RemoteError{Code: wire.CodeNotFound, Message: fmt.Sprintf("shell %q: %v", spec.Shell, err)}
	}
	cmd, err := s.spawnProcess(&spawnSpec{path: path, args: []string{spec.Shell}, env: env, dir: dir, user: u, stdin: true, extra: 1})
	if err != nil {
		if sf, ok := err.(*startFailure); ok {
			return nil, &wire.RemoteError{Code: wire.CodeInvalidArgument, Message: fmt.Sprintf("shell %q: %v", spec.Shell, sf.err)}
		}
		return nil, err
	}
	if !s.track(cmd.child, cmd.reaper) {
		cmd.kill()
	}
	sh := &shell{cmd: cmd, status: make(chan string, 16), gone: make(chan struct{})}
	go sh.readStatus()
	sh.pumps.Add(2)
	go sh.pump(cmd.stdout, 0)
	go sh.pump(cmd.stderr, 1)
	go func() {
		<-cmd.child.done
		s.untrack(cmd.child)
		// The shell is gone: the session ends with an error, so output
		// still unread at the limit has no result to be reported in.
		drainOutputs(&sh.pumps, cmd.closeOutputs, cmd.outputs()...)
		closeFiles(cmd.stdin)
		close(sh.gone)
	}()

	fail := func(format string, args ...any) (*shell, error) {
		sh.kill()
		<-sh.gone
		return nil, &wire.RemoteError{Code: wire.CodeInvalidArgument, Message: fmt.Sprintf("shell %q: ", spec.Shell) + fmt.Sprintf(format, args...)}
	}
	deadline := time.Now().Add(shellStartTimeout)
	if err := writeProcInput(cmd.stdin, []byte(sessionPrelude), func() bool { return sh.exited() || time.Now().After(deadline) }); err != nil {
		return fail("does not read commands: %v", err)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case line, ok := <-sh.status:
		if ok && (line == "ready sh" || line == "ready bash") {
			sh.bash = line == "ready bash"
			return sh, nil
		}
		return fail("did not start as a POSIX shell")
	case <-sh.gone:
		return fail("exited at start (%s)", exitDescription(cmd.child))
	case <-timer.C:
		return fail("not ready after %v", shellStartTimeout)
	}
}

func exitDescription(c *child) string {
	switch ws := c.status; {
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		return "killed by " + ws.Signal().String()
	}
	return "unknown status"
}

// readStatus passes the status pipe's lines on; overlong lines are dropped
// (only a command meddling with the pipe writes them).
func (sh *shell) readStatus() {
	defer close(sh.status)
	r := bufio.NewReaderSize(sh.cmd.extra[0], maxStatusLine)
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			return
		}
		select {
		case sh.status <- string(bytes.TrimSuffix(line, []byte("\n"))):
		default: // nobody is waiting for that many lines: not ours
		}
	}
}

func (sh *shell) pump(r *os.File, stream int) {
	defer sh.pumps.Done()
	buf := chunkPool.Get().(*[wire.DataChunk]byte)
	defer chunkPool.Put(buf)
	for {
		n, err := r.Read(buf[:])
		if n > 0 {
			// Output while no command runs comes from background jobs of
			// earlier commands; nobody asked for it.
			if c := sh.cur.Load(); c != nil {
				c.feed(stream, buf[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

// sessionCmd is one command while it runs in a shell.
type sessionCmd struct {
	marker  []byte
	fw      *wire.FrameWriter
	markers chan int // receives each stream whose marker was seen

	outMu     sync.Mutex
	outLeft   int64
	truncated bool
	broken    atomic.Bool
	mute      atomic.Bool // stopped: output is no longer the command's

	streams [2]struct {
		mu      sync.Mutex
		pending []byte // a tail that may be the start of the marker
		done    bool   // marker seen or command finished
	}
}

// feed takes output of one stream, up to the command's marker.
func (c *sessionCmd) feed(stream int, p []byte) {
	st := &c.streams[stream]
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return
	}
	data := append(st.pending, p...)
	if i := bytes.Index(data, c.marker); i >= 0 {
		c.emit(stream, data[:i])
		st.pending, st.done = nil, true
		c.markers <- stream
		return
	}
	// Hold back only a tail that could be the marker's beginning.
	keep := min(len(data), len(c.marker)-1)
	for keep > 0 && !bytes.HasPrefix(c.marker, data[len(data)-keep:]) {
		keep--
	}
	c.emit(stream, data[:len(data)-keep])
	st.pending = append([]byte(nil), data[len(data)-keep:]...)
}

// finish stops output for the command; held-back bytes are output after
// all when no marker came. No frame is written for c after it returns.
func (c *sessionCmd) finish() {
	for i := range c.streams {
		st := &c.streams[i]
		st.mu.Lock()
		if !st.done {
			c.emit(i, st.pending)
			st.pending, st.done = nil, true
		}
		st.mu.Unlock()
	}
}

func (c *sessionCmd) emit(stream int, p []byte) {
	c.outMu.Lock()
	if int64(len(p)) > c.outLeft {
		p = p[:c.outLeft]
		c.truncated = true
	}
	c.outLeft -= int64(len(p))
	c.outMu.Unlock()
	if len(p) == 0 || c.broken.Load() || c.mute.Load() {
		return
	}
	t := wire.FrameStdout
	if stream == 1 {
		t = wire.FrameStderr
	}
	if c.fw.WriteFrame(t, p) != nil {
		c.broken.Store(true)
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func randomToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) sessionExec(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var sc wire.SessionCommand
	if err := decodeProcArgs(req, &sc); err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	op := fmt.Sprintf("%s %q", req.Op, sc.Name)
	switch {
	case strings.TrimSpace(sc.Command) == "":
		s.replyError(fw, op, fmt.Errorf("%w: empty command", wire.ErrInvalid))
		return
	case len(sc.Command) > wire.MaxSessionCommand || strings.IndexByte(sc.Command, 0) >= 0:
		s.replyError(fw, op, fmt.Errorf("%w: command longer than %d bytes or containing NUL", wire.ErrInvalid, wire.MaxSessionCommand))
		return
	case sc.Timeout < 0 || sc.OutputLimit < 0:
		s.replyError(fw, op, fmt.Errorf("%w: negative timeout or output limit", wire.ErrInvalid))
		return
	}
	t := s.sessions()
	ss, err := t.get(sc.Name)
	if err != nil {
		s.replyError(fw, op, err)
		return
	}
	hangup := make(chan struct{})
	go func() {
		fr.ReadFrame() // the host sends nothing more: any return is a hang-up
		close(hangup)
	}()
	// One command at a time; later ones queue.
	select {
	case ss.sem <- struct{}{}:
	case <-hangup:
		return
	}
	defer func() { <-ss.sem }()
	ss.mu.Lock()
	sh, ended := ss.sh, ss.ended
	ss.commands++
	ss.mu.Unlock()
	if ended || sh.exited() {
		s.replyError(fw, op, &wire.RemoteError{Code: wire.CodeNotFound, Message: fmt.Sprintf("session %q has ended", sc.Name)})
		return
	}
	limit := sc.OutputLimit
	if limit == 0 {
		limit = wire.DefaultOutputLimit
	}
	res, abandoned := s.runInShell(ss, sh, &sc, fw, limit, hangup)
	if !abandoned {
		if err := fw.WriteJSON(wire.FrameResult, res); err != nil {
			s.logf("%s: send result: %v", op, err)
		}
	}
}

// runInShell runs one command and handles its timeout, the host leaving
// and the shell dying.
func (s *Server) runInShell(ss *session, sh *shell, sc *wire.SessionCommand, fw *wire.FrameWriter, limit int64, hangup <-chan struct{}) (res wire.SessionResult, abandoned bool) {
	token := randomToken()
	c := &sessionCmd{marker: []byte("__boxd_end_" + token + "__"), fw: fw, markers: make(chan int, 2), outLeft: limit}
	w := &shellWait{sh: sh, c: c, since: markNow(), token: token}
	res.Started = time.Now()
	sh.cur.Store(c)
	defer sh.cur.CompareAndSwap(c, nil)
	defer w.stopTimers()
	wrote := make(chan error, 1)
	go func() {
		wrote <- writeProcInput(sh.cmd.stdin, []byte(shellScript(sh.bash, token, string(c.marker), sc.Command)), func() bool {
			select {
			case <-sh.gone:
				return true
			default:
				return false
			}
		})
	}()
	exitCode := w.wait(s, ss, sc.Timeout, hangup, wrote)
	if exitCode >= 0 {
		c.awaitMarkers()
	}
	c.finish()
	res.Ended = time.Now()
	res.Truncated = c.truncated
	res.TimedOut = w.timedOut
	switch {
	case res.TimedOut:
		res.ExitCode = wire.ExitTimeout
	case exitCode >= 0:
		res.ExitCode = exitCode
	default:
		// The shell exited during the command (exit, or killed): the
		// shell's status is the command's.
		<-sh.gone
		res.ExitCode = procResult(sh.cmd.child, res.Started, res.Ended, false, false).ExitCode
	}
	if exitCode < 0 {
		s.settleShell(ss, sh, &res, w.abandoned)
	}
	return res, w.abandoned
}

// shellScript is what the session's shell reads for one command: the
// command in a variable, evaluated with no stdin, then the end markers on
// stdout and stderr and the token and exit status on descriptor 3.
func shellScript(bash bool, token, marker, command string) string {
	wrap := "__boxd_eval"
	if bash {
		wrap = `{ command eval "$__boxd_cmd"; }`
	}
	return "__boxd_cmd=" + shellQuote(command) + "\n" +
		wrap + " </dev/null 3>&-\n" +
		"__boxd_rc=$?; command printf '%s' '" + marker + "'; command printf '%s' '" + marker + "' >&2; " +
		"command printf '" + token + " %d\\n' \"$__boxd_rc\" >&3\n"
}

// shellWait is one session command's wait for its shell's report.
type shellWait struct {
	sh        *shell
	c         *sessionCmd
	since     procMark // start of the command: session members started after it are its own
	token     string
	timedOut  bool
	abandoned bool

	graceTimer *time.Timer
	killTicker *time.Ticker
	killGrace  <-chan time.Time
	killTick   <-chan time.Time
}

// stopCommand stops the running command. The shell goes on with the rest
// of the command line after its current program is killed (a
// non-interactive shell cannot be made to abandon it), so this keeps
// killing what it starts, and drops what it prints, until it reports back.
func (w *shellWait) stopCommand() {
	w.c.mute.Store(true)
	killSessionMembers(w.sh.pid(), w.since)
	if w.graceTimer == nil {
		w.graceTimer = time.NewTimer(sessionKillGrace)
		w.killGrace = w.graceTimer.C
		w.killTicker = time.NewTicker(sessionKillEvery)
		w.killTick = w.killTicker.C
	}
}

func (w *shellWait) stopTimers() {
	if w.graceTimer != nil {
		w.graceTimer.Stop()
		w.killTicker.Stop()
	}
}

// wait returns the command's exit status as the shell reported it, or -1
// if the shell did not (it exited, or was replaced).
func (w *shellWait) wait(s *Server, ss *session, timeout time.Duration, hangup <-chan struct{}, wrote <-chan error) int {
	var tc <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		tc = t.C
	}
	status := w.sh.status
	for {
		select {
		case err := <-wrote:
			if err != nil && !w.sh.exited() {
				s.logf("session %q: write command: %v", ss.spec.Name, err)
			}
		case line, ok := <-status:
			if !ok {
				// The status pipe is gone: the shell is exiting.
				status = nil
				continue
			}
			tok, code, found := strings.Cut(line, " ")
			if n, err := strconv.Atoi(code); found && tok == w.token && err == nil {
				return n
			}
		case <-w.sh.gone:
			return -1
		case <-tc:
			tc, w.timedOut = nil, true
			w.stopCommand()
		case <-hangup:
			hangup, w.abandoned = nil, true
			w.stopCommand()
		case <-w.killTick:
			killSessionMembers(w.sh.pid(), w.since)
		case <-w.killGrace:
			// Nothing killable ran the command (a builtin loop, say):
			// only replacing the shell stops it.
			w.sh.kill()
			<-w.sh.gone
			return -1
		}
	}
}

// awaitMarkers waits briefly for the end markers on stdout and stderr. The
// shell wrote them before the status line; they only fail to come if the
// command moved the shell's stdout or stderr.
func (c *sessionCmd) awaitMarkers() {
	grace := time.NewTimer(markerGrace)
	defer grace.Stop()
	for seen := 0; seen < 2; seen++ {
		select {
		case <-c.markers:
		case <-grace.C:
			return
		}
	}
}

// settleShell deals with a shell that did not report a command's end: a
// timed-out or abandoned command's shell is replaced; otherwise, or if
// that fails, the session ends.
func (s *Server) settleShell(ss *session, sh *shell, res *wire.SessionResult, abandoned bool) {
	if res.TimedOut || abandoned {
		res.Restarted = s.restartShell(ss, sh)
	}
	if !res.Restarted {
		res.SessionEnded = true
		ss.mu.Lock()
		ss.ended = true
		ss.mu.Unlock()
		s.sessions().drop(ss)
	}
}

// restartShell replaces a session's dead shell with a fresh one.
func (s *Server) restartShell(ss *session, old *shell) bool {
	sh, err := s.startShell(&ss.spec)
	if err != nil {
		s.logf("session %q: restart shell: %v", ss.spec.Name, err)
		return false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended || ss.sh != old {
		sh.kill() // removed meanwhile
		return false
	}
	ss.sh = sh
	ss.restarts++
	return true
}

func (s *Server) sessionList(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	t := s.sessions()
	t.mu.Lock()
	var all []*session
	for _, ss := range t.sessions {
		all = append(all, ss)
	}
	t.mu.Unlock()
	infos := []wire.SessionInfo{}
	for _, ss := range all {
		if ss.ready() {
			infos = append(infos, ss.info())
		}
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	fw.WriteJSON(wire.FrameResult, infos)
}

// sessionRemove kills the session's shell and everything in its session;
// a command still running ends with SessionEnded.
func (s *Server) sessionRemove(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var ref wire.SessionRef
	if err := decodeProcArgs(req, &ref); err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	t := s.sessions()
	ss, err := t.get(ref.Name)
	if err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	ss.mu.Lock()
	ss.ended = true
	sh := ss.sh
	ss.mu.Unlock()
	t.drop(ss)
	sh.kill()
	<-sh.gone
	fw.WriteFrame(wire.FrameOK, nil)
}

// clockTicks is the unit of starttime in /proc/PID/stat: USER_HZ, which
// is 100 on every architecture Linux runs containers on.
const clockTicks = 100

// procMark is a point in the order processes are created: a tick of
// CLOCK_BOOTTIME (what starttime in /proc/PID/stat counts, offset alike
// by a time namespace) and the last pid allocated in our pid namespace.
type procMark struct {
	tick    uint64
	lastPid int
}

func markNow() procMark {
	var m procMark
	if b, err := os.ReadFile("/proc/sys/kernel/ns_last_pid"); err == nil {
		m.lastPid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err == nil {
		m.tick = uint64(ts.Nano()) / (1e9 / clockTicks)
	}
	return m
}

// after reports whether a process that started at tick start with pid
// pid was created after m. Within m's tick, pids tell: they are allocated
// in increasing order (a wrap of the whole pid space within 10 ms aside).
// Without ns_last_pid every process of that tick counts as later.
func (m procMark) after(start uint64, pid int) bool {
	return start > m.tick || (start == m.tick && pid > m.lastPid)
}

// sessionProc identifies a process across pid reuse.
type sessionProc struct {
	pid   int
	start uint64 // clock ticks after boot
}

// sessionMembers lists the live processes of session sid, its leader
// aside, created after mark. Comparing creation order rather than listing
// the session beforehand keeps /proc scans off every command's path.
func sessionMembers(sid int, mark procMark) []sessionProc {
	var out []sessionProc
	d, err := os.Open("/proc")
	if err != nil {
		return out
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == sid {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		// After ") ": state ppid pgrp session ...; starttime is field 22.
		f := bytes.Fields(b[i+1:])
		if len(f) < 20 || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue
		}
		if s, err := strconv.Atoi(string(f[3])); err != nil || s != sid {
			continue
		}
		start, err := strconv.ParseUint(string(f[19]), 10, 64)
		if err != nil || !mark.after(start, pid) {
			continue
		}
		out = append(out, sessionProc{pid, start})
	}
	return out
}

// killSessionMembers SIGKILLs the processes of session sid created after
// mark, rescanning until a pass finds nobody new (members may fork while
// we scan).
func killSessionMembers(sid int, mark procMark) {
	seen := map[sessionProc]bool{}
	for range 32 {
		fresh := false
		for _, p := range sessionMembers(sid, mark) {
			if !seen[p] {
				seen[p], fresh = true, true
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
		if !fresh {
			return
		}
	}
}
