package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// protoJSON is how every --json listing spells API messages: the schema's
// field names, unset fields included.
var protoJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// printJSONArray prints messages as an indented JSON array.
func printJSONArray[T proto.Message](msgs []T) error {
	out := make([]json.RawMessage, 0, len(msgs))
	for _, m := range msgs {
		b, err := protoJSON.Marshal(m)
		if err != nil {
			return err
		}
		out = append(out, b)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Println(string(b))
	return err
}

// printJSON prints one message as indented JSON. protojson varies its
// spacing from build to build on purpose; re-indenting with encoding/json
// gives output that stays byte-for-byte the same, so scripts and diffs of
// inspect output do not change when boxctl is rebuilt.
func printJSON(m proto.Message) error {
	b, err := protoJSON.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	_, err = fmt.Println(out.String())
	return err
}

// printJSONLine prints one message as compact JSON on one line (for
// streams such as watch --json), with the same stable spelling.
func printJSONLine(m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return err
	}
	_, err = fmt.Println(out.String())
	return err
}
