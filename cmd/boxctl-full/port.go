package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// parsePublish reads --publish [ADDR:]HOSTPORT:PORT (ADDR in brackets for
// IPv6, e.g. [::1]:8080:80). HOSTPORT 0 lets boxd pick a free port. The
// numbers are passed on as given; boxd checks their range and names the
// field.
func parsePublish(s string) (*boxdv1.PublishedPort, error) {
	bad := fmt.Errorf("--publish %q: want [ADDR:]HOSTPORT:PORT, e.g. 8080:80 or 127.0.0.1:0:80", s)
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return nil, bad
	}
	port, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil {
		return nil, bad
	}
	rest := s[:i]
	addr := ""
	if j := strings.LastIndexByte(rest, ':'); j >= 0 {
		addr, rest = strings.TrimSuffix(strings.TrimPrefix(rest[:j], "["), "]"), rest[j+1:]
		if addr == "" {
			return nil, bad
		}
	}
	host, err := strconv.ParseUint(rest, 10, 32)
	if err != nil {
		return nil, bad
	}
	return &boxdv1.PublishedPort{HostIp: addr, HostPort: uint32(host), Port: uint32(port)}, nil
}

func publishList(vals []string) ([]*boxdv1.PublishedPort, error) {
	var out []*boxdv1.PublishedPort
	for _, v := range vals {
		p, err := parsePublish(v)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func portAddr(p *boxdv1.PublishedPort) string {
	return net.JoinHostPort(p.HostIp, strconv.Itoa(int(p.HostPort)))
}

func portCommand() *cli.Command {
	return &cli.Command{
		Name:  "port",
		Usage: "list, publish or unpublish a sandbox's ports on the host",
		Description: "boxctl port ID              lists: HOSTADDR -> PORT/tcp\n" +
			"boxctl port ID PORT         publishes sandbox port PORT (127.0.0.1:PORT inside) on a free loopback port\n" +
			"                            (or the one it already has) and prints HOSTADDR\n" +
			"boxctl port --rm ID PORT    stops publishing it",
		ArgsUsage: "ID [PORT]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "address", Aliases: []string{"host"}, Usage: "host address to listen on (default 127.0.0.1; --host is the old name)"},
			&cli.UintFlag{Name: "host-port", Usage: "host port (default: a free one)"},
			&cli.BoolFlag{Name: "rm", Usage: "unpublish PORT"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 || c.NArg() > 2 || (c.Bool("rm") && c.NArg() != 2) {
				return fmt.Errorf("usage: boxctl port ID [PORT] | boxctl port --rm ID PORT")
			}
			id := c.Args().Get(0)
			api := apiClient(c)
			if c.NArg() == 1 {
				resp, err := api.GetSandbox(c.Context, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
				if err != nil {
					return err
				}
				for _, p := range resp.Msg.Sandbox.Ports {
					if p.State == "unpublished" {
						fmt.Printf("%s -> %d/%s unpublished: %s\n", portAddr(p), p.Port, p.Protocol, p.Error)
						continue
					}
					fmt.Printf("%s -> %d/%s\n", portAddr(p), p.Port, p.Protocol)
				}
				return nil
			}
			port, err := strconv.ParseUint(c.Args().Get(1), 10, 32)
			if err != nil {
				return fmt.Errorf("port %q: not a number", c.Args().Get(1))
			}
			if c.Bool("rm") {
				resp, err := api.UnpublishPort(c.Context, connect.NewRequest(&boxdv1.UnpublishPortRequest{SandboxId: id, Port: uint32(port)}))
				if err != nil {
					return err
				}
				for _, p := range resp.Msg.Ports {
					fmt.Println(portAddr(p))
				}
				return nil
			}
			resp, err := api.PublishPort(c.Context, connect.NewRequest(&boxdv1.PublishPortRequest{SandboxId: id,
				Port: &boxdv1.PublishedPort{HostIp: c.String("address"), HostPort: uint32(c.Uint("host-port")), Port: uint32(port)}}))
			if err != nil {
				return err
			}
			fmt.Println(portAddr(resp.Msg.Port))
			return nil
		},
	}
}
