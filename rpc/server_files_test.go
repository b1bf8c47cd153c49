//go:build linux

package rpc

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/client"

	"github.com/boxd-dev/boxd/agent/insandbox"
	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
	"github.com/boxd-dev/boxd/snapshot"
)

// fileStack is boxd's file path without containerd: the API server and a
// Manager whose one "sandbox" is an in-process agent server. A sandbox
// whose channel exists needs no containerd round trip, which is what lets
// this run without one.
type fileStack struct {
	api     boxdv1connect.FileServiceClient
	id      string
	workdir string
}

func startFileStack(tb testing.TB) *fileStack {
	dir, err := os.MkdirTemp("", "boxdrpc")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	const id = "0123456789ab"
	mgr, err := runtime.NewManager(runtime.Config{
		Client: &client.Client{}, Images: &snapshot.Store{},
		StateDir: filepath.Join(dir, "state"), InitBinary: "/proc/self/exe",
	})
	if err != nil {
		tb.Fatal(err)
	}
	mgr.AddVisibleForTest(id)
	wd := filepath.Join(dir, "work")
	os.Mkdir(wd, 0o755)
	ln, err := insandbox.Listen(filepath.Join(dir, "state", "sandboxes", id, wire.SocketName))
	if err != nil {
		tb.Fatal(err)
	}
	asrv := &insandbox.Server{Workdir: wd}
	go asrv.Serve(ln)
	tb.Cleanup(func() { asrv.Close() })

	sock := filepath.Join(dir, "boxd.sock")
	apiLn, err := net.Listen("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{Manager: mgr, Log: slog.New(slog.DiscardHandler)}
	done := make(chan struct{})
	go func() { srv.Serve(ctx, apiLn); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
	return &fileStack{api: rpcclient.NewFiles(sock), id: id, workdir: wd}
}

func TestFileServiceInProcess(t *testing.T) {
	st := startFileStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A write in three messages, the first with data.
	ws := st.api.WriteFile(ctx)
	mode := uint32(0o600)
	ws.Send(&boxdv1.WriteFileRequest{SandboxId: st.id, Path: "d/f", Parents: true, Mode: &mode, Data: []byte("ab")})
	ws.Send(&boxdv1.WriteFileRequest{Data: []byte("cd")})
	ws.Send(&boxdv1.WriteFileRequest{Data: []byte("ef")})
	res, err := ws.CloseAndReceive()
	if err != nil || res.Msg.BytesWritten != 6 || res.Msg.Info.Mode != 0o600 || res.Msg.Info.Type != boxdv1.FileType_FILE_TYPE_REGULAR {
		t.Fatalf("write: %v %v", res, err)
	}
	rs, err := st.api.ReadFile(ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: st.id, Path: "d/f", Offset: 1, Length: 4}))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	var info *boxdv1.FileInfo
	for rs.Receive() {
		if rs.Msg().Info != nil {
			info = rs.Msg().Info
		}
		got.Write(rs.Msg().Data)
	}
	if rs.Err() != nil || got.String() != "bcde" || info == nil || info.Size != 6 {
		t.Fatalf("read: %q %v %v", got.String(), info, rs.Err())
	}

	// Field errors name the field.
	_, err = st.api.StatFile(ctx, connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: st.id, Path: "a\x00b"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !bytes.Contains([]byte(err.Error()), []byte("path:")) {
		t.Errorf("NUL path: %v", err)
	}
	_, err = st.api.ChmodPath(ctx, connect.NewRequest(&boxdv1.ChmodPathRequest{SandboxId: st.id, Path: "d/f", Mode: 0o10000}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !bytes.Contains([]byte(err.Error()), []byte("mode:")) {
		t.Errorf("bad mode: %v", err)
	}
	_, err = st.api.StatFile(ctx, connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: st.id, Path: "x", User: "a b"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !bytes.Contains([]byte(err.Error()), []byte("user:")) {
		t.Errorf("bad user: %v", err)
	}
	_, err = st.api.RemovePath(ctx, connect.NewRequest(&boxdv1.RemovePathRequest{SandboxId: st.id, Path: "d"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("remove non-empty: %v", err)
	}
	_, err = st.api.StatFile(ctx, connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: st.id, Path: "missing"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("stat missing: %v", err)
	}

	// Upload: data before any file is refused; a bad file fails alone.
	us := st.api.UploadFiles(ctx)
	us.Send(&boxdv1.UploadFilesRequest{SandboxId: st.id, Parents: true})
	us.Send(&boxdv1.UploadFilesRequest{File: &boxdv1.UploadFile{Path: "u/1"}, Data: []byte("1")})
	us.Send(&boxdv1.UploadFilesRequest{Data: []byte("1")})
	us.Send(&boxdv1.UploadFilesRequest{File: &boxdv1.UploadFile{Path: "d/f/not-a-dir"}, Data: []byte("2")})
	us.Send(&boxdv1.UploadFilesRequest{File: &boxdv1.UploadFile{Path: "u/3"}})
	ur, err := us.CloseAndReceive()
	if err != nil {
		t.Fatal(err)
	}
	r := ur.Msg.Results
	if len(r) != 3 || r[0].Error != nil || r[0].Size != 2 || r[1].Error == nil || r[1].Error.Code != "failed_precondition" || r[2].Error != nil || ur.Msg.FilesWritten != 2 {
		t.Errorf("upload results: %v", ur.Msg)
	}
	us = st.api.UploadFiles(ctx)
	us.Send(&boxdv1.UploadFilesRequest{SandboxId: st.id, Data: []byte("orphan")})
	if _, err := us.CloseAndReceive(); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("data before a file: %v", err)
	}

	// Download keeps going past a missing file.
	ds, err := st.api.DownloadFiles(ctx, connect.NewRequest(&boxdv1.DownloadFilesRequest{SandboxId: st.id, Paths: []string{"u/1", "nope", "d/f"}}))
	if err != nil {
		t.Fatal(err)
	}
	data := map[int32]string{}
	var dones []*boxdv1.FileResult
	for ds.Receive() {
		m := ds.Msg()
		data[m.Index] += string(m.GetData())
		if d := m.GetDone(); d != nil {
			dones = append(dones, d)
		}
	}
	if ds.Err() != nil || len(dones) != 3 || dones[1].Error.GetCode() != "not_found" || data[0] != "11" || data[2] != "abcdef" {
		t.Errorf("download: %v %v %v", data, dones, ds.Err())
	}
}

// TestFileServiceCancelledWrite: a write whose caller cancels before
// closing its side of the stream commits nothing. (A half-close is the end
// of the file: a client that closes its side, cancelled or not, may have
// sent a complete stream, and the write may then be committed.)
func TestFileServiceCancelledWrite(t *testing.T) {
	st := startFileStack(t)
	os.WriteFile(filepath.Join(st.workdir, "f"), []byte("old"), 0o644)
	cctx, cancel := context.WithCancel(context.Background())
	ws := st.api.WriteFile(cctx)
	ws.Send(&boxdv1.WriteFileRequest{SandboxId: st.id, Path: "f", Data: []byte("partial")})
	ws.Send(&boxdv1.WriteFileRequest{Data: make([]byte, 1<<20)})
	time.Sleep(100 * time.Millisecond)
	cancel()
	time.Sleep(300 * time.Millisecond)
	if b, _ := os.ReadFile(filepath.Join(st.workdir, "f")); string(b) != "old" {
		t.Fatalf("a cancelled write committed %d bytes", len(b))
	}
	if ents, _ := os.ReadDir(st.workdir); len(ents) != 1 {
		t.Errorf("%d entries after a cancelled write, want 1", len(ents))
	}
	ws.CloseAndReceive()
}

func BenchmarkFileAPIWrite(b *testing.B) {
	st := startFileStack(b)
	ctx := context.Background()
	const size = 64 << 20
	buf := make([]byte, 1<<20)
	b.SetBytes(size)
	for b.Loop() {
		ws := st.api.WriteFile(ctx)
		ws.Send(&boxdv1.WriteFileRequest{SandboxId: st.id, Path: "big"})
		for n := 0; n < size; n += len(buf) {
			if err := ws.Send(&boxdv1.WriteFileRequest{Data: buf}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := ws.CloseAndReceive(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFileAPIRead(b *testing.B) {
	st := startFileStack(b)
	ctx := context.Background()
	const size = 64 << 20
	os.WriteFile(filepath.Join(st.workdir, "big"), make([]byte, size), 0o644)
	b.SetBytes(size)
	for b.Loop() {
		rs, err := st.api.ReadFile(ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: st.id, Path: "big"}))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rs.Receive() {
			n += len(rs.Msg().Data)
			apiwire.RecycleChunk(rs.Msg().Data)
		}
		if err := rs.Err(); err != nil || n != size {
			b.Fatal(n, err)
		}
	}
}
