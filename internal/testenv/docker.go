package testenv

import "fmt"

// DockerCLI is the docker client scripts/setup.sh unpacks from Debian's
// docker.io (no daemon comes with it), for the tests of boxd's Docker
// Engine API endpoint.
func DockerCLI() (string, error) {
	d, err := ensureDeps()
	if err != nil {
		return "", err
	}
	if d["docker"] == "" {
		return "", fmt.Errorf("scripts/setup.sh did not report the docker CLI")
	}
	return d["docker"], nil
}
