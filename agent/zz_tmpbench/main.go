package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/boxd-dev/boxd/agent"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "all" {
		agent.StartReaper()
	}
	d, _ := os.MkdirTemp("", "bb")
	defer os.RemoveAll(d)
	ln, err := agent.Listen(filepath.Join(d, "s"))
	if err != nil {
		panic(err)
	}
	srv := &agent.Server{BaseEnv: os.Environ(), Workdir: d}
	go srv.Serve(ln)
	c := agent.NewClient(filepath.Join(d, "s"))
	ctx := context.Background()
	n := 1000
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := c.Exec(ctx, agent.ExecRequest{Args: []string{"/bin/true"}}, nil, nil, nil); err != nil {
			panic(err)
		}
	}
	fmt.Println(os.Args[1:], time.Since(start)/time.Duration(n))
}
