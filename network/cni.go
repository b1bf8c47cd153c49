package network

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// cniNets are CNI networks a sandbox is attached to in order, each with
// the interface name it gets. They run through libcni directly rather
// than go-cni, which has no way to set libcni's cache directory: each
// boxd instance keeps its cached results apart (Config.CNICacheDir).
type cniNets struct {
	lib  *libcni.CNIConfig
	nets []cniNet
}

type cniNet struct {
	list   *libcni.NetworkConfigList
	ifName string
}

// loopbackConf is the CNI loopback network the legacy layout ran first
// (go-cni's WithLoNetwork, the same name, so its cached results match).
const loopbackConf = `{"cniVersion": "0.3.1", "name": "cni-loopback", "plugins": [{"type": "loopback"}]}`

// newCNI loads conflist (and, for the legacy layout, the loopback network
// before it); cacheDir "" is libcni's default, /var/lib/cni.
func newCNI(pluginDirs []string, cacheDir, conflist string, legacy bool) (*cniNets, error) {
	exec := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
	c := &cniNets{lib: libcni.NewCNIConfigWithCacheDir(pluginDirs, cacheDir, exec)}
	main, err := libcni.ConfListFromBytes([]byte(conflist))
	if err != nil {
		return nil, fmt.Errorf("cni: %w", err)
	}
	if legacy {
		lo, err := libcni.ConfListFromBytes([]byte(loopbackConf))
		if err != nil {
			return nil, fmt.Errorf("cni: %w", err)
		}
		c.nets = append(c.nets, cniNet{list: lo, ifName: "lo"}, cniNet{list: main, ifName: legacyIfName})
	} else {
		c.nets = append(c.nets, cniNet{list: main, ifName: ifName})
	}
	return c, nil
}

func rtConf(id, path, ifName string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: path, IfName: ifName}
}

// add attaches namespace path to every network and returns their results.
func (c *cniNets) add(ctx context.Context, id, path string) ([]*types100.Result, error) {
	var out []*types100.Result
	for _, n := range c.nets {
		r, err := c.lib.AddNetworkList(ctx, n.list, rtConf(id, path, n.ifName))
		if err != nil {
			return nil, err
		}
		res, err := types100.NewResultFromResult(r)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// remove detaches id from every network. As go-cni does, a plugin's "not
// found" (already gone), or a missing file when the namespace is gone
// (path ""), is not an error.
func (c *cniNets) remove(ctx context.Context, id, path string) error {
	for _, n := range c.nets {
		if err := c.lib.DelNetworkList(ctx, n.list, rtConf(id, path, n.ifName)); err != nil {
			if (path == "" && strings.Contains(err.Error(), "no such file or directory")) || strings.Contains(err.Error(), "not found") {
				continue
			}
			return err
		}
	}
	return nil
}
