//go:build linux

package dockerapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"

	"github.com/boxd-dev/boxd/registry"
	"github.com/boxd-dev/boxd/runtime"
	"github.com/boxd-dev/boxd/snapshot"
)

// Images are boxd's images: anyone may list and inspect them, and only
// admins may change them (pull, load, tag, remove), as on boxd's own API; a
// non-admin's change is a 403.

func (s *Server) imageRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /images/json", s.listImages)
	mux.HandleFunc("POST /images/create", s.pullImage)
	mux.HandleFunc("POST /images/load", s.loadImage)
	mux.HandleFunc("GET /images/{name...}", s.imageGet)
	mux.HandleFunc("POST /images/{name...}", s.imagePost)
	mux.HandleFunc("DELETE /images/{name...}", s.removeImage)
}

func familiar(name string) string {
	if ref, err := reference.ParseNormalizedNamed(name); err == nil {
		return reference.FamiliarString(ref)
	}
	return name
}

func (s *Server) writeOpts(r *http.Request, force bool) snapshot.WriteOptions {
	c, _ := runtime.CallerFrom(r.Context())
	return snapshot.WriteOptions{Force: force, Caller: fmt.Sprintf("uid=%d (docker endpoint)", c.UID), Users: s.Manager}
}

func adminOnly(r *http.Request, what string) error {
	if isAdmin(r.Context()) {
		return nil
	}
	return errf(http.StatusForbidden, "only root and members of boxd's --admin-group may %s", what)
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	ims, err := s.Images.List(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	f, err := filters(r)
	if err != nil {
		fail(w, err)
		return
	}
	for k, v := range f {
		switch {
		case k == "dangling":
			// boxd keeps no untagged images: none is dangling.
			if slices.Contains(v, "true") || slices.Contains(v, "1") {
				writeJSON(w, http.StatusOK, []any{})
				return
			}
		case k != "reference":
			fail(w, errf(http.StatusBadRequest, "invalid filter '%s' (boxd serves reference and dangling)", k))
			return
		}
	}
	byDigest := map[string]map[string]any{}
	var order []string
	for _, im := range ims {
		if refs := f["reference"]; len(refs) > 0 && !matchesReference(familiar(im.Name), refs) {
			continue
		}
		e, ok := byDigest[im.Digest]
		if !ok {
			e = map[string]any{"Id": im.Digest, "ParentId": "", "RepoTags": []string{}, "RepoDigests": []string{},
				"Created": im.CreatedAt.Unix(), "Size": im.Size, "VirtualSize": im.Size, "SharedSize": -1, "Containers": -1,
				"Labels": map[string]string{}}
			byDigest[im.Digest] = e
			order = append(order, im.Digest)
		}
		e["RepoTags"] = append(e["RepoTags"].([]string), familiar(im.Name))
	}
	out := []map[string]any{}
	sort.Strings(order)
	for _, d := range order {
		out = append(out, byDigest[d])
	}
	writeJSON(w, http.StatusOK, out)
}

// findImage finds an image by name or by (a prefix of) its digest.
func (s *Server) findImage(r *http.Request, name string) (snapshot.Image, error) {
	ims, err := s.Images.List(r.Context())
	if err != nil {
		return snapshot.Image{}, err
	}
	norm, _ := snapshot.NormalizeName(name)
	full := dockerFullName(name)
	for _, im := range ims {
		if im.Name == norm || im.Name == name || im.Name == full || im.Digest == name || (len(name) >= 12 && strings.HasPrefix(strings.TrimPrefix(im.Digest, "sha256:"), strings.TrimPrefix(name, "sha256:"))) {
			return im, nil
		}
	}
	return snapshot.Image{}, errf(http.StatusNotFound, "No such image: %s", name)
}

func (s *Server) imageGet(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutSuffix(r.PathValue("name"), "/json")
	if !ok {
		writeErr(w, http.StatusNotFound, "page not found: "+r.URL.Path)
		return
	}
	im, err := s.findImage(r, name)
	if err != nil {
		fail(w, err)
		return
	}
	cfg := map[string]any{}
	if img, err := s.Images.Get(r.Context(), im.Name); err == nil {
		if spec, err := img.Spec(r.Context()); err == nil {
			c := spec.Config
			cfg = map[string]any{"Env": c.Env, "Cmd": c.Cmd, "Entrypoint": c.Entrypoint, "WorkingDir": c.WorkingDir,
				"User": c.User, "Labels": c.Labels, "StopSignal": c.StopSignal}
		}
	}
	var tags []string
	if all, err := s.Images.List(r.Context()); err == nil {
		for _, x := range all {
			if x.Digest == im.Digest {
				tags = append(tags, familiar(x.Name))
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"Id": im.Digest, "RepoTags": tags, "RepoDigests": []string{}, "Parent": "", "Created": dockerTime(im.CreatedAt),
		"Size": im.Size, "VirtualSize": im.Size, "Os": "linux", "Architecture": "amd64", "Config": cfg,
		"RootFS": map[string]any{"Type": "layers"},
	})
}

func (s *Server) imagePost(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutSuffix(r.PathValue("name"), "/tag")
	if !ok {
		writeErr(w, http.StatusNotFound, "page not found: "+r.URL.Path)
		return
	}
	if err := adminOnly(r, "tag images"); err != nil {
		fail(w, err)
		return
	}
	repo, tag := r.URL.Query().Get("repo"), r.URL.Query().Get("tag")
	if repo == "" {
		fail(w, errf(http.StatusBadRequest, "repo: required"))
		return
	}
	if tag != "" {
		repo += ":" + tag
	}
	src, err := s.findImage(r, name)
	if err != nil {
		fail(w, err)
		return
	}
	if _, err := s.Images.TagImage(r.Context(), src.Name, repo, s.writeOpts(r, true)); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) removeImage(w http.ResponseWriter, r *http.Request) {
	if err := adminOnly(r, "remove images"); err != nil {
		fail(w, err)
		return
	}
	im, err := s.findImage(r, r.PathValue("name"))
	if err != nil {
		fail(w, err)
		return
	}
	if _, err := s.Images.Remove(r.Context(), im.Name, s.writeOpts(r, boolParam(r, "force"))); err != nil {
		if errdefs.IsFailedPrecondition(err) {
			fail(w, errf(http.StatusConflict, "%s", err.Error()))
			return
		}
		fail(w, err)
		return
	}
	s.Manager.DropPoolMembers(r.Context(), im.Name)
	writeJSON(w, http.StatusOK, []map[string]string{{"Untagged": familiar(im.Name)}, {"Deleted": im.Digest}})
}

// pullImage is image create from a registry, with Docker's progress JSON.
func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("fromSrc") != "" {
		fail(w, errf(http.StatusBadRequest, "fromSrc: importing a root file system here is not served (boxctl image import)"))
		return
	}
	ref := q.Get("fromImage")
	if ref == "" {
		fail(w, errf(http.StatusBadRequest, "fromImage: required"))
		return
	}
	if tag := q.Get("tag"); tag != "" {
		if strings.HasPrefix(tag, "sha256:") {
			ref += "@" + tag
		} else {
			ref += ":" + tag
		}
	}
	if err := adminOnly(r, "pull images"); err != nil {
		fail(w, err)
		return
	}
	if s.Registry == nil {
		fail(w, errf(http.StatusNotImplemented, "this boxd has no registry access configured"))
		return
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		fail(w, errf(http.StatusBadRequest, "invalid reference format: %v", err))
		return
	}
	full := reference.TagNameOnly(named).String()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex
	enc := json.NewEncoder(flushWriter{w})
	send := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(v)
	}
	send(map[string]string{"status": "Pulling from " + reference.FamiliarName(named), "id": tagOf(named)})
	im, err := s.Registry.Pull(r.Context(), registry.PullRequest{Ref: full, Write: s.writeOpts(r, true)}, func(p registry.Progress) {
		for _, b := range p.Blobs {
			id := strings.TrimPrefix(b.Digest, "sha256:")
			send(map[string]any{"status": progressStatus(b), "id": id[:min(12, len(id))],
				"progressDetail": map[string]int64{"current": b.Done, "total": b.Size}})
		}
	})
	if err != nil {
		send(map[string]any{"errorDetail": map[string]string{"message": err.Error()}, "error": err.Error()})
		return
	}
	send(map[string]string{"status": "Digest: " + im.Digest})
	send(map[string]string{"status": "Status: Downloaded newer image for " + familiar(im.Name)})
}

func tagOf(n reference.Named) string {
	if t, ok := n.(reference.Tagged); ok {
		return t.Tag()
	}
	return "latest"
}

func progressStatus(b registry.Blob) string {
	if b.Size > 0 && b.Done >= b.Size {
		return "Download complete"
	}
	if b.Done > 0 {
		return "Downloading"
	}
	return "Waiting"
}

// loadImage is docker load: a docker save (or OCI layout) tar through
// boxd's own image import, each image under the names the tar gives it.
// Like a pull it replaces a name that exists, and only an admin may.
func (s *Server) loadImage(w http.ResponseWriter, r *http.Request) {
	if err := adminOnly(r, "load images"); err != nil {
		fail(w, err)
		return
	}
	ims, err := s.Images.ImportArchive(r.Context(), r.Body, "", s.writeOpts(r, true))
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for _, im := range ims {
		s.Log.Info("image loaded", "image", im.Name, "digest", im.Digest, "caller", s.writeOpts(r, true).Caller)
		writeBody(w, map[string]string{"stream": "Loaded image: " + familiar(im.Name) + "\n"})
	}
}

// dockerFullName is name as Docker resolves a short one
// ("loaded/x:v1" is "docker.io/loaded/x:v1"), the name an imported
// docker save tar's images get; "" if it does not parse.
func dockerFullName(name string) string {
	n, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return ""
	}
	return reference.TagNameOnly(n).String()
}

// matchesReference is Docker's reference filter: a pattern matches the
// familiar name with its tag, or the name alone (docker images REPO).
func matchesReference(name string, patterns []string) bool {
	repo := name
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		repo = name[:i]
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
		if ok, _ := path.Match(p, repo); ok {
			return true
		}
	}
	return false
}
