package main

import (
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
