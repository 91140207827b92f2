package deploy_test

import (
	"fmt"
	"os"

	"github.com/herdguard/herdguard/internal/deploy"
)

// The manifests of a storm file whose three shards are an Indexed Job's
// pods.
func ExampleRender() {
	storm, err := os.ReadFile("testdata/three-shards.yaml")
	if err != nil {
		panic(err)
	}
	files, err := deploy.Render(storm, deploy.Options{Name: "storm-a", Image: "registry.example.com/devicesim:v1", Storage: "10Gi"})
	if err != nil {
		panic(err)
	}
	for _, f := range files {
		fmt.Println(f.Name)
	}
	// Output:
	// kustomization.yaml
	// storm-configmap.yaml
	// reports-pvc.yaml
	// job.yaml
	// reports-reader.yaml
}
