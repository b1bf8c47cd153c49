package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Checkpoint saves container id's sandbox (runsc checkpoint) into
// imageDir, which must exist: its memory, its kernel state and the changes
// to its root filesystem, which runsc keeps in its own overlay. Unless
// leaveRunning, the sandbox exits once saved. root is runsc's state root
// the shim uses for the container's namespace.
//
// The shim offers no checkpoint through containerd's task API (its
// Checkpoint answers "not implemented"), so boxd runs runsc itself on the
// state root the shim uses, as gVisor's own task server does.
func Checkpoint(ctx context.Context, info Info, root, id, imageDir string, leaveRunning bool) error {
	args := []string{"--root=" + root, "checkpoint", "--image-path=" + imageDir}
	if leaveRunning {
		args = append(args, "--leave-running")
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, info.Runsc, append(args, id)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("runsc checkpoint: %w: %s", err, firstLine(out.String()))
	}
	return nil
}

// firstLine is the first line of a runsc error (whose next lines can be a
// whole Go stack), bounded.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 500 {
		s = s[:500] + "..."
	}
	return s
}

// RestoringName is the file in a sandbox's checkpoint directory (next to
// its image directory, ImageName) whose presence makes the wrapper turn
// the start of that sandbox's task into a restore. boxd writes it just
// before it starts the task and removes it after.
const (
	RestoringName = "restoring"
	ImageName     = "image"
)

// WriteWrapper writes the runsc the shim runs (binary_name) into dir and
// returns its path. The shim offers no restore through containerd's task
// API (only through gVisor's own Go extensions, which a stock shim has
// none of), and containerd takes only runc's options type per task, so
// the wrapper does it: it runs info.Runsc with the same arguments, except
// that `start ID` (the last two arguments) becomes `restore
// --image-path=SANDBOXES/ID/checkpoint/image --detach ID` while boxd has
// marked that sandbox restoring (RestoringName): runsc then restores into
// the container the shim's `runsc create` made, as runsc's restore does
// for a container that exists. Both files are in host-root-only
// directories.
func WriteWrapper(dir string, info Info, sandboxes string) (string, error) {
	for _, p := range []string{info.Runsc, sandboxes} {
		if !filepath.IsAbs(p) || strings.ContainsAny(p, "'\n") {
			return "", fmt.Errorf("gvisor: path %q cannot go into the runsc wrapper", p)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("gvisor: runsc wrapper: %w", err)
	}
	wrapper := filepath.Join(dir, "runsc")
	script := fmt.Sprintf(`#!/bin/sh
# Written by boxd: the runsc gVisor's shim runs. Every call goes to runsc
# as it is, except the start of the task of a sandbox boxd is restoring,
# which becomes a restore from the sandbox's checkpoint image.
if [ "$#" -ge 2 ]; then
	eval "id=\${$#}"
	eval "verb=\${$(($# - 1))}"
	d='%s'/"$id"/checkpoint
	case $id in
	'' | .* | *[!A-Za-z0-9_.-]*) ;;
	*)
		if [ "$verb" = start ] && [ -f "$d/%s" ] && [ -d "$d/%s" ]; then
			n=$#
			i=0
			for a do
				i=$((i+1))
				if [ "$i" -eq "$((n-1))" ]; then
					set -- "$@" restore "--image-path=$d/%s" --detach
				else
					set -- "$@" "$a"
				fi
			done
			shift "$n"
		fi
		;;
	esac
fi
exec '%s' "$@"
`, sandboxes, RestoringName, ImageName, ImageName, info.Runsc)
	tmp := wrapper + ".tmp"
	if err := os.WriteFile(tmp, []byte(script), 0o700); err != nil {
		return "", fmt.Errorf("gvisor: runsc wrapper: %w", err)
	}
	if err := os.Rename(tmp, wrapper); err != nil {
		return "", fmt.Errorf("gvisor: runsc wrapper: %w", err)
	}
	return wrapper, nil
}
