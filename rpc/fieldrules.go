//go:build linux

package rpc

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

// What a request may ask of boxd depends on who asks. Images (and the warm
// pools) are shared by every user: whoever writes an image name decides
// what runs in other users' future sandboxes, and a fetch from a registry
// is boxd (root, host network) reaching a host the caller names. So the
// gate checks fields, not only calls: CreateSandbox is anyone's, but its
// pull field may make boxd fetch and replace a shared image.
//
// requestRules is the one table of it: every field of every request
// message (and of every message a request carries) with its rule for a
// caller that is not an admin (root or a --admin-group member):
//
//   - any: anyone may set it; the runtime checks ownership, limits and
//     boxd's ceilings as for everyone;
//   - admin: only admins may set it (a zero value is not setting it);
//   - a named conditional rule, a function that decides from the request.
//
// A request message whose every field is admin-only is an admin's call as
// a whole (adminCall says what it does, for the refusal): it is refused
// before any message is read. TestRequestRulesCover fails on a field the
// table lacks; at run time a field missing from it counts as admin-only.
// The docs' table (docs/security.md, "Request fields and non-admins") is
// rendered from this one (TestRequestRulesDoc).
var requestRules = map[protoreflect.Name]msgRules{
	// SandboxService
	"CreateSandboxRequest": {anyone: "image limits env workdir labels name ttl publish network idle_timeout on_idle registry_auth " +
		"user read_only_rootfs tmpfs ulimits hostname cpu_weight memory_low exec_timeout output_limit replace cold runtime volumes binds secrets auto_resume git git_depth",
		cond: map[protoreflect.Name]*condRule{"pull": pullRule}},
	"Limits": {anyone: "memory cpus pids disk"},
	// state and error are boxd's report of a port; portSpec never reads them
	// from a request.
	"PublishedPort":            {anyone: "host_ip host_port port protocol state error"},
	"NetworkRequest":           {anyone: "mode allow"},
	"RegistryAuth":             {anyone: "username password identity_token"},
	"ListSandboxesRequest":     {anyone: "labels", admin: "all", cond: map[protoreflect.Name]*condRule{"owner": ownerRule}},
	"GetSandboxRequest":        {anyone: "id"},
	"DeleteSandboxRequest":     {anyone: "id timeout force background"},
	"UpdateNetworkRequest":     {anyone: "sandbox_id allow deny"},
	"NetworkLogRequest":        {anyone: "sandbox_id"},
	"ExecRequest":              {anyone: "sandbox_id args env workdir timeout stdin output_limit user combined_output resume"},
	"CopyInRequest":            {anyone: "sandbox_id path data"},
	"CopyOutRequest":           {anyone: "sandbox_id path"},
	"StatPathRequest":          {anyone: "sandbox_id path"},
	"ImportImageRequest":       {adminCall: "change images", admin: "name format data force"},
	"ListImagesRequest":        {},
	"RemoveImageRequest":       {adminCall: "change images", admin: "name force"},
	"TagImageRequest":          {adminCall: "change images", admin: "source target force"},
	"PublishPortRequest":       {anyone: "sandbox_id port"},
	"UnpublishPortRequest":     {anyone: "sandbox_id port host_port"},
	"CommitSandboxRequest":     {adminCall: "change images", admin: "sandbox_id ref message force"},
	"ForkSandboxRequest":       {anyone: "sandbox_id count names limits env workdir labels ttl clone_volumes share_volumes with_processes"},
	"UpdateSandboxRequest":     {anyone: "sandbox_id ttl extend limits env workdir"},
	"StopSandboxRequest":       {anyone: "sandbox_id timeout"},
	"StartSandboxRequest":      {anyone: "sandbox_id"},
	"PauseSandboxRequest":      {anyone: "id"},
	"UnpauseSandboxRequest":    {anyone: "id"},
	"StatsRequest":             {anyone: "ids stream interval"},
	"BuildImageRequest":        {adminCall: "change images", admin: "ref dockerfile build_args force no_cache context"},
	"DiffSandboxRequest":       {anyone: "sandbox_id since patch"},
	"CheckpointSandboxRequest": {anyone: "id leave_running"},
	"RestoreSandboxRequest":    {anyone: "id"},
	// EventService
	"EventsRequest": {anyone: "since filters follow"},
	// FileService
	"WriteFileRequest":     {anyone: "sandbox_id path user mode parents in_place append exclusive data"},
	"ReadFileRequest":      {anyone: "sandbox_id path user offset length no_follow"},
	"StatFileRequest":      {anyone: "sandbox_id path user follow"},
	"ListDirRequest":       {anyone: "sandbox_id path user depth"},
	"MakeDirRequest":       {anyone: "sandbox_id path user mode parents"},
	"RemovePathRequest":    {anyone: "sandbox_id path user recursive"},
	"RenamePathRequest":    {anyone: "sandbox_id src dst user no_overwrite"},
	"ChmodPathRequest":     {anyone: "sandbox_id path user mode"},
	"UploadFilesRequest":   {anyone: "sandbox_id user parents file data"},
	"UploadFile":           {anyone: "path mode"},
	"DownloadFilesRequest": {anyone: "sandbox_id paths user no_follow"},
	"WatchPathRequest":     {anyone: "sandbox_id path user recursive"},
	"ReadLinesRequest":     {anyone: "sandbox_id path user offset limit max_line_bytes"},
	"EditFileRequest":      {anyone: "sandbox_id path user old_string new_string replace_all"},
	"GlobRequest":          {anyone: "sandbox_id pattern path user limit"},
	"GrepRequest":          {anyone: "sandbox_id pattern path glob user limit ignore_case literal max_line_bytes"},
	"ChownPathRequest":     {anyone: "sandbox_id path user owner recursive"},
	// PoolService: members use the daemon's resources on no one's quota.
	"SetPoolSizeRequest": {adminCall: "size the warm pools", admin: "image size runtime"},
	"ListPoolsRequest":   {},
	// ProcessService
	"ProcessInput":         {anyone: "start attach stdin close_stdin resize signal"},
	"ProcessSpec":          {anyone: "sandbox_id args env workdir user timeout tty window stdin output_limit keep_stdin_open"},
	"WindowSize":           {anyone: "rows cols"},
	"AttachRequest":        {anyone: "sandbox_id process_id stdin no_follow"},
	"StartProcessRequest":  {anyone: "spec"},
	"ListProcessesRequest": {anyone: "sandbox_id"},
	"WaitProcessRequest":   {anyone: "sandbox_id process_id"},
	"SignalProcessRequest": {anyone: "sandbox_id process_id signal all"},
	"CreateSessionRequest": {anyone: "sandbox_id name shell user env workdir"},
	"ListSessionsRequest":  {anyone: "sandbox_id"},
	"DeleteSessionRequest": {anyone: "sandbox_id name"},
	"SessionExecRequest":   {anyone: "sandbox_id name command timeout output_limit"},
	// RegistryService: a pull writes images, a push sends them away.
	"PullImageRequest": {adminCall: "pull or push images", admin: "reference platform auth force"},
	"PushImageRequest": {adminCall: "pull or push images", admin: "reference source auth"},
	// VolumeService: the runtime checks ownership and the disk quota.
	"CreateVolumeRequest":   {anyone: "name size labels shared from"},
	"SnapshotVolumeRequest": {anyone: "name snapshot"},
	"ListVolumesRequest":    {},
	"GetVolumeRequest":      {anyone: "name"},
	"RemoveVolumeRequest":   {anyone: "name force"},
	"CopyIntoVolumeRequest": {anyone: "name path data"},
	"CopyFromVolumeRequest": {anyone: "name path"},
	// SecretService: the runtime scopes every secret to its owner.
	"CreateSecretRequest":   {anyone: "name value hosts header format allow_http upstream_ca"},
	"ListSecretsRequest":    {},
	"RotateSecretRequest":   {anyone: "name value"},
	"RemoveSecretRequest":   {anyone: "name"},
	"StatVolumePathRequest": {anyone: "name path"},
	"ListVolumeDirRequest":  {anyone: "name path"},
	"ReadVolumeFileRequest": {anyone: "name path"},
	// TokenService: a token's owner is a host user, its scope bounds it.
	"CreateTokenRequest": {anyone: "name ttl", cond: map[protoreflect.Name]*condRule{"owner": tokenOwnerRule, "scope": tokenScopeRule}},
	"ListTokensRequest":  {},
	"DeleteTokenRequest": {anyone: "name", cond: map[protoreflect.Name]*condRule{"owner": tokenOwnerRule}},
	// CodeService: the runtime checks ownership and bounds.
	"RunCodeRequest":            {anyone: "sandbox_id code language context timeout output_limit"},
	"ListCodeContextsRequest":   {anyone: "sandbox_id"},
	"RestartCodeContextRequest": {anyone: "sandbox_id context"},
	"DeleteCodeContextRequest":  {anyone: "sandbox_id context"},
}

// msgRules are one message's rows of requestRules: field names separated
// by spaces, by rule.
type msgRules struct {
	adminCall string // set: the whole call is admins' only, and what it does
	anyone    string
	admin     string
	cond      map[protoreflect.Name]*condRule
}

// condRule is a conditional rule: check says whether a caller that is not
// an admin may send m (the message holding the field) as it is; its error
// says why not and the gate prefixes the field's name.
type condRule struct {
	name  string
	doc   string // for the docs' table
	check func(ctx context.Context, s *Server, m protoreflect.Message) error
}

var pullRule = &condRule{
	name: "pull",
	doc: "`never` (or empty) is anyone's. `missing` is anyone's while the image is present (nothing is fetched); " +
		"on an absent image it is admins' only. `always` is admins' only: it fetches and may replace the image " +
		"everyone's sandboxes are made from.",
	check: checkPull,
}

var ownerRule = &condRule{
	name: "own uid",
	doc:  "a non-admin may name only itself (its user name or uid).",
	check: func(ctx context.Context, _ *Server, m protoreflect.Message) error {
		req, ok := m.Interface().(*boxdv1.ListSandboxesRequest)
		if !ok || req.Owner == "" {
			return nil
		}
		uid, err := lookupOwner(req.Owner)
		if err != nil {
			return nil // the call reports an unknown owner (invalid_argument)
		}
		if c, _ := runtime.CallerFrom(ctx); uid != c.UID {
			return fmt.Errorf("only root and members of boxd's --admin-group may list another user's sandboxes")
		}
		return nil
	},
}

// tokenOwnerRule lets a non-admin name only itself as a token's owner.
var tokenOwnerRule = &condRule{
	name: "own uid",
	doc:  "a non-admin may name only itself (its user name or uid).",
	check: func(ctx context.Context, _ *Server, m protoreflect.Message) error {
		f := m.Descriptor().Fields().ByName("owner")
		owner := m.Get(f).String()
		if owner == "" {
			return nil
		}
		uid, err := lookupOwner(owner)
		if err != nil {
			return nil // the call reports an unknown owner (invalid_argument)
		}
		if c, _ := runtime.CallerFrom(ctx); uid != c.UID {
			return fmt.Errorf("a non-admin may name only itself")
		}
		return nil
	},
}

// tokenScopeRule keeps scope admin for admins: a non-admin's admin token
// would be no admin anyway, but boxd says so when it is made.
var tokenScopeRule = &condRule{
	name: "not admin",
	doc:  "any scope but `admin`, which is admins' only.",
	check: func(_ context.Context, _ *Server, m protoreflect.Message) error {
		if req, ok := m.Interface().(*boxdv1.CreateTokenRequest); ok && req.Scope == ScopeAdmin {
			return fmt.Errorf("only root and members of boxd's --admin-group may create tokens of scope admin")
		}
		return nil
	},
}

// checkPull lets a non-admin's create pull nothing: never, or missing on an
// image that is present. An unknown policy passes: the call itself reports
// it (invalid_argument).
func checkPull(ctx context.Context, s *Server, m protoreflect.Message) error {
	req, ok := m.Interface().(*boxdv1.CreateSandboxRequest)
	if !ok {
		return nil
	}
	switch req.Pull {
	case "always":
		return fmt.Errorf("only root and members of boxd's --admin-group may pull images (always fetches and may replace the shared image); use never, or missing for an image that is present")
	case "missing":
		name := req.Image
		if name == "" {
			name = s.DefaultImage
		}
		if s.Images != nil {
			if _, err := s.Images.Get(ctx, name); err == nil {
				return nil
			}
		}
		return fmt.Errorf("image %q is not present, and only root and members of boxd's --admin-group may pull images (ask an admin to pull it)", name)
	}
	return nil
}

func fieldList(s string) []protoreflect.Name {
	var out []protoreflect.Name
	for _, f := range strings.Fields(s) {
		out = append(out, protoreflect.Name(f))
	}
	return out
}

// ruleOf is a field's rule: "any", "admin", or the conditional.
func ruleOf(md protoreflect.MessageDescriptor, name protoreflect.Name) (string, *condRule) {
	r, ok := requestRules[md.Name()]
	if !ok || md.ParentFile().Package() != "boxd.v1" {
		return "admin", nil
	}
	if c := r.cond[name]; c != nil {
		return c.name, c
	}
	for _, f := range fieldList(r.anyone) {
		if f == name {
			return "any", nil
		}
	}
	return "admin", nil // listed as admin, or missing from the table
}

// procRule is what the gate asks of a non-admin's call to one procedure,
// decided once at start from requestRules: most calls (exec among them)
// have none and pay one map lookup that misses.
type procRule struct {
	adminCall string    // set: the call is admins' only
	check     *msgCheck // set: fields to check in each request message
}

// msgCheck lists the fields of a message that ask something of a
// non-admin, directly or in the messages they carry.
type msgCheck struct{ fields []fieldCheck }

type fieldCheck struct {
	fd    protoreflect.FieldDescriptor
	admin bool
	cond  *condRule
	sub   *msgCheck // a message field whose own fields have rules
}

// procRules is keyed by procedure ("/boxd.v1.SandboxService/CreateSandbox").
var procRules = buildProcRules(apiFiles())

// apiFiles are the API's proto files (package boxd.v1), as registered by
// the generated code.
func apiFiles() []protoreflect.FileDescriptor {
	var out []protoreflect.FileDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("boxd.v1", func(fd protoreflect.FileDescriptor) bool {
		out = append(out, fd)
		return true
	})
	slices.SortFunc(out, func(a, b protoreflect.FileDescriptor) int { return strings.Compare(a.Path(), b.Path()) })
	return out
}

func buildProcRules(files []protoreflect.FileDescriptor) map[string]*procRule {
	out := map[string]*procRule{}
	memo := map[protoreflect.FullName]*msgCheck{}
	for _, fd := range files {
		for i := 0; i < fd.Services().Len(); i++ {
			sv := fd.Services().Get(i)
			for j := 0; j < sv.Methods().Len(); j++ {
				m := sv.Methods().Get(j)
				in := m.Input()
				pr := &procRule{check: compileCheck(in, memo)}
				if r := requestRules[in.Name()]; r.adminCall != "" || allAdmin(in) {
					pr.adminCall = r.adminCall
					if pr.adminCall == "" {
						pr.adminCall = "make this call"
					}
				}
				if pr.adminCall != "" || pr.check != nil {
					out["/"+string(sv.FullName())+"/"+string(m.Name())] = pr
				}
			}
		}
	}
	return out
}

// allAdmin: a request with fields, every one admin-only, is an admin's
// call as a whole (else an empty request would get through).
func allAdmin(md protoreflect.MessageDescriptor) bool {
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		if r, _ := ruleOf(md, fs.Get(i).Name()); r != "admin" {
			return false
		}
	}
	return fs.Len() > 0
}

// compileCheck returns md's checks, or nil if none of its fields (nor of
// the messages it carries) asks anything of a non-admin.
func compileCheck(md protoreflect.MessageDescriptor, memo map[protoreflect.FullName]*msgCheck) *msgCheck {
	if c, ok := memo[md.FullName()]; ok {
		return c
	}
	memo[md.FullName()] = nil // a message that carries itself adds nothing more
	var c msgCheck
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		f := fs.Get(i)
		switch r, cond := ruleOf(md, f.Name()); {
		case cond != nil:
			c.fields = append(c.fields, fieldCheck{fd: f, cond: cond})
		case r == "admin":
			c.fields = append(c.fields, fieldCheck{fd: f, admin: true})
		default:
			var sub *msgCheck
			switch {
			case f.IsMap() && f.MapValue().Kind() == protoreflect.MessageKind:
				sub = compileCheck(f.MapValue().Message(), memo)
			case !f.IsMap() && f.Kind() == protoreflect.MessageKind:
				sub = compileCheck(f.Message(), memo)
			}
			if sub != nil {
				c.fields = append(c.fields, fieldCheck{fd: f, sub: sub})
			}
		}
	}
	if len(c.fields) == 0 {
		return nil
	}
	memo[md.FullName()] = &c
	return &c
}

// run checks m for a caller that is not an admin; the error names the
// field (with its path through the messages carrying it).
func (c *msgCheck) run(ctx context.Context, s *Server, m protoreflect.Message, path string) error {
	for _, f := range c.fields {
		name := path + string(f.fd.Name())
		switch {
		case f.admin:
			if m.Has(f.fd) {
				return fmt.Errorf("%s: only root and members of boxd's --admin-group may set this field", name)
			}
		case f.cond != nil:
			if err := f.cond.check(ctx, s, m); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case f.fd.IsMap():
			var err error
			m.Get(f.fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				err = f.sub.run(ctx, s, v.Message(), name+"["+k.String()+"].")
				return err == nil
			})
			if err != nil {
				return err
			}
		case f.fd.IsList():
			l := m.Get(f.fd).List()
			for i := 0; i < l.Len(); i++ {
				if err := f.sub.run(ctx, s, l.Get(i).Message(), fmt.Sprintf("%s[%d].", name, i)); err != nil {
					return err
				}
			}
		case m.Has(f.fd):
			if err := f.sub.run(ctx, s, m.Get(f.fd).Message(), name+"."); err != nil {
				return err
			}
		}
	}
	return nil
}
