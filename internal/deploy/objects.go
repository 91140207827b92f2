package deploy

// The Kubernetes objects as the manifests write them: the fields used, by
// the API's names. A test decodes every one strictly into k8s.io/api's
// types, so a misspelt field fails there.

type object struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   meta              `yaml:"metadata"`
	Data       map[string]string `yaml:"data,omitempty"`
	Spec       any               `yaml:"spec,omitempty"`
}

type meta struct {
	Name   string            `yaml:"name,omitempty"`
	Labels map[string]string `yaml:"labels,omitempty"`
}

type claimSpec struct {
	AccessModes      []string  `yaml:"accessModes"`
	StorageClassName string    `yaml:"storageClassName,omitempty"`
	Resources        resources `yaml:"resources"`
}

type resources struct {
	Requests map[string]string `yaml:"requests,omitempty"`
	Limits   map[string]string `yaml:"limits,omitempty"`
}

type jobSpec struct {
	CompletionMode string `yaml:"completionMode"`
	Completions    int    `yaml:"completions"`
	Parallelism    int    `yaml:"parallelism"`
	// BackoffLimitPerIndex 0: a shard that fails is not run again, and
	// does not end the others (shard 0 is merging what they wrote).
	BackoffLimitPerIndex int         `yaml:"backoffLimitPerIndex"`
	Template             podTemplate `yaml:"template"`
}

type podTemplate struct {
	Metadata meta    `yaml:"metadata"`
	Spec     podSpec `yaml:"spec"`
}

type podSpec struct {
	RestartPolicy             string      `yaml:"restartPolicy"`
	SecurityContext           podSecurity `yaml:"securityContext"`
	TopologySpreadConstraints []spread    `yaml:"topologySpreadConstraints,omitempty"`
	Containers                []container `yaml:"containers"`
	Volumes                   []volume    `yaml:"volumes"`
}

type podSecurity struct {
	RunAsNonRoot   bool    `yaml:"runAsNonRoot"`
	RunAsUser      int64   `yaml:"runAsUser"`
	RunAsGroup     int64   `yaml:"runAsGroup"`
	FSGroup        int64   `yaml:"fsGroup"`
	SeccompProfile seccomp `yaml:"seccompProfile"`
}

// seccomp is a seccomp profile: RuntimeDefault, the container runtime's,
// which the restricted Pod Security Standard requires (or Localhost).
type seccomp struct {
	Type string `yaml:"type"`
}

type spread struct {
	MaxSkew           int      `yaml:"maxSkew"`
	TopologyKey       string   `yaml:"topologyKey"`
	WhenUnsatisfiable string   `yaml:"whenUnsatisfiable"`
	LabelSelector     selector `yaml:"labelSelector"`
}

type selector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type container struct {
	Name            string             `yaml:"name"`
	Image           string             `yaml:"image"`
	Args            []string           `yaml:"args"`
	Env             []envVar           `yaml:"env,omitempty"`
	Resources       *resources         `yaml:"resources,omitempty"`
	SecurityContext *containerSecurity `yaml:"securityContext,omitempty"`
	VolumeMounts    []mount            `yaml:"volumeMounts"`
}

type envVar struct {
	Name      string    `yaml:"name"`
	ValueFrom envSource `yaml:"valueFrom"`
}

type envSource struct {
	FieldRef fieldRef `yaml:"fieldRef"`
}

type fieldRef struct {
	FieldPath string `yaml:"fieldPath"`
}

type containerSecurity struct {
	AllowPrivilegeEscalation bool         `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   bool         `yaml:"readOnlyRootFilesystem"`
	Capabilities             capabilities `yaml:"capabilities"`
}

type capabilities struct {
	Drop []string `yaml:"drop"`
}

type mount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	ReadOnly  bool   `yaml:"readOnly,omitempty"`
}

type volume struct {
	Name                  string           `yaml:"name"`
	ConfigMap             *configMapSource `yaml:"configMap,omitempty"`
	PersistentVolumeClaim *claimSource     `yaml:"persistentVolumeClaim,omitempty"`
	EmptyDir              *struct{}        `yaml:"emptyDir,omitempty"`
}

type configMapSource struct {
	Name string `yaml:"name"`
}

type claimSource struct {
	ClaimName string `yaml:"claimName"`
}

type kustomize struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
}
