package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// statsCommand shows resource use like docker stats: it streams (the table
// redrawn each interval) unless --no-stream.
func statsCommand() *cli.Command {
	return &cli.Command{
		Name:      "stats",
		Usage:     "show sandboxes' resource use: CPU, memory, pids, block and network I/O, OOM kills",
		ArgsUsage: "[ID...]",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "no-stream", Usage: "print one sample and exit"},
			&cli.DurationFlag{Name: "interval", Value: 0, Usage: "time between samples (default 1s)"},
			&cli.BoolFlag{Name: "json", Usage: "print each sample as one JSON line"},
		},
		Action: func(c *cli.Context) error {
			req := &boxdv1.StatsRequest{Ids: c.Args().Slice(), Stream: !c.Bool("no-stream")}
			if d := c.Duration("interval"); d != 0 {
				req.Interval = d.String()
			}
			stream, err := apiClient(c).Stats(c.Context, connect.NewRequest(req))
			if err != nil {
				return err
			}
			defer stream.Close()
			first := true
			for stream.Receive() {
				msg := stream.Msg()
				if c.Bool("json") {
					b, err := protoJSON.Marshal(msg)
					if err != nil {
						return err
					}
					fmt.Println(string(b))
					continue
				}
				if req.Stream && isTerminal(os.Stdout) {
					fmt.Print("\033[2J\033[H") // clear, as docker stats redraws
				} else if !first {
					fmt.Println()
				}
				first = false
				if err := printStats(os.Stdout, msg); err != nil {
					return err
				}
			}
			return stream.Err()
		},
	}
}

func printStats(w io.Writer, msg *boxdv1.StatsResponse) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tCPU %\tMEM USAGE / LIMIT\tMEM PEAK\tPIDS\tBLOCK I/O\tNET I/O\tOOM KILLS")
	for _, s := range msg.Sandboxes {
		u := s.Usage
		if u == nil {
			u = &boxdv1.Usage{}
		}
		limit := uint64(s.MemoryLimitBytes)
		if u.MemoryLimitBytes != 0 && u.MemoryLimitBytes < limit {
			limit = u.MemoryLimitBytes
		}
		net := "-"
		if u.Network {
			net = size(u.NetRxBytes) + " / " + size(u.NetTxBytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f%%\t%s / %s\t%s\t%d\t%s / %s\t%s\t%d\n",
			s.Id, dash(s.Name), s.State, s.CpuPercent, size(u.MemoryBytes), size(limit), size(u.MemoryPeakBytes), u.Pids,
			size(u.BlockReadBytes), size(u.BlockWriteBytes), net, u.OomKills)
	}
	return tw.Flush()
}

// size prints bytes as docker stats does: 1.5MiB, 12kB-style binary units.
func size(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%dB", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f%ciB", float64(b)/float64(div), "KMGTP"[exp])
}
