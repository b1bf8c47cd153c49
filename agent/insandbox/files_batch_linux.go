//go:build linux

package insandbox

import (
	"encoding/json"
	"fmt"

	"github.com/boxd-dev/boxd/agent/wire"
)

// fsBatchBytes is roughly how much JSON goes in one result frame.
const fsBatchBytes = 64 << 10

// jsonBatcher sends values as JSON arrays in result frames of about
// fsBatchBytes each, so a long listing or search is a few frames rather
// than one per entry. ListDir, Glob, Grep and chown -R share it.
type jsonBatcher struct {
	fw    *wire.FrameWriter
	buf   []byte
	count int
}

// add queues v, sending the batch first if v would make it too large.
func (j *jsonBatcher) add(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return j.addJSON(b)
}

// addJSON queues a value already marshalled.
func (j *jsonBatcher) addJSON(b []byte) error {
	if len(j.buf)+len(b) > fsBatchBytes && j.count > 0 {
		if err := j.flush(); err != nil {
			return err
		}
	}
	if j.count == 0 {
		j.buf = append(j.buf[:0], '[')
	} else {
		j.buf = append(j.buf, ',')
	}
	j.buf = append(j.buf, b...)
	j.count++
	return nil
}

// flush sends what is queued, if anything.
func (j *jsonBatcher) flush() error {
	if j.count == 0 {
		return nil
	}
	j.buf = append(j.buf, ']')
	j.count = 0
	if err := j.fw.WriteFrame(wire.FrameResult, j.buf); err != nil {
		return fmt.Errorf("%w: %v", errFileHostWrite, err)
	}
	return nil
}
