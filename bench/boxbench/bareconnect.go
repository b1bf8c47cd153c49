//go:build linux

package main

// The transport's own floor: a ConnectRPC server with no boxd code in it
// (connect-go's standard health handler behind Go's HTTP/2 server, with
// boxd's HTTP/2 settings, on a Unix socket), run as a process of its own
// like boxd. A call that does nothing there is what any call to boxd pays
// before boxd's code runs: the exec-floor row sets boxd's part next to it.
//
// The same server also answers SandboxService.Exec the barest way an exec
// can cross boxd's two hops: it hands the command, over one kept Unix
// connection, to a spawner process of its own (as boxd hands it to the
// init), which forks, execs and reaps it with nothing around (no pipes, no
// environment, no path lookup, no events) and answers with the process's
// life, timed as the init times it. That exec's round trip minus the
// process is what any design with a daemon and a separate process that
// runs commands pays on this machine; boxd's part is set next to it.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// bareConnectArg runs boxbench as the bare server: boxbench bare-connect
// SOCKET SPAWNER-SOCKET; bareSpawnerArg as its spawner: boxbench
// bare-spawner SOCKET.
const (
	bareConnectArg = "bare-connect"
	bareSpawnerArg = "bare-spawner"
)

// serveBareConnect serves the health service, and Exec through the
// spawner at spawner, on the Unix socket at path until killed.
func serveBareConnect(path, spawner string) error {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker()))
	mux.Handle(boxdv1connect.NewSandboxServiceHandler(&bareExec{spawner: spawner}))
	proto := new(http.Protocols)
	proto.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: proto, HTTP2: &http.HTTP2Config{
		MaxReadFrameSize:              apiwire.MaxFrameBytes,
		MaxReceiveBufferPerStream:     apiwire.StreamWindowBytes,
		MaxReceiveBufferPerConnection: apiwire.ConnWindowBytes,
	}}
	return srv.Serve(ln)
}

// bareConnect is a running bare server and a health client of it, with
// the transport and protocol boxd's Go client uses.
type bareConnect struct {
	cmd, spawner *exec.Cmd
	health       *grpchealth.Client
	exec         boxdAPI // its Exec, through the spawner
}

func startBareConnect(ctx context.Context, dir string) (*bareConnect, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	sock, spawnerSock := filepath.Join(dir, "bare-connect.sock"), filepath.Join(dir, "bare-spawner.sock")
	spawner := exec.Command(self, bareSpawnerArg, spawnerSock)
	spawner.Stdout, spawner.Stderr = os.Stderr, os.Stderr
	if err := spawner.Start(); err != nil {
		return nil, fmt.Errorf("bare spawner: %w", err)
	}
	cmd := exec.Command(self, bareConnectArg, sock, spawnerSock)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		_ = spawner.Process.Kill()
		_ = spawner.Wait()
		return nil, fmt.Errorf("bare ConnectRPC server: %w", err)
	}
	b := &bareConnect{cmd: cmd, spawner: spawner, health: grpchealth.NewClient(&http.Client{Transport: apiwire.Transport(sock)}, "http://bare"),
		exec: boxdAPI{c: rpcclient.New(sock)}}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err = b.health.Check(ctx, &grpchealth.CheckRequest{}); err == nil {
			return b, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.stop()
			return nil, errors.Join(fmt.Errorf("bare ConnectRPC server never answered"), err)
		}
	}
}

func (b *bareConnect) stop() {
	for _, c := range []*exec.Cmd{b.cmd, b.spawner} {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
}

// bareExec is the bare server's Exec: the command goes to the spawner over
// one kept connection, one call at a time (the bench calls it serially).
type bareExec struct {
	boxdv1connect.UnimplementedSandboxServiceHandler
	spawner string
	mu      sync.Mutex
	conn    net.Conn
}

func (b *bareExec) Exec(ctx context.Context, req *connect.Request[boxdv1.ExecRequest]) (*connect.Response[boxdv1.ExecResponse], error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil {
		c, err := net.Dial("unix", b.spawner)
		if err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, err)
		}
		b.conn = c
	}
	cmd := strings.Join(req.Msg.Args, "\x00")
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(cmd)))
	var reply [12]byte
	_, err := b.conn.Write(append(msg, cmd...))
	if err == nil {
		_, err = io.ReadFull(b.conn, reply[:])
	}
	if err != nil {
		b.conn.Close()
		b.conn = nil
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	life := time.Duration(binary.BigEndian.Uint64(reply[:8]))
	res := &boxdv1.ExecResult{ExitCode: int32(binary.BigEndian.Uint32(reply[8:])), ProcessUsec: life.Microseconds()}
	return connect.NewResponse(&boxdv1.ExecResponse{Result: res}), nil
}

// serveBareSpawner runs, for each command that comes on a connection to
// the Unix socket at path, the command with stdio on /dev/null, in a
// session of its own as the init does, and answers with its life (from
// just before the fork to its reaping, as the init times it) and its exit
// status. A command's path is looked up once.
func serveBareSpawner(path string) error {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	fd := null.Fd()
	attr := &syscall.ProcAttr{Files: []uintptr{fd, fd, fd}, Sys: &syscall.SysProcAttr{Setsid: true}}
	var mu sync.Mutex
	paths := map[string]string{}
	run := func(cmd string) (time.Duration, int, error) {
		args := strings.Split(cmd, "\x00")
		mu.Lock()
		p, ok := paths[args[0]]
		mu.Unlock()
		if !ok {
			var err error
			if p, err = exec.LookPath(args[0]); err != nil {
				return 0, 0, err
			}
			mu.Lock()
			paths[args[0]] = p
			mu.Unlock()
		}
		forked := time.Now()
		pid, err := syscall.ForkExec(p, args, attr)
		if err != nil {
			return 0, 0, err
		}
		var ws syscall.WaitStatus
		for {
			_, err = syscall.Wait4(pid, &ws, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
		return time.Since(forked), ws.ExitStatus(), err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			var hdr [4]byte
			for {
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				cmd := make([]byte, binary.BigEndian.Uint32(hdr[:]))
				if _, err := io.ReadFull(c, cmd); err != nil {
					return
				}
				life, code, err := run(string(cmd))
				if err != nil {
					fmt.Fprintln(os.Stderr, "boxbench bare-spawner:", err)
					return
				}
				reply := binary.BigEndian.AppendUint64(nil, uint64(life))
				if _, err := c.Write(binary.BigEndian.AppendUint32(reply, uint32(code))); err != nil {
					return
				}
			}
		}()
	}
}
