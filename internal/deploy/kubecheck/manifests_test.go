package kubecheck_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/herdguard/herdguard/internal/deploy"
	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/storm"
)

// kustomization is a kustomization.yaml's fields that the manifests use.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// strict decodes a manifest into v, refusing any field v's type lacks (a
// misspelt or misplaced one: the API server would drop or refuse it).
func strict(t *testing.T, f deploy.File, v any) {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict(f.Data, v), "%s:\n%s", f.Name, f.Data)
}

// byName is the rendered files by name.
func byName(files []deploy.File) map[string]deploy.File {
	out := map[string]deploy.File{}
	for _, f := range files {
		out[f.Name] = f
	}
	return out
}

// Every manifest rendered for a storm file decodes strictly into the
// Kubernetes API's own types: an Indexed Job of one pod a shard, all at
// once, their storm file the ConfigMap's, which read as each pod reads it
// (its JOB_COMPLETION_INDEX) runs that pod's slice; a claim every pod
// mounts; a kustomization that lists them. The pod's memory holds what
// the shard's own check will ask for.
func TestManifestsDecodeIntoTheKubernetesTypes(t *testing.T) {
	for _, c := range []struct {
		file   string
		shards int
	}{{"../../../deploy/storm.yaml", 10}, {"../testdata/three-shards.yaml", 3}} {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			stormFile, err := os.ReadFile(c.file)
			require.NoError(t, err)
			files, err := deploy.Render(stormFile, deploy.Options{Name: "storm-a", Image: "registry.example.com/devicesim:v1",
				Storage: "10Gi", StorageClass: "nfs"})
			require.NoError(t, err)
			got := byName(files)

			var k kustomization
			strict(t, got["kustomization.yaml"], &k)
			assert.Equal(t, "Kustomization", k.Kind)
			for _, r := range k.Resources {
				assert.Contains(t, got, r, "the kustomization lists a file that is rendered")
			}

			var cm corev1.ConfigMap
			strict(t, got["storm-configmap.yaml"], &cm)
			assert.Equal(t, "ConfigMap", cm.Kind)
			assert.Equal(t, string(stormFile), cm.Data["storm.yaml"], "the storm file, byte for byte")

			var claim corev1.PersistentVolumeClaim
			strict(t, got["reports-pvc.yaml"], &claim)
			assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, claim.Spec.AccessModes)
			assert.Equal(t, "nfs", *claim.Spec.StorageClassName)
			assert.True(t, claim.Spec.Resources.Requests.Storage().Equal(resource.MustParse("10Gi")))

			var job batchv1.Job
			strict(t, got["job.yaml"], &job)
			assert.Equal(t, "batch/v1", job.APIVersion)
			require.NotNil(t, job.Spec.CompletionMode)
			assert.Equal(t, batchv1.IndexedCompletion, *job.Spec.CompletionMode)
			assert.Equal(t, int32(c.shards), *job.Spec.Completions, "one pod a shard")
			assert.Equal(t, int32(c.shards), *job.Spec.Parallelism, "every shard at once: they meet before they strike")
			require.NotNil(t, job.Spec.BackoffLimitPerIndex)
			assert.Equal(t, int32(0), *job.Spec.BackoffLimitPerIndex, "a storm is not struck twice")
			assert.Nil(t, job.Spec.BackoffLimit, "a failed shard does not end the others: shard 0 merges what they wrote")
			pod := job.Spec.Template.Spec
			assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
			require.Len(t, pod.Containers, 1)
			ctr := pod.Containers[0]
			assert.Equal(t, "registry.example.com/devicesim:v1", ctr.Image)
			assert.True(t, *pod.SecurityContext.RunAsNonRoot)
			assert.Equal(t, int64(65532), *pod.SecurityContext.RunAsUser, "the image's user")
			assert.True(t, *ctr.SecurityContext.ReadOnlyRootFilesystem)

			volumes := map[string]corev1.Volume{}
			for _, v := range pod.Volumes {
				volumes[v.Name] = v
			}
			mounts := map[string]string{}
			for _, m := range ctr.VolumeMounts {
				require.Contains(t, volumes, m.Name, "a mount of a volume the pod has")
				mounts[m.MountPath] = m.Name
			}
			assert.Equal(t, cm.Name, volumes[mounts["/storm"]].ConfigMap.Name)
			assert.Equal(t, claim.Name, volumes[mounts["/reports"]].PersistentVolumeClaim.ClaimName)
			assert.NotNil(t, volumes[mounts["/tmp"]].EmptyDir, "a child process's plan, on a read-only root")

			assert.Equal(t, deploy.Args(), ctr.Args)
			require.Len(t, ctr.Env, 1)
			assert.Equal(t, deploy.RunVar, ctr.Env[0].Name)
			assert.Equal(t, "metadata.labels['batch.kubernetes.io/controller-uid']", ctr.Env[0].ValueFrom.FieldRef.FieldPath)

			// Each pod's storm, as it reads it: its own slice of the fleet.
			for i := range c.shards {
				sf, err := storm.Read(strings.NewReader(cm.Data["storm.yaml"]), func(name string) string {
					return map[string]string{"JOB_COMPLETION_INDEX": strconv.Itoa(i)}[name]
				})
				require.NoError(t, err)
				p, _, err := sf.Plan()
				require.NoError(t, err)
				assert.Equal(t, plan.Shard{Index: i, Count: c.shards}, p.Shard)
				memory := ctr.Resources.Limits[corev1.ResourceMemory]
				assert.Greater(t, memory.Value(), int64(p.Footprint()), "the pod's memory holds what shard %d's check asks", i)
				assert.True(t, memory.Equal(ctr.Resources.Requests[corev1.ResourceMemory]), "requested as it is limited")
			}

			var reader corev1.Pod
			strict(t, got["reports-reader.yaml"], &reader)
			assert.Equal(t, claim.Name, reader.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
			assert.False(t, slices.Contains(k.Resources, "reports-reader.yaml"), "applied after the storm, not with it")
		})
	}
}

// The strict decoding refuses what the API server would not take: the
// test above would catch a misspelt field.
func TestStrictDecodingRefusesAnUnknownField(t *testing.T) {
	var job batchv1.Job
	bad := deploy.File{Name: "job.yaml", Data: []byte("apiVersion: batch/v1\nkind: Job\nspec:\n  completionsMode: Indexed\n")}
	assert.ErrorContains(t, yaml.UnmarshalStrict(bad.Data, &job), "completionsMode")
}
