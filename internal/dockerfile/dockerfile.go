// Package build reads what a Dockerfile build needs: the Dockerfile itself
// (buildkit's parser, then boxd's subset of instructions) and the build
// context the client sent (a tar held in memory), from which COPY and ADD
// take files without ever leaving it. Running the steps is runtime's job.
package dockerfile

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// MaxDockerfile bounds the Dockerfile's size.
const MaxDockerfile = 1 << 20

// Step is one instruction after FROM.
type Step struct {
	Line     int    // 1-based line in the Dockerfile
	Original string // the instruction as written, for messages
	Cmd      instructions.Command
}

// Dockerfile is a parsed single-stage Dockerfile.
type Dockerfile struct {
	// MetaArgs are the ARGs before FROM; they may be used in FROM only.
	MetaArgs []*instructions.ArgCommand
	From     *instructions.Stage
	FromLine int
	Steps    []Step
}

// LineError is an error about one line of the Dockerfile. It is bad input
// (invalid_argument) unless Cause says otherwise.
type LineError struct {
	Line  int
	Msg   string
	Cause error // wrapped; errdefs.ErrInvalidArgument when nil
}

func (e *LineError) Error() string {
	if e.Line <= 0 {
		return "Dockerfile: " + e.Msg
	}
	return fmt.Sprintf("Dockerfile line %d: %s", e.Line, e.Msg)
}

func (e *LineError) Unwrap() error {
	if e.Cause != nil {
		return e.Cause
	}
	return errdefs.ErrInvalidArgument
}

// Errf makes a LineError.
func Errf(line int, cause error, format string, args ...any) error {
	return &LineError{Line: line, Msg: fmt.Sprintf(format, args...), Cause: cause}
}

// Parse reads a Dockerfile and checks that boxd can build it: one FROM,
// then only the instructions boxd runs, without flags it does not know.
func Parse(src []byte) (*Dockerfile, error) {
	if len(src) > MaxDockerfile {
		return nil, Errf(0, nil, "%d bytes, at most %d allowed", len(src), MaxDockerfile)
	}
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		return nil, Errf(lineOf(err), nil, "syntax error: %v", err)
	}
	df := &Dockerfile{}
	for _, node := range res.AST.Children {
		line := node.StartLine
		orig := strings.TrimSpace(node.Original)
		if len(node.Heredocs) > 0 {
			return nil, Errf(line, nil, "here-documents are not supported by boxd build: %s", orig)
		}
		cmd, err := instructions.ParseInstruction(node)
		if err != nil {
			return nil, Errf(line, nil, "%s: %v", orig, err)
		}
		switch c := cmd.(type) {
		case *instructions.Stage:
			if df.From != nil {
				return nil, Errf(line, nil, "a second FROM (multi-stage builds) is not supported by boxd build: %s", orig)
			}
			if c.Platform != "" {
				return nil, Errf(line, nil, "FROM --platform is not supported by boxd build: %s", orig)
			}
			df.From, df.FromLine = c, line
			continue
		case *instructions.ArgCommand:
			if df.From == nil {
				df.MetaArgs = append(df.MetaArgs, c)
				continue
			}
		case *instructions.EnvCommand, *instructions.WorkdirCommand, *instructions.UserCommand,
			*instructions.LabelCommand, *instructions.ExposeCommand, *instructions.EntrypointCommand,
			*instructions.CmdCommand:
		case *instructions.RunCommand:
			if len(node.Flags) > 0 {
				return nil, Errf(line, nil, "RUN flags (%s) are not supported by boxd build", strings.Join(node.Flags, " "))
			}
		case *instructions.CopyCommand:
			if c.From != "" || c.Chmod != "" || c.Link || c.Parents || len(c.ExcludePatterns) > 0 {
				return nil, Errf(line, nil, "COPY flags other than --chown are not supported by boxd build: %s", orig)
			}
		case *instructions.AddCommand:
			if c.Chmod != "" || c.Link || c.Checksum != "" || c.KeepGitDir != nil || len(c.ExcludePatterns) > 0 || c.Unpack != nil {
				return nil, Errf(line, nil, "ADD flags other than --chown are not supported by boxd build: %s", orig)
			}
		case *instructions.ShellCommand:
			return nil, Errf(line, nil, "SHELL is not supported by boxd build")
		default:
			return nil, Errf(line, nil, "%s is not supported by boxd build", strings.ToUpper(node.Value))
		}
		if df.From == nil {
			return nil, Errf(line, nil, "%s before FROM: the Dockerfile must start with FROM (ARG may come before it)", strings.ToUpper(node.Value))
		}
		df.Steps = append(df.Steps, Step{Line: line, Original: orig, Cmd: cmd.(instructions.Command)})
	}
	if df.From == nil {
		return nil, Errf(0, nil, "no FROM instruction")
	}
	return df, nil
}

// lineOf digs the line number out of a buildkit parse error, if it has one.
func lineOf(err error) int {
	var le *parser.LocationError
	if errors.As(err, &le) && len(le.Locations) > 0 && len(le.Locations[0]) > 0 {
		return le.Locations[0][0].Start.Line
	}
	return 0
}
