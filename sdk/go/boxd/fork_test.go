package boxd

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestForkOptionsSetEveryField: every ForkSandboxRequest field but the
// source's id is set by a ForkOptions field (the CLI's fork flags, the
// Python and TypeScript SDKs' fork options), and each ForkOptions field
// sets one.
func TestForkOptionsSetEveryField(t *testing.T) {
	set := map[protoreflect.Name]bool{}
	typ := reflect.TypeFor[ForkOptions]()
	for i := range typ.NumField() {
		var o ForkOptions
		reflect.ValueOf(&o).Elem().Field(i).Set(sample(typ.Field(i).Type))
		req := o.request("sb").ProtoReflect()
		n := 0
		req.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if fd.Name() != "sandbox_id" {
				set[fd.Name()] = true
				n++
			}
			return true
		})
		if n == 0 {
			t.Errorf("ForkOptions.%s sets no field", typ.Field(i).Name)
		}
	}
	fields := (&ForkOptions{}).request("sb").ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if name := fields.Get(i).Name(); name != "sandbox_id" && !set[name] {
			t.Errorf("no ForkOptions field sets %s", name)
		}
	}
}
