//go:build linux

package main

// Scenario 4: moving files. One big incompressible file in and out, CLI
// against CLI (`boxctl cp`, `docker cp`) and Go client against Go client
// (boxd's FileService WriteFile/ReadFile, the Docker Engine API's PUT/GET
// archive), host file to sandbox file and back; and a tree of many small
// files in (a source checkout is mostly small files), by CLI and by Go
// client (UploadFiles in one call; PUT archive).

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/safetar"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

func scenarioFiles(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	dir := filepath.Join(e.dir, "files")
	big := filepath.Join(dir, "big.bin")
	tree := filepath.Join(dir, "tree")
	outDir := filepath.Join(dir, "out")
	if err := settleFreedInodes(ctx); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		os.RemoveAll(dir)
		noteFreed()
	}()
	bigSize := int64(cfg.bigMiB) << 20
	if err := writeRandom(big, bigSize); err != nil {
		return nil, err
	}
	if err := writeTree(tree, cfg.treeFiles); err != nil {
		return nil, err
	}

	sb, err := e.boxd.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("boxd create: %w", err)
	}
	defer e.boxd.remove(context.WithoutCancel(ctx), sb)
	dk, err := e.docker.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker create: %w", err)
	}
	defer e.docker.remove(context.WithoutCancel(ctx), dk)

	// rmIn removes what a copy-in made, untimed, so every sample writes
	// into the same empty directory.
	rmIn := func(api sandboxAPI, id, path string) func(context.Context, int) error {
		return func(ctx context.Context, _ int) error {
			_, err := execOK(ctx, api, id, "rm", "-rf", path)
			return err
		}
	}
	var rs []*latency
	// With BENCH_AB, the base build's boxctl cp takes turns in every row.
	ab, abSb, abDone, err := startABSandbox(ctx, e)
	if err != nil {
		return rs, err
	}
	defer abDone()
	fc := rpcclient.NewFiles(e.sock)
	bigName := fmt.Sprintf("%d MiB file", cfg.bigMiB)
	inBig := []peer{
		{name: "boxctl cp", run: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "cp", big, sb+":/workspace/big.bin"))
		}, after: rmIn(e.boxd, sb, "/workspace/big.bin")},
		{name: "docker cp", run: func(ctx context.Context, _ int) error {
			return run(e.dockerCmd(ctx, "cp", big, dk+":/workspace/big.bin"))
		}, after: rmIn(e.docker, dk, "/workspace/big.bin")},
		{name: "boxd API", run: func(ctx context.Context, _ int) error {
			return boxdWriteFile(ctx, fc, sb, "/workspace/big.bin", big)
		}, after: rmIn(e.boxd, sb, "/workspace/big.bin")},
		{name: "Docker Engine API", run: func(ctx context.Context, _ int) error {
			return e.docker.putFile(ctx, dk, "/workspace", big)
		}, after: rmIn(e.docker, dk, "/workspace/big.bin")},
	}
	if ab != nil {
		inBig = append(inBig, peer{name: "boxctl cp (base)", run: func(ctx context.Context, _ int) error {
			return run(ab.boxctlCmd(ctx, "cp", big, abSb+":/workspace/big.bin"))
		}, after: rmIn(ab.api, abSb, "/workspace/big.bin")})
	}
	in := measure(ctx, bigName+" in", 1, cfg.bigN, inBig)
	logThroughput(in, bigSize)
	rs = append(rs, in)

	// The file to copy out, put in place once.
	if err := run(e.boxctlCmd(ctx, "cp", big, sb+":/workspace/big.bin")); err != nil {
		return rs, err
	}
	if err := run(e.dockerCmd(ctx, "cp", big, dk+":/workspace/big.bin")); err != nil {
		return rs, err
	}
	if ab != nil {
		if err := run(ab.boxctlCmd(ctx, "cp", big, abSb+":/workspace/big.bin")); err != nil {
			return rs, err
		}
	}
	// checkOut verifies the copy's size (a truncated copy is an error) and
	// removes it, untimed.
	checkOut := func(path string) func(context.Context, int) error {
		return func(context.Context, int) error {
			defer os.Remove(path)
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			if st.Size() != bigSize {
				return fmt.Errorf("%s: %d bytes, want %d", path, st.Size(), bigSize)
			}
			return nil
		}
	}
	boxdOut, dockerOut := filepath.Join(outDir, "boxd.bin"), filepath.Join(outDir, "docker.bin")
	abOut := filepath.Join(outDir, "base.bin")
	outBig := []peer{
		{name: "boxctl cp", run: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "cp", sb+":/workspace/big.bin", boxdOut))
		}, after: checkOut(boxdOut)},
		{name: "docker cp", run: func(ctx context.Context, _ int) error {
			return run(e.dockerCmd(ctx, "cp", dk+":/workspace/big.bin", dockerOut))
		}, after: checkOut(dockerOut)},
		{name: "boxd API", run: func(ctx context.Context, _ int) error {
			return boxdReadFile(ctx, fc, sb, "/workspace/big.bin", boxdOut)
		}, after: checkOut(boxdOut)},
		{name: "Docker Engine API", run: func(ctx context.Context, _ int) error {
			return e.docker.getFile(ctx, dk, "/workspace/big.bin", dockerOut)
		}, after: checkOut(dockerOut)},
	}
	if ab != nil {
		outBig = append(outBig, peer{name: "boxctl cp (base)", run: func(ctx context.Context, _ int) error {
			return run(ab.boxctlCmd(ctx, "cp", abSb+":/workspace/big.bin", abOut))
		}, after: checkOut(abOut)})
	}
	out := measure(ctx, bigName+" out", 1, cfg.bigN, outBig)
	logThroughput(out, bigSize)
	rs = append(rs, out)

	// The tree rows copy into a new name every sample and remove the
	// copies only at the end. Removing a tree right before the next copy
	// would mostly measure the file system: ext4 without a journal (this
	// VM's) passes over every inode freed in the last minutes when it
	// allocates one (recently_deleted), so each sample would be slower
	// than the last, for every peer alike (bench/README.md, files).
	var abFc boxdv1connect.FileServiceClient
	if ab != nil {
		abFc = rpcclient.NewFiles(ab.sock)
	}
	seq := 0
	fresh := func(prefix string) string { seq++; return fmt.Sprintf("%s%d", prefix, seq) }
	var last sync.Map // peer name -> the name its last sample wrote
	// checkTree verifies, on a peer's first sample, that the tree arrived
	// whole.
	checkTree := func(api sandboxAPI, id, peer string) func(context.Context, int) error {
		return func(ctx context.Context, i int) error {
			if i != 0 {
				return nil
			}
			name, _ := last.Load(peer)
			out, err := execOK(ctx, api, id, "sh", "-c", fmt.Sprintf("find /workspace/%s -type f | wc -l", name))
			if err != nil {
				return err
			}
			if strings.TrimSpace(string(out)) != fmt.Sprint(cfg.treeFiles) {
				return fmt.Errorf("%s: %s files arrived, want %d", peer, strings.TrimSpace(string(out)), cfg.treeFiles)
			}
			return nil
		}
	}
	cpIn := func(peer string, cmd func(ctx context.Context, args ...string) *exec.Cmd, id string) func(context.Context, int) error {
		return func(ctx context.Context, _ int) error {
			name := fresh("t")
			last.Store(peer, name)
			return run(cmd(ctx, "cp", tree, id+":/workspace/"+name))
		}
	}
	apiIn := func(peer string, fc boxdv1connect.FileServiceClient, id string) func(context.Context, int) error {
		return func(ctx context.Context, _ int) error {
			name := fresh("t")
			last.Store(peer, name)
			return boxdUploadTree(ctx, fc, id, tree, "/workspace/"+name)
		}
	}
	inPeers := []peer{
		{name: "boxctl cp", run: cpIn("boxctl cp", e.boxctlCmd, sb), after: checkTree(e.boxd, sb, "boxctl cp")},
		{name: "docker cp", run: cpIn("docker cp", e.dockerCmd, dk), after: checkTree(e.docker, dk, "docker cp")},
		{name: "boxd API", run: apiIn("boxd API", fc, sb), after: checkTree(e.boxd, sb, "boxd API")},
		{name: "Docker Engine API", run: func(ctx context.Context, _ int) error {
			name := fresh("t")
			last.Store("Docker Engine API", name)
			return e.docker.putTree(ctx, dk, tree, "/workspace", name)
		}, after: checkTree(e.docker, dk, "Docker Engine API")},
	}
	if ab != nil {
		inPeers = append(inPeers,
			peer{name: "boxctl cp (base)", run: cpIn("boxctl cp (base)", ab.boxctlCmd, abSb), after: checkTree(ab.api, abSb, "boxctl cp (base)")},
			peer{name: "boxd API (base)", run: apiIn("boxd API (base)", abFc, abSb), after: checkTree(ab.api, abSb, "boxd API (base)")})
	}
	rs = append(rs, measure(ctx, fmt.Sprintf("tree of %d small files in", cfg.treeFiles), 1, cfg.treeN, inPeers))
	if ctx.Err() != nil {
		return rs, ctx.Err()
	}

	// Out: the tree put in place once in each sandbox, copied out to a new
	// host directory every sample (removed with dir at the end).
	var rels []string
	if err := filepath.WalkDir(tree, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(tree, p)
			rels = append(rels, filepath.ToSlash(rel))
		}
		return err
	}); err != nil {
		return rs, err
	}
	if err := run(e.boxctlCmd(ctx, "cp", tree, sb+":/workspace/tree")); err != nil {
		return rs, err
	}
	if err := run(e.dockerCmd(ctx, "cp", tree, dk+":/workspace/tree")); err != nil {
		return rs, err
	}
	if ab != nil {
		if err := run(ab.boxctlCmd(ctx, "cp", tree, abSb+":/workspace/tree")); err != nil {
			return rs, err
		}
	}
	checkOutTree := func(peer string) func(context.Context, int) error {
		return func(context.Context, int) error {
			name, _ := last.Load(peer)
			n := 0
			err := filepath.WalkDir(filepath.Join(outDir, name.(string)), func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					n++
				}
				return err
			})
			if err == nil && n != cfg.treeFiles {
				err = fmt.Errorf("%s: %d files came out, want %d", peer, n, cfg.treeFiles)
			}
			return err
		}
	}
	cpOut := func(peer string, cmd func(ctx context.Context, args ...string) *exec.Cmd, id string) func(context.Context, int) error {
		return func(ctx context.Context, _ int) error {
			name := fresh("o")
			last.Store(peer, name)
			return run(cmd(ctx, "cp", id+":/workspace/tree", filepath.Join(outDir, name)))
		}
	}
	apiOut := func(peer string, fc boxdv1connect.FileServiceClient, id string) func(context.Context, int) error {
		return func(ctx context.Context, _ int) error {
			name := fresh("o")
			last.Store(peer, name)
			return boxdDownloadTree(ctx, fc, id, "/workspace/tree", rels, filepath.Join(outDir, name))
		}
	}
	outPeers := []peer{
		{name: "boxctl cp", run: cpOut("boxctl cp", e.boxctlCmd, sb), after: checkOutTree("boxctl cp")},
		{name: "docker cp", run: cpOut("docker cp", e.dockerCmd, dk), after: checkOutTree("docker cp")},
		{name: "boxd API", run: apiOut("boxd API", fc, sb), after: checkOutTree("boxd API")},
		{name: "Docker Engine API", run: func(ctx context.Context, _ int) error {
			name := fresh("o")
			last.Store("Docker Engine API", name)
			return e.docker.getTree(ctx, dk, "/workspace/tree", filepath.Join(outDir, name))
		}, after: checkOutTree("Docker Engine API")},
	}
	// The same download into memory (each file's bytes counted, nothing
	// written on the host): boxd's side without the client's file
	// creation, which the rows above share with Docker's peers.
	apiOutMem := func(fc boxdv1connect.FileServiceClient, id string) func(context.Context, int) error {
		return func(ctx context.Context, _ int) error {
			return boxdDownloadTree(ctx, fc, id, "/workspace/tree", rels, "")
		}
	}
	outPeers = append(outPeers, peer{name: "boxd API into memory", run: apiOutMem(fc, sb)})
	if ab != nil {
		outPeers = append(outPeers,
			peer{name: "boxctl cp (base)", run: cpOut("boxctl cp (base)", ab.boxctlCmd, abSb), after: checkOutTree("boxctl cp (base)")},
			peer{name: "boxd API (base)", run: apiOut("boxd API (base)", abFc, abSb), after: checkOutTree("boxd API (base)")},
			peer{name: "boxd API into memory (base)", run: apiOutMem(abFc, abSb)})
	}
	rs = append(rs, measure(ctx, fmt.Sprintf("tree of %d small files out", cfg.treeFiles), 1, cfg.treeN, outPeers))
	return rs, ctx.Err()
}

// logThroughput logs each peer's median as MiB/s.
func logThroughput(l *latency, size int64) {
	var parts []string
	for _, name := range l.peers {
		if med := quantile(l.samples[name], 0.5); med > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f MiB/s", name, float64(size)/(1<<20)/med.Seconds()))
		}
	}
	logf("%s: median throughput: %s", l.scenario, strings.Join(parts, ", "))
}

// boxdWriteFile streams a host file into the sandbox with FileService
// WriteFile, as a Go program would: chunks read into one buffer (Send
// marshals a copy before it returns).
func boxdWriteFile(ctx context.Context, fc boxdv1connect.FileServiceClient, id, path, local string) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	ws := fc.WriteFile(ctx)
	msg := &boxdv1.WriteFileRequest{SandboxId: id, Path: path}
	buf := make([]byte, apiwire.ChunkBytes)
	for {
		n, rerr := io.ReadFull(f, buf)
		if n > 0 || msg.SandboxId != "" {
			msg.Data = buf[:n]
			if err := ws.Send(msg); err != nil {
				break // the reason comes from CloseAndReceive
			}
			msg = &boxdv1.WriteFileRequest{}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			_, _ = ws.CloseAndReceive()
			return rerr
		}
	}
	_, err = ws.CloseAndReceive()
	return err
}

// boxdReadFile streams a sandbox file to a host file with FileService
// ReadFile, handing each message's buffer back to the codec's pool.
func boxdReadFile(ctx context.Context, fc boxdv1connect.FileServiceClient, id, path, local string) error {
	rs, err := fc.ReadFile(ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: id, Path: path}))
	if err != nil {
		return err
	}
	defer rs.Close()
	f, err := os.Create(local)
	if err != nil {
		return err
	}
	for rs.Receive() {
		if _, err := f.Write(rs.Msg().Data); err != nil {
			f.Close()
			return err
		}
		apiwire.RecycleChunk(rs.Msg().Data)
	}
	if err := rs.Err(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// putFile copies a host file into dir in the container with PUT
// /containers/ID/archive, streaming the tar as docker's Go SDK users do.
func (d *dockerAPI) putFile(ctx context.Context, id, dir, local string) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return d.putArchive(ctx, id, dir, func(tw *tar.Writer) error {
		err := tw.WriteHeader(&tar.Header{Name: filepath.Base(local), Mode: 0o644, Size: st.Size(), ModTime: st.ModTime(), Typeflag: tar.TypeReg})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		return err
	})
}

// putArchive streams the tar that fill writes to PUT
// /containers/ID/archive?path=dir.
func (d *dockerAPI) putArchive(ctx context.Context, id, dir string, fill func(*tar.Writer) error) error {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := fill(tw)
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	resp, err := d.archive(ctx, http.MethodPut, id, dir, pr)
	pr.Close()
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// archive sends a request to /containers/ID/archive?path=path with body as
// a tar (nil: none) and returns the answer, or an *apiError for a non-2xx
// one.
func (d *dockerAPI) archive(ctx context.Context, method, id, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://docker/"+dockerAPIVersion+"/containers/"+id+"/archive?path="+url.QueryEscape(path), body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-tar")
	}
	// net/http would ask for gzip, and dockerd would then compress the
	// archive (37 MiB/s of incompressible data); docker's own client does
	// not ask.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, &apiError{resp.StatusCode, strings.TrimSpace(string(b))}
	}
	return resp, nil
}

// getFile copies a container file to a host file with GET
// /containers/ID/archive, unpacking the one-file tar it answers with.
func (d *dockerAPI) getFile(ctx context.Context, id, path, local string) error {
	resp, err := d.archive(ctx, http.MethodGet, id, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	tr := tar.NewReader(resp.Body)
	h, err := tr.Next()
	if err != nil {
		return fmt.Errorf("archive of %s: %w", path, err)
	}
	if h.Typeflag != tar.TypeReg {
		return fmt.Errorf("archive of %s: %s is not a regular file", path, h.Name)
	}
	f, err := os.Create(local)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, tr); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("archive of %s: more than one entry (%v)", path, err)
	}
	return nil
}

// boxdUploadTree writes every file under local to dir in the sandbox in one
// UploadFiles call.
func boxdUploadTree(ctx context.Context, fc boxdv1connect.FileServiceClient, id, local, dir string) error {
	us := fc.UploadFiles(ctx)
	if err := us.Send(&boxdv1.UploadFilesRequest{SandboxId: id, Parents: true}); err != nil {
		_, err = us.CloseAndReceive()
		return err
	}
	werr := filepath.WalkDir(local, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(local, p)
		mode := uint32(0o644)
		if err := us.Send(&boxdv1.UploadFilesRequest{File: &boxdv1.UploadFile{Path: dir + "/" + filepath.ToSlash(rel), Mode: &mode}, Data: data}); err != nil {
			return io.EOF // CloseAndReceive says why
		}
		return nil
	})
	res, err := us.CloseAndReceive()
	if werr != nil && werr != io.EOF {
		return werr
	}
	if err != nil {
		return err
	}
	for _, r := range res.Msg.Results {
		if r.Error != nil {
			return fmt.Errorf("upload %s: %s: %s", r.Path, r.Error.Code, r.Error.Message)
		}
	}
	return nil
}

// putTree copies the directory local into dir in the container as name,
// with PUT /containers/ID/archive, as docker cp does.
func (d *dockerAPI) putTree(ctx context.Context, id, local, dir, name string) error {
	return d.putArchive(ctx, id, dir, func(tw *tar.Writer) error {
		return filepath.WalkDir(local, func(p string, de os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := de.Info()
			if err != nil {
				return err
			}
			h, err := tar.FileInfoHeader(info, "")
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(local, p)
			h.Name = filepath.ToSlash(filepath.Join(name, rel))
			if de.IsDir() {
				h.Name += "/"
			}
			if err := tw.WriteHeader(h); err != nil || !de.Type().IsRegular() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		})
	})
}

// boxdDownloadTree copies the files rels under dir in the sandbox to the
// host directory local in one DownloadFiles call, as a Go program would;
// with local empty it only counts each file's bytes (into memory).
func boxdDownloadTree(ctx context.Context, fc boxdv1connect.FileServiceClient, id, dir string, rels []string, local string) error {
	paths := make([]string, len(rels))
	for i, rel := range rels {
		paths[i] = dir + "/" + rel
	}
	rs, err := fc.DownloadFiles(ctx, connect.NewRequest(&boxdv1.DownloadFilesRequest{SandboxId: id, Paths: paths}))
	if err != nil {
		return err
	}
	defer rs.Close()
	var f *os.File
	var got int64
	done := 0
	for rs.Receive() {
		m := rs.Msg()
		switch ev := m.Event.(type) {
		case *boxdv1.DownloadFilesResponse_Start:
			if local == "" {
				continue
			}
			p := filepath.Join(local, filepath.FromSlash(rels[m.Index]))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if f, err = os.Create(p); err != nil {
				return err
			}
		case *boxdv1.DownloadFilesResponse_Data:
			if local == "" {
				got += int64(len(ev.Data))
				continue
			}
			if f == nil {
				return fmt.Errorf("download: data before a start")
			}
			if _, err := f.Write(ev.Data); err != nil {
				f.Close()
				return err
			}
		case *boxdv1.DownloadFilesResponse_Done:
			if ev.Done.Error != nil {
				return fmt.Errorf("download %s: %s: %s", ev.Done.Path, ev.Done.Error.Code, ev.Done.Error.Message)
			}
			if f != nil {
				if err := f.Close(); err != nil {
					return err
				}
				f = nil
			}
			done++
		}
	}
	if f != nil {
		f.Close()
	}
	if err := rs.Err(); err != nil {
		return err
	}
	if done != len(rels) {
		return fmt.Errorf("download: %d of %d files", done, len(rels))
	}
	if local == "" && got == 0 {
		return fmt.Errorf("download: no bytes came")
	}
	return nil
}

// getTree copies the directory path in the container to the host
// directory local with GET /containers/ID/archive, unpacking the tar (its
// top-level name replaced by local) as docker cp does.
func (d *dockerAPI) getTree(ctx context.Context, id, path, local string) error {
	resp, err := d.archive(ctx, http.MethodGet, id, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return safetar.Extract(resp.Body, filepath.Dir(local), safetar.Options{Top: filepath.Base(path), Rename: filepath.Base(local)})
}

// writeRandom writes size bytes of incompressible data.
func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	rng := rand.NewChaCha8([32]byte{'b', 'o', 'x', 'd'})
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		_, _ = rng.Read(buf)
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// writeTree writes n small files (100 B to 8 KiB, like source files) in
// directories of ten, two levels deep.
func writeTree(root string, n int) error {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 8<<10)
	for i := 0; i < n; i++ {
		d := filepath.Join(root, fmt.Sprintf("d%02d", i/100), fmt.Sprintf("s%d", i/10%10))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		size := 100 + rng.IntN(len(buf)-100)
		for j := range size {
			buf[j] = byte('a' + rng.IntN(26))
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.txt", i%10)), buf[:size], 0o644); err != nil {
			return err
		}
	}
	return nil
}
