// Package deploy renders the Kubernetes manifests that run a storm file's
// fleet as shards: an Indexed Job of one pod a shard, the storm file as a
// ConfigMap every pod reads, and a volume they share to meet on before
// they strike (internal/rendezvous) and to write their reports to. Shard 0
// merges the reports there (devicesim run -merge). The objects are plain
// YAML, listed by a kustomization, so that kubectl apply -k takes them
// and an overlay can change any of them.
package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/herdguard/herdguard/internal/plan"
	"github.com/herdguard/herdguard/internal/storm"
)

// Options are what the manifests need beside the storm file.
type Options struct {
	// Name names the Job; the ConfigMap and the claim are Name-storm and
	// Name-reports.
	Name string
	// Image is devicesim's image (make image builds it).
	Image string
	// Storage is the shared volume's size; StorageClass its class, which
	// must give ReadWriteMany volumes when pods land on several nodes.
	Storage, StorageClass string
}

// File is one manifest: its name in the directory, and its YAML.
type File struct {
	Name string
	Data []byte
}

// IndexVar is the variable a Kubernetes Indexed Job gives each pod its
// index in; RunVar is the Job's own uid, which the pods are given so that
// a run's reports never meet an earlier run's.
const (
	IndexVar = "JOB_COMPLETION_INDEX"
	RunVar   = "RUN_ID"
)

// Paths in the pod.
const (
	stormPath   = "/storm/storm.yaml"
	reportsPath = "/reports"
)

// Render reads a storm file and renders its manifests. The file must run
// its fleet as shards of an Indexed Job: brokers.external.shard
// "${JOB_COMPLETION_INDEX}/N". Render checks the storm every shard will
// run, as shard 0 would, and sizes each pod's memory for its slice.
func Render(stormFile []byte, o Options) ([]File, error) {
	switch {
	case o.Name == "" || o.Image == "":
		return nil, errors.New("deploy: name the Job and the image")
	case strings.ContainsAny(o.Name, " /_.") || strings.ToLower(o.Name) != o.Name:
		return nil, fmt.Errorf("deploy: name %q: lower-case letters, digits and '-'", o.Name)
	}
	p, err := shardPlan(stormFile)
	if err != nil {
		return nil, err
	}
	n := p.Shard.Count
	memory := podMemory(p)
	cpu := fmt.Sprintf("%dm", max(500, int(math.Ceil(float64(p.SliceSize())/devicesPerCore(p)*1000))))
	labels := map[string]string{"app.kubernetes.io/name": "devicesim", "app.kubernetes.io/instance": o.Name}
	// Every pod and container meets the restricted Pod Security Standard,
	// so that a namespace enforcing it admits them (kubecheck checks each
	// field): the image's user, the runtime's seccomp profile, no
	// capability, no privilege escalation, a read-only root.
	nonRoot := podSecurity{RunAsNonRoot: true, RunAsUser: 65532, RunAsGroup: 65532, FSGroup: 65532,
		SeccompProfile: seccomp{Type: "RuntimeDefault"}}
	locked := &containerSecurity{AllowPrivilegeEscalation: false, ReadOnlyRootFilesystem: true,
		Capabilities: capabilities{Drop: []string{"ALL"}}}

	configMap := object{APIVersion: "v1", Kind: "ConfigMap", Metadata: meta{Name: o.Name + "-storm", Labels: labels},
		Data: map[string]string{"storm.yaml": string(stormFile)}}
	claim := object{APIVersion: "v1", Kind: "PersistentVolumeClaim", Metadata: meta{Name: o.Name + "-reports", Labels: labels},
		Spec: claimSpec{AccessModes: []string{"ReadWriteMany"}, StorageClassName: o.StorageClass,
			Resources: resources{Requests: map[string]string{"storage": o.Storage}}}}
	job := object{APIVersion: "batch/v1", Kind: "Job", Metadata: meta{Name: o.Name, Labels: labels}, Spec: jobSpec{
		CompletionMode: "Indexed", Completions: n, Parallelism: n, BackoffLimitPerIndex: 0,
		Template: podTemplate{Metadata: meta{Labels: labels}, Spec: podSpec{
			RestartPolicy:   "Never",
			SecurityContext: nonRoot,
			TopologySpreadConstraints: []spread{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: "ScheduleAnyway",
				LabelSelector: selector{MatchLabels: labels}}},
			Containers: []container{{
				Name: "devicesim", Image: o.Image,
				Args: Args(),
				Env: []envVar{{Name: RunVar, ValueFrom: envSource{FieldRef: fieldRef{
					FieldPath: "metadata.labels['batch.kubernetes.io/controller-uid']"}}}},
				Resources:       &resources{Requests: map[string]string{"cpu": cpu, "memory": memory}, Limits: map[string]string{"memory": memory}},
				SecurityContext: locked,
				VolumeMounts: []mount{{Name: "storm", MountPath: "/storm", ReadOnly: true}, {Name: "reports", MountPath: reportsPath},
					{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []volume{{Name: "storm", ConfigMap: &configMapSource{Name: o.Name + "-storm"}},
				{Name: "reports", PersistentVolumeClaim: &claimSource{ClaimName: o.Name + "-reports"}},
				{Name: "tmp", EmptyDir: &struct{}{}}},
		}},
	}}
	kustomization := kustomize{APIVersion: "kustomize.config.k8s.io/v1beta1", Kind: "Kustomization",
		Resources: []string{"storm-configmap.yaml", "reports-pvc.yaml", "job.yaml"}}
	reader := object{APIVersion: "v1", Kind: "Pod", Metadata: meta{Name: o.Name + "-reports", Labels: labels}, Spec: podSpec{
		RestartPolicy:   "Never",
		SecurityContext: nonRoot,
		Containers: []container{{Name: "reports", Image: "busybox:1.37", Args: []string{"sleep", "3600"},
			SecurityContext: locked, // kubectl cp only reads: its tar writes to stdout
			VolumeMounts:    []mount{{Name: "reports", MountPath: reportsPath, ReadOnly: true}}}},
		Volumes: []volume{{Name: "reports", PersistentVolumeClaim: &claimSource{ClaimName: o.Name + "-reports"}}},
	}}

	var files []File
	for _, f := range []struct {
		name, comment string
		v             any
	}{
		{"kustomization.yaml", "kubectl apply -k DIR applies the storm; reports-reader.yaml is applied after it, to copy the reports out", kustomization},
		{"storm-configmap.yaml", "the storm file every shard runs", configMap},
		{"reports-pvc.yaml", "where the shards meet before they strike, and write their reports", claim},
		{"job.yaml", fmt.Sprintf("%d shards of %s devices, one pod each, all at once; shard 0 merges their reports", n, plan.Thousands(p.Devices)), job},
		{"reports-reader.yaml", "after the Job: kubectl cp " + o.Name + "-reports:/reports ./reports", reader},
	} {
		b, err := yaml.MarshalWithOptions(f.v, yaml.UseLiteralStyleIfMultiline(true), yaml.IndentSequence(true))
		if err != nil {
			return nil, fmt.Errorf("deploy: %s: %w", f.name, err)
		}
		files = append(files, File{Name: f.name, Data: append([]byte("# "+f.comment+"\n"), b...)})
	}
	return files, nil
}

// Args are the devicesim command line of every pod: the storm file, its
// shard's report under the run's own directory, and shard 0's merge.
func Args() []string {
	return []string{"run", "-f", stormPath, "-merge", "-out",
		reportsPath + "/$(" + RunVar + ")/shard-$(" + IndexVar + ")"}
}

// devicesPerCore is how many devices, through the fault proxy, a pod asks
// one core for. 6,000 real agents took a quarter of a core on average
// through a broker restart (docs/large-fleets.md), and most of it in the
// burst at the broker's return: a core for 10,000 keeps that burst from
// binding. 6,000 wire devices took two thirds of their CPU
// (docs/wire.md): a core for 15,000.
func devicesPerCore(p plan.Plan) float64 {
	if p.Engine == plan.Wire {
		return 15_000
	}
	return 10_000
}

// podMemory is a shard's memory request and limit: what the run itself
// estimates (plan.Plan.Footprint, which it refuses a slice beyond), with
// a quarter to spare, in MiB.
func podMemory(p plan.Plan) string {
	return fmt.Sprintf("%dMi", (p.Footprint()*5/4+(1<<20)-1)>>20)
}

// shardPlan is the plan shard 0 reads from the storm file, checked: a
// fleet of shards of an Indexed Job against an external broker.
func shardPlan(stormFile []byte) (plan.Plan, error) {
	getenv := func(name string) string {
		switch name {
		case IndexVar:
			return "0"
		case RunVar:
			return "run"
		}
		return "" // a pod has no other: storm.Read names it
	}
	sf, err := storm.Read(bytes.NewReader(stormFile), getenv)
	if err != nil {
		return plan.Plan{}, fmt.Errorf("deploy: %w", err)
	}
	if sf.Brokers.External == nil || !strings.HasPrefix(sf.Brokers.External.Shard, "0/") ||
		!bytes.Contains(stormFile, []byte("${"+IndexVar+"}/")) {
		return plan.Plan{}, fmt.Errorf("deploy: the storm file runs one shard of an Indexed Job a pod: "+
			"write brokers.external.shard: \"${%s}/N\", N the shards", IndexVar)
	}
	p, _, err := sf.Plan()
	if err != nil {
		return plan.Plan{}, fmt.Errorf("deploy: %w", err)
	}
	// As in the pod: devicesim is the image's entrypoint, and Go raises
	// the descriptor limit to the container's hard limit (524,288 or more
	// under containerd). The pod checks its own when it starts.
	p.Exe, p.Descriptors = "/devicesim", 1<<19
	if p.ReadyDir == "" && p.DisruptAt.After > 0 {
		p.ReadyDir = reportsPath + "/run/ready"
	}
	if err := p.Validate(); err != nil {
		return plan.Plan{}, fmt.Errorf("deploy: shard 0 of the storm would refuse it: %w", err)
	}
	return p, nil
}
