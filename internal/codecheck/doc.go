// Package codecheck holds tests that keep boxd's own code in shape: no
// hand-written function longer than a screen in the packages a reader
// most often opens. It has no code of its own.
package codecheck
