// Command apidoc writes docs/api.md, boxd's API reference, from the proto
// comments. It reads a FileDescriptorSet that protoc wrote with
// --include_source_info and --include_imports (scripts/generate.sh runs
// both) and documents the files of package boxd.v1: services and their
// methods, messages and their fields, enums and their values, each with its
// leading and trailing comments.
//
// A Go program that walks the descriptors with protodesc/protoreflect, not
// an external protoc plugin: go.mod already pins google.golang.org/protobuf,
// so the reference needs nothing new installed and the output is ours to
// keep stable (its bytes are checked in sync by make check-generated).
//
//	apidoc DESCRIPTOR_SET > docs/api.md
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// pkg is the package documented; imports of other packages are not.
const pkg = "boxd.v1"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: apidoc DESCRIPTOR_SET > api.md")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "apidoc:", err)
		os.Exit(1)
	}
}

func run(path string, w io.Writer) error {
	files, err := load(path)
	if err != nil {
		return err
	}
	return render(w, files)
}

// load reads a descriptor set and returns the files of pkg, by name.
func load(path string) ([]protoreflect.FileDescriptor, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("%s: not a FileDescriptorSet: %w", path, err)
	}
	reg, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (was it written with --include_imports?)", path, err)
	}
	var out []protoreflect.FileDescriptor
	reg.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() == pkg {
			out = append(out, fd)
		}
		return true
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no file of package %s", path, pkg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path() < out[j].Path() })
	for _, fd := range out {
		if fd.SourceLocations().Len() == 0 {
			return nil, fmt.Errorf("%s: %s has no comments (was it written with --include_source_info?)", path, fd.Path())
		}
	}
	return out, nil
}

// doc is d's leading comment followed by its trailing one, as paragraphs.
func doc(d protoreflect.Descriptor) string {
	loc := d.ParentFile().SourceLocations().ByDescriptor(d)
	var parts []string
	for _, c := range []string{loc.LeadingComments, loc.TrailingComments} {
		if c = clean(c); c != "" {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "\n\n")
}

// clean drops the one space after "//" and the blank edges of a comment.
func clean(c string) string {
	lines := strings.Split(strings.TrimRight(c, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(strings.TrimPrefix(l, " "), " ")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// cell is a comment fit for one table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\n\n", "<br>")
	return strings.Join(strings.Fields(s), " ")
}

func anchor(name protoreflect.FullName) string {
	return strings.ReplaceAll(string(name), ".", "-")
}

// typeRef names a message or enum, linked when it is documented here.
func typeRef(d protoreflect.Descriptor) string {
	name := d.FullName()
	if d.ParentFile().Package() == pkg {
		return fmt.Sprintf("[%s](#%s)", strings.TrimPrefix(string(name), pkg+"."), anchor(name))
	}
	return "`" + string(name) + "`"
}

func fieldType(f protoreflect.FieldDescriptor) string {
	if f.IsMap() {
		return fmt.Sprintf("map&lt;%s, %s&gt;", scalar(f.MapKey()), scalar(f.MapValue()))
	}
	t := scalar(f)
	if f.IsList() {
		t = "repeated " + t
	}
	return t
}

func scalar(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return typeRef(f.Message())
	case protoreflect.EnumKind:
		return typeRef(f.Enum())
	}
	return f.Kind().String()
}

func streaming(m protoreflect.MethodDescriptor) string {
	switch {
	case m.IsStreamingClient() && m.IsStreamingServer():
		return "bidirectional stream"
	case m.IsStreamingClient():
		return "client stream"
	case m.IsStreamingServer():
		return "server stream"
	}
	return "unary"
}

func render(w io.Writer, files []protoreflect.FileDescriptor) error {
	p := &printer{w: w}
	p.f("# boxd API reference\n\n")
	p.f("Generated from the comments in `rpc/proto` by `scripts/apidoc` (`make generate`); do not edit by hand.\n")
	p.f("`make check-generated` fails when this file is out of date.\n\n")
	p.f("Every method is served on boxd's Unix socket as gRPC, gRPC-Web and Connect (HTTP/1.1 or HTTP/2,\n")
	p.f("protobuf or JSON) at the path `/<service>/<method>`, e.g. `/boxd.v1.SandboxService/CreateSandbox`.\n")
	p.f("boxd also serves gRPC server reflection (`grpc.reflection.v1`, `v1alpha`) and health (`grpc.health.v1.Health`).\n")
	p.f("Errors are Connect/gRPC codes (`invalid_argument`, `not_found`, `failed_precondition`, `resource_exhausted`, ...).\n\n")

	p.f("## Services\n\n")
	for _, fd := range files {
		for i := 0; i < fd.Services().Len(); i++ {
			p.f("- [%s](#%s)\n", fd.Services().Get(i).FullName(), anchor(fd.Services().Get(i).FullName()))
		}
	}
	p.f("\n")
	for _, fd := range files {
		for i := 0; i < fd.Services().Len(); i++ {
			p.service(fd.Services().Get(i))
		}
	}
	p.f("## Messages and enums\n\n")
	for _, fd := range files {
		p.f("### %s\n\n", fd.Path())
		p.messages(fd.Messages())
		p.enums(fd.Enums())
	}
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) service(s protoreflect.ServiceDescriptor) {
	p.f("<a id=\"%s\"></a>\n\n### %s\n\n", anchor(s.FullName()), s.FullName())
	if d := doc(s); d != "" {
		p.f("%s\n\n", d)
	}
	p.f("| Method | Request | Response | Kind | Description |\n| --- | --- | --- | --- | --- |\n")
	for i := 0; i < s.Methods().Len(); i++ {
		m := s.Methods().Get(i)
		p.f("| `%s` | %s | %s | %s | %s |\n", m.Name(), typeRef(m.Input()), typeRef(m.Output()), streaming(m), cell(doc(m)))
	}
	p.f("\n")
}

func (p *printer) messages(ms protoreflect.MessageDescriptors) {
	for i := 0; i < ms.Len(); i++ {
		m := ms.Get(i)
		if m.IsMapEntry() {
			continue
		}
		p.f("<a id=\"%s\"></a>\n\n#### %s\n\n", anchor(m.FullName()), strings.TrimPrefix(string(m.FullName()), pkg+"."))
		if d := doc(m); d != "" {
			p.f("%s\n\n", d)
		}
		if m.Fields().Len() == 0 {
			p.f("No fields.\n\n")
		} else {
			p.f("| Field | Number | Type | Description |\n| --- | --- | --- | --- |\n")
			for j := 0; j < m.Fields().Len(); j++ {
				fl := m.Fields().Get(j)
				desc := cell(doc(fl))
				if o := fl.ContainingOneof(); o != nil && !o.IsSynthetic() {
					desc = strings.TrimSpace(fmt.Sprintf("One of `%s`. %s", o.Name(), desc))
				}
				p.f("| `%s` | %d | %s | %s |\n", fl.Name(), fl.Number(), fieldType(fl), desc)
			}
			p.f("\n")
		}
		p.messages(m.Messages())
		p.enums(m.Enums())
	}
}

func (p *printer) enums(es protoreflect.EnumDescriptors) {
	for i := 0; i < es.Len(); i++ {
		e := es.Get(i)
		p.f("<a id=\"%s\"></a>\n\n#### %s (enum)\n\n", anchor(e.FullName()), strings.TrimPrefix(string(e.FullName()), pkg+"."))
		if d := doc(e); d != "" {
			p.f("%s\n\n", d)
		}
		p.f("| Value | Number | Description |\n| --- | --- | --- |\n")
		for j := 0; j < e.Values().Len(); j++ {
			v := e.Values().Get(j)
			p.f("| `%s` | %d | %s |\n", v.Name(), v.Number(), cell(doc(v)))
		}
		p.f("\n")
	}
}
