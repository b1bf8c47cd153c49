package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/safetar"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:      "build",
		Usage:     "build an image from a Dockerfile (each RUN in a boxd sandbox without network)",
		ArgsUsage: "CONTEXT",
		Description: "Sends CONTEXT (a directory) and the Dockerfile to boxd, which runs FROM (a local image), RUN,\n" +
			"COPY, ADD (local files), ENV, ARG, WORKDIR, USER, LABEL, EXPOSE, ENTRYPOINT and CMD. Steps\n" +
			"whose inputs did not change come from the cache. Prints each step, then the image's name and digest.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "the Dockerfile (default: CONTEXT/Dockerfile)"},
			&cli.StringFlag{Name: "tag", Aliases: []string{"t"}, Usage: "image name to write", Required: true},
			&cli.StringSliceFlag{Name: "build-arg", Usage: "K=V for an ARG (repeatable)"},
			&cli.BoolFlag{Name: "force", Usage: "replace an image that already exists under the name"},
			&cli.BoolFlag{Name: "no-cache", Usage: "run every step again"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl build [-f Dockerfile] -t REF [--build-arg K=V]... [--force] [--no-cache] CONTEXT")
			}
			dir := c.Args().Get(0)
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return fmt.Errorf("build: context %s is not a directory", dir)
			}
			file := c.String("file")
			if file == "" {
				file = filepath.Join(dir, "Dockerfile")
			}
			df, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("build: read the Dockerfile: %w", err)
			}
			args := map[string]string{}
			for _, kv := range c.StringSlice("build-arg") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					v, ok = os.LookupEnv(k) // docker: --build-arg K takes K from the environment
				}
				if k == "" || !ok {
					return fmt.Errorf("build: --build-arg %q: want K=V", kv)
				}
				args[k] = v
			}
			stream := apiClient(c).BuildImage(c.Context)
			first := &boxdv1.BuildImageRequest{Ref: c.String("tag"), Dockerfile: df, BuildArgs: args, Force: c.Bool("force"), NoCache: c.Bool("no-cache")}
			r := tarPipe(func(w io.Writer) error { return safetar.WriteRootfs(w, dir) })
			defer r.Close()
			err = sendChunks(r, func(b []byte) error {
				msg := &boxdv1.BuildImageRequest{Context: b}
				if first != nil { // the first message carries the first bytes too
					first.Context = b
					msg, first = first, nil
				}
				return stream.Send(msg)
			})
			if first != nil && err == nil {
				err = stream.Send(first)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				_, _ = stream.CloseAndReceive()
				return fmt.Errorf("build: send the context: %w", err)
			}
			resp, err := stream.CloseAndReceive()
			if err != nil {
				return err
			}
			for i, s := range resp.Msg.Steps {
				how := fmt.Sprintf("%.2fs", float64(s.DurationMs)/1000)
				if s.Cached {
					how = "cached"
				}
				fmt.Fprintf(os.Stderr, "step %d/%d (line %d) %s: %s\n", i+1, len(resp.Msg.Steps), s.Line, s.Instruction, how)
			}
			fmt.Printf("%s\t%s\n", resp.Msg.Image.Name, resp.Msg.Image.Digest)
			return nil
		},
	}
}
