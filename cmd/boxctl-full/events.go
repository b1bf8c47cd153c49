package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// eventsCommand streams sandbox events like docker events: replayed from
// --since, then live until interrupted (with --no-follow, only the replay).
func eventsCommand() *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "stream sandbox events (created, started, exec_started, exec_exited, oom, died, paused, resumed, expired, idle, restarted, deleted, checkpointed, restored)",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "filter", Aliases: []string{"f"}, Usage: "sandbox=ID or type=TYPE, repeatable"},
			&cli.StringFlag{Name: "since", Usage: "replay events from this RFC 3339 time or duration ago (e.g. 10m); boxd keeps the last hour"},
			&cli.BoolFlag{Name: "no-follow", Usage: "print the replayed events and exit"},
			&cli.BoolFlag{Name: "json", Usage: "print each event as one JSON line"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("usage: boxctl events [--filter K=V]... [--since T] [--no-follow] [--json]")
			}
			api := rpcclient.NewEvents(c.String("socket"))
			stream, err := api.Events(c.Context, connect.NewRequest(&boxdv1.EventsRequest{
				Since: c.String("since"), Filters: c.StringSlice("filter"), Follow: !c.Bool("no-follow"),
			}))
			if err != nil {
				return err
			}
			defer stream.Close()
			for stream.Receive() {
				ev := stream.Msg().Event
				if ev == nil {
					continue // the end of the replay
				}
				if c.Bool("json") {
					b, err := protoJSON.Marshal(ev)
					if err != nil {
						return err
					}
					fmt.Println(string(b))
					continue
				}
				fmt.Println(eventLine(ev))
			}
			return stream.Err()
		},
	}
}

// eventLine is "TIME SANDBOX TYPE k=v ..." with the attributes sorted.
func eventLine(ev *boxdv1.Event) string {
	t := ev.Time
	if pt, err := time.Parse(time.RFC3339Nano, t); err == nil {
		t = pt.Local().Format("2006-01-02T15:04:05.000000000Z07:00")
	}
	keys := make([]string, 0, len(ev.Attrs))
	for k := range ev.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", t, ev.Sandbox, ev.Type)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%q", k, ev.Attrs[k])
	}
	return b.String()
}
