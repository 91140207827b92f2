# make test: everything CI checks. make sim: the simulator's default run.
GO        ?= go
FIRMWARE  := $(foreach d,publisher reconnect device remoteconfig,$(if $(wildcard $(d)/*.go),./$(d)/...))
# the module's internal packages the firmware binary ships: tested on ARM too
FIRMWARE_INTERNAL = $(if $(wildcard cmd/deviceagent/*.go),$(shell $(GO) list -deps ./cmd/deviceagent | sed -n 's|^github.com/herdguard/herdguard/internal/|./internal/|p'))
ARM_BUILD := $(FIRMWARE) $(if $(wildcard cmd/deviceagent/*.go),./cmd/deviceagent)
QEMU      := $(shell command -v qemu-arm-static 2>/dev/null)
FUZZTIME  ?= 10s
BENCHSTAT := $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20250813145418-2f7363a06fe1

.PHONY: test vet race stats interop manifests arm arm-test bench fuzz sim docs scale verdict-table verdict-mosquitto soak grid calibrate calibrate-mosquitto calibrate-host wire-100k pgo image

# Tests write only under t.TempDir(): make test fails if it leaves a file
# in the tree (ignored ones included) that was not there before it. Each
# step says how long it took. The race step and interop leave CPU idle
# (their real-time storms mostly wait): a step that only computes runs
# beside each at nice 19, on the CPU it leaves, and its output follows.
# The statistical tests go beside the race step; the ARM tests under qemu,
# which time nothing but run slowly, beside interop, the lighter of the two.
TREE_STATE = git status --porcelain --ignored --untracked-files=all
test:
	@before=$$(mktemp); $(TREE_STATE) > $$before 2>/dev/null; \
	  pair() { fg=$$1; shift; start=$$(date +%s); out=$$(mktemp); \
	    ( for s in "$$@"; do nice -n 19 $(MAKE) --no-print-directory "$$s" || exit; \
	        echo "make $$s: $$(( $$(date +%s) - start )) s since $$fg began"; done > $$out 2>&1 ) & pid=$$!; \
	    $(MAKE) --no-print-directory $$fg; a=$$?; echo "make $$fg: $$(( $$(date +%s) - start )) s"; \
	    wait $$pid; b=$$?; cat $$out; rm -f $$out; echo "make $$*, beside $$fg: $$(( $$(date +%s) - start )) s"; \
	    [ $$a -eq 0 ] && [ $$b -eq 0 ]; }; \
	  start=$$(date +%s); $(MAKE) --no-print-directory vet && echo "make vet: $$(( $$(date +%s) - start )) s" && \
	  pair race stats && pair interop manifests arm arm-test || { rm -f $$before; exit 1; }; \
	  if git rev-parse --git-dir >/dev/null 2>&1 && ! $(TREE_STATE) | diff $$before - >/dev/null; then \
	    echo "make test left files in the tree:"; $(TREE_STATE) | diff $$before - | grep '^>'; rm -f $$before; exit 1; \
	  fi; rm -f $$before

# Tests build without profile-guided optimization: cmd/devicesim's profile
# is for the binary users run, and building its tests with it compiled the
# standard library and every dependency of theirs twice more
# (docs/measurements.md).
test vet race stats interop manifests arm arm-test: export GOFLAGS := $(filter-out -pgo=off,$(GOFLAGS)) -pgo=off

# The firmware without MQTT 5 (-tags nomqtt5) is vetted and its agent
# tested too: what leaves paho.golang out must still build and hold.
vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$unformatted" ] || { echo "gofmt would change: $$unformatted"; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags nomqtt5 ./device/ ./cmd/deviceagent/
	$(GO) test -count=1 -tags nomqtt5 ./device/

# The longest packages first, so that the others fill the second core
# beside them rather than leave it idle at the end; three packages at once,
# since the real-time tests (mosquitto through the fault proxy) mostly wait
# (on two cores three at once was faster than two, and as fast as four).
SLOWEST := $(foreach d,internal/fleetsim cmd/devicesim publisher,$(if $(wildcard $(d)/*.go),./$(d)/))
race:
	$(GO) test -race -p 3 -count=1 $(SLOWEST) ./...

# Every policy against fleets of 1,000 to a million devices and brokers
# admitting 500 to 50,000 connects/s, refused over the limit (virtual time),
# then fleet-safe (and equal jitter, the other shape that passes) with the
# excess held or dropped instead. docs/measurements.md shows both, and how
# long they take.
grid:
	$(GO) run ./cmd/devicesim grid
	$(GO) run ./cmd/devicesim grid -admit-mode pause,disconnect -policies fleet-safe,equal -out devicesim-report/grid-modes
	$(GO) run ./cmd/devicesim grid -devices 10000,100000,1000000 -admit-rates 500,5000,50000 \
	  -policies iotcore,full,fleet-safe -mqtt 5,5-deaf -full -out devicesim-report/grid-mqtt5

# The profile devicesim is compiled by (profile-guided optimization: go build
# and go run use cmd/devicesim/default.pgo on their own): make grid's two
# commands and the million- and ten-million-device runs of
# docs/large-fleets.md, each profiled, merged. Make it again after a change
# that moves the engine's time.
PGO_DIR := devicesim-report/pgo
pgo:
	mkdir -p $(PGO_DIR)
	$(GO) run ./cmd/devicesim -cpuprofile $(PGO_DIR)/grid.prof grid -out $(PGO_DIR)/grid
	$(GO) run ./cmd/devicesim -cpuprofile $(PGO_DIR)/grid-modes.prof grid -admit-mode pause,disconnect -policies fleet-safe,equal -out $(PGO_DIR)/grid-modes
	$(GO) run ./cmd/devicesim -cpuprofile $(PGO_DIR)/million.prof run -engine virtual -devices 1000000 -scenario throttled-restart \
	  -policy full -admit-rate 10000 -admit-burst 500 -outage 60s -out $(PGO_DIR)/million
	$(GO) run ./cmd/devicesim -cpuprofile $(PGO_DIR)/ten-million.prof run -engine virtual -devices 10000000 -policy fleet-safe \
	  -events off -out $(PGO_DIR)/ten-million
	$(GO) tool pprof -proto $(PGO_DIR)/grid.prof $(PGO_DIR)/grid-modes.prof $(PGO_DIR)/million.prof $(PGO_DIR)/ten-million.prof \
	  > $(PGO_DIR)/default.pgo
	mv $(PGO_DIR)/default.pgo cmd/devicesim/default.pgo

# The model against the code: every cell on both engines, the real agents in
# virtual time (a synctest bubble, so no host in it), at 2,000 and 10,000
# devices, three seeds each. Do they agree within 5 %? docs/measurements.md shows the
# tables; devicesim-report/calibration/ gets them as JSON and markdown.
calibrate:
	$(GO) test -count=1 -v -timeout 4h -run '^TestCalibrateFull$$' ./internal/experiment/ \
	  -args -calibrate.full -calibrate.out $(CURDIR)/devicesim-report/calibration

# The agents, the wire engine and the model through the fault proxy to
# mosquitto: 2,000 devices, a restart and a throttled restart, MQTT 3.1.1
# and 5, the real devices at 5x (iotcore refused over the limit in real
# time: experiment.BrokerCalibrationCells says why).
calibrate-mosquitto:
	$(GO) test -count=1 -v -timeout 4h -run '^TestCalibrateMosquitto$$' ./internal/experiment/ \
	  -args -calibrate.mosquitto -calibrate.out $(CURDIR)/devicesim-report/calibration

# A hundred thousand real MQTT sessions on this machine: the sixteen shards
# of examples/wire-100k/storm.yaml against six mosquittos as one cluster,
# through a throttled restart; every device back, one merged report, the
# memory of every process summed (docs/wire.md).
wire-100k:
	$(GO) test -count=1 -v -timeout 2h -run '^TestHundredThousandRealSessions$$' ./cmd/devicesim/ \
	  -args -wire.100k -wire.out $(CURDIR)/devicesim-report/wire-100k

# What this host serves: the same cells with the agents in wall-clock time
# at 5x, 2,000 devices (about 18 minutes). A row the host bound is about the
# machine, not the model.
calibrate-host:
	$(GO) run ./cmd/devicesim calibrate -out devicesim-report/calibration-host

# 10,000 in-memory devices with telemetry through ten storms; goroutines and
# live heap must come back within 10 % of the baseline, no message lost, no
# more duplicates than session losses. make test runs a short one (1,000
# devices, three storms).
soak:
	$(GO) run ./cmd/devicesim soak

# The statistical tests at full strength, without the race detector (which
# slows them tenfold; under -race they run 1 seed): the verdict's ground
# truth over 20 seeds a cell, the judge's other known series, and every run
# with a known verdict, the engines' agreement and the telemetry-loss test
# over 20 consecutive seeds, the real agents in virtual time; and every
# page of a durable queue damaged in turn; which reconnect policy a fleet
# runs, named from its attempts, over 20 seeds a cell (no cell named wrong
# more than once); and the runs the race detector
# skips: the virtual engine's golden outputs past 2,000 devices, and every
# grid cell cut early run again to the end. Every test that runs
# stormstatstest.Seeds() or fleetsimtest.Seeds() seeds is named here, and
# its package listed (TestEveryStatisticalTestRunsInMakeStats); the
# longest packages first. Their collector runs at GOGC=400 unless GOGC is
# set: they allocate freely, and the step spends 15 % less CPU for about
# twice the peak RSS (docs/measurements.md). The race step keeps the
# default, which the device's heap bounds are measured under.
stats: export GOGC ?= 400
stats:
	$(GO) test -count=1 -run 'GroundTruth|TextbookCases|LogsAsTheyAreWritten|AWSStreamDropped|EachRecovery|RestartedTwice|RollingRestart|ClusterTakesATimeline|RoundsOfRetries|Newcomers|StrayUnderAnHour|KnownVerdicts|Soak|EnginesAgree|TelemetryLoses|Failover|EveryPageDamaged|VirtualEngineGolden|CutEarly|CutOnItsAttempts|WinsOnEverySeed|HearTheBroker|ScaledDownFleetPredicts|RecommendationsHoldOnRealAgents|PlannerAgreesWithTheGrid|InferenceAccuracy|EveryDocumentedCommandIsRunOrMarked|GeneratedDocBlocks|ReportOpensInABrowser' ./internal/policyfit/ ./internal/experiment/ ./internal/virtual/ ./internal/arrivallog/ ./internal/stormstats/ ./cmd/devicesim/ ./internal/planner/ ./internal/fleetsim/ ./internal/agents/ ./internal/agents/cluster/ ./publisher/ ./internal/arrivallog/disruption/

# The docs' worked examples, rewritten with their commands' output (the
# blocks after a "<!-- make docs: ... -->" line); make stats checks them.
docs:
	$(GO) test -count=1 -run '^TestGeneratedDocBlocks$$' ./cmd/devicesim/ -args -docs.update

# devicesim deploy's manifests decoded strictly into k8s.io/api's types,
# and every pod checked against the restricted Pod Security Standard.
# A module of its own (internal/deploy/kubecheck): k8s.io/api needs Go
# 1.26, which neither the firmware nor devicesim should ask for.
manifests:
	cd internal/deploy/kubecheck && $(GO) vet ./... && $(GO) test -count=1 ./...

# The storms against real brokers, in real time, side by side: each mostly
# waits, and only niced steps run beside them. RabbitMQ, the second real
# broker (Debian's rabbitmq-server, a node of its own a policy): three
# storms in a row through the fault proxy, then its own log file judged as
# a user would, against the verdict each run measured at the proxy.
# devicesim plan's check.yaml against mosquitto, as its users run it. Four
# devicesim processes as the shards of a Kubernetes Indexed Job strike one
# mosquitto restart at one instant and merge, against one process running
# the whole fleet; and a shard's child processes run its slice alone.
# Fleets written by others (paho-mqtt for Python, MQTT.js,
# paho.mqtt.golang), 200 clients each, on their own reconnect and with
# full jitter, through devicesim proxy to mosquitto: each one's verdict
# and the policy it runs (beside the RabbitMQ storms).
interop:
	$(GO) test -count=1 -run '^(TestRabbitMQsOwnLogIsJudgedAsItsStormsWere|TestPlansCheckPassesAgainstMosquitto|TestShardsStrikeOneStormAsOneProcessDoes|TestAShardsChildrenRunItsSliceAlone|TestThirdPartyFleetsThroughDevicesimProxy)$$' ./cmd/devicesim/

# The verdict's measured error rates as docs/verdict.md shows them: every cell of
# the ground truth, a million arrivals a round included, TRUTH_SEEDS seeds each.
# TRUTH_CELLS=plain runs the cells with exact times only, stamped those on
# 1 s, 100 ms and 10 ms ticks.
TRUTH_SEEDS ?= 200
TRUTH_CELLS ?= all
verdict-table:
	$(GO) test -count=1 -timeout 6h -run GroundTruth -v ./internal/stormstats/ \
	  -args -truth.seeds $(TRUTH_SEEDS) -truth.full -truth.table -truth.cells $(TRUTH_CELLS)

# mosquitto's own log judged as README.md tells a user to, against the run's
# verdict at the proxy: ten real-time storms at once, the formula and full
# jitter, five seeds each, all at once (under three minutes; needs mosquitto).
verdict-mosquitto:
	$(GO) test -count=1 -timeout 30m -parallel 10 -run '^TestMosquittosOwnLogIsJudgedAsTheREADMESays$$' -v ./cmd/devicesim/ -args -mosquitto.log

# OCI images of devicesim and deviceagent in build/image/: FROM scratch,
# one static binary, a non-root user, linux/amd64 and linux/arm64, the
# version and the source as labels. Built in Go, without a daemon or a
# download; the same commit gives the same digests.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
SOURCE  := https://github.com/herdguard/herdguard
image:
	@for bin in devicesim deviceagent; do \
	  for arch in amd64 arm64; do \
	    CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags='-s -w' -o build/$$bin-linux-$$arch ./cmd/$$bin || exit 1; \
	  done; \
	  rm -rf build/image/$$bin; \
	  $(GO) run ./cmd/ociimage -out build/image/$$bin -name $$bin -version $(VERSION) -source $(SOURCE) \
	    -created $$(git log -1 --format=%ct 2>/dev/null || echo 0) \
	    linux/amd64=build/$$bin-linux-amd64 linux/arm64=build/$$bin-linux-arm64 || exit 1; \
	done

# 32-bit ARM (GOARM 6 and 7) and arm64 builds of everything a device ships;
# the firmware binary's size budgets and what it may not depend on. Built
# with -tags nomqtt5 (3.1.1 only) the budget is 7.25 MiB: the agent is
# 6,946,978 bytes without the durable telemetry queue, 7,274,658 with it
# (bbolt adds 262,144, the store's page check and epochs 65,536), 7,340,194
# with the defences against a hostile network, and 7,405,730 with those
# against a shared filesystem and a flood. With MQTT 5 (paho.golang) the
# budget is 8 MiB: 7,667,874 bytes, 262,144 more.
AGENT_BUDGET := 7602176
AGENT_BUDGET_MQTT5 := 8388608
# Every ARM build and test is -trimpath, as the size budget's release
# builds are: the GOARM=7 ones then share one compile of the standard
# library and the firmware's dependencies, not two, and the arm64 one
# shares the runtime internal/ociimage's test compiled for its image.
arm:
	GOOS=linux GOARCH=arm GOARM=7 $(GO) build -trimpath $(ARM_BUILD)
	GOOS=linux GOARCH=arm GOARM=6 $(GO) build -trimpath $(ARM_BUILD)
	GOOS=linux GOARCH=arm64 $(GO) build -trimpath $(ARM_BUILD)
ifneq ($(wildcard cmd/deviceagent/*.go),)
	@dir=$$(mktemp -d); trap 'rm -rf $$dir' EXIT; \
	  for build in "mqtt5: $(AGENT_BUDGET_MQTT5)" "nomqtt5:nomqtt5 $(AGENT_BUDGET)"; do \
	    name=$${build%%:*}; rest=$${build#*:}; tags=$${rest% *}; budget=$${rest##* }; \
	    GOOS=linux GOARCH=arm GOARM=7 $(GO) build -tags "$$tags" -ldflags='-s -w' -trimpath -o $$dir/deviceagent-$$name ./cmd/deviceagent || exit 1; \
	    size=$$(stat -c %s $$dir/deviceagent-$$name); \
	    echo "deviceagent GOARCH=arm GOARM=7, -s -w -trimpath, tags '$$tags': $$size bytes (budget $$budget)"; \
	    test $$size -le $$budget || { echo "over the firmware size budget"; exit 1; }; \
	  done
	@if $(GO) list -deps ./cmd/deviceagent | grep -E 'mochi-mqtt|testify|testbroker|configserver|faultproxy|gonum|plot|devicesim|prometheus'; then \
	  echo "cmd/deviceagent depends on packages a device must not ship"; exit 1; fi
endif

# The firmware packages' tests, and those of the internal packages the
# firmware ships, on 32-bit ARM, where misaligned 64-bit atomics
# panic, and the firmware binary's SIGKILL loop (its real main, an ARM build
# under qemu, killed 50 times by the test, which runs natively).
# Skipped (loudly) where qemu-arm-static is not installed.
arm-test:
ifeq ($(QEMU),)
	@echo "qemu-arm-static not installed: skipping the 32-bit ARM test run (.ci/run installs it)"
else
	GOOS=linux GOARCH=arm GOARM=7 $(GO) test -trimpath -count=1 -exec $(QEMU) $(FIRMWARE) $(FIRMWARE_INTERNAL)
ifneq ($(wildcard cmd/deviceagent/*.go),)
	@# the agent's lives run its 32-bit ARM build under qemu, the test natively:
	@# qemu-user's fork of a many-threaded program can hang before its exec
	@dir=$$(mktemp -d); trap 'rm -rf $$dir' EXIT; \
	  GOOS=linux GOARCH=arm GOARM=7 $(GO) test -trimpath -c -o $$dir/deviceagent-arm.test ./cmd/deviceagent || exit 1; \
	  echo "HERDGUARD_AGENT_UNDER='$(QEMU) deviceagent-arm.test' $(GO) test -count=1 -run '^TestSIGKILLLoop' ./cmd/deviceagent"; \
	  HERDGUARD_AGENT_UNDER="$(QEMU) $$dir/deviceagent-arm.test" $(GO) test -count=1 -run '^TestSIGKILLLoop' ./cmd/deviceagent
	@# the refusals (data directory, secret files, flags) fork nothing: the 32-bit test itself under qemu
	GOOS=linux GOARCH=arm GOARM=7 $(GO) test -trimpath -count=1 -exec $(QEMU) \
	  -run 'DataDir|Planted|FIFO|Symlink|SecretFiles|TrustedFiles|Sizes|FlagErrors|UsageAndErrors|MutualTLSFromFiles|RunLogsNoSecret' ./cmd/deviceagent
endif
endif

# Benchmarks, with benchstat summarising; compare against the alternatives in
# the same run (see docs/measurements.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 10 ./reconnect/ > bench.out
	$(BENCHSTAT) -col /impl -filter '.name:NextDelay' bench.out
	$(BENCHSTAT) -filter '.name:PolicyDelay' bench.out
	$(GO) test -run '^$$' -bench Recorder -benchmem -benchtime 1000000x -count 10 ./testbroker/ > bench-testbroker.out
	$(GO) test -run '^$$' -bench BrokerConnect -benchtime 9000x -count 10 ./testbroker/ >> bench-testbroker.out
	$(BENCHSTAT) bench-testbroker.out
	$(GO) test -run '^$$' -bench ConnectedFootprint -benchtime 2000x -count 6 ./device/ > bench-device.out
	$(BENCHSTAT) -col /impl bench-device.out
	$(GO) test -run '^$$' -bench Enqueue -benchmem -count 6 ./publisher/ > bench-publisher.out
	$(BENCHSTAT) -col /store bench-publisher.out
	# what a connection costs on the wire engine and on the agents: 18,000
	# devices in children through a throttled restart (docs/wire.md)
	$(GO) test -run '^$$' -bench CostOfAConnection -benchtime 1x -count 3 ./cmd/devicesim/ > bench-cost.out
	$(BENCHSTAT) -col /engine bench-cost.out
	$(GO) test -run '^$$' -bench DropAll -benchtime 3x -count 6 ./internal/fleetsim/ > bench-fleetsim.out
	$(BENCHSTAT) -col /engine bench-fleetsim.out
	# the virtual engine against its floor, a bare event loop of the same model,
	# on the million-device throttled restart of docs/large-fleets.md, both
	# compiled as devicesim is (its profile-guided optimization)
	$(GO) test -pgo=cmd/devicesim/default.pgo -run '^$$' -bench MillionThrottledRestart -benchtime 1x -count 6 ./internal/virtual/ > bench-virtual.out
	$(BENCHSTAT) -col /impl bench-virtual.out
	# the virtual engine's output at a million devices, byte for byte as before
	$(GO) test -count=1 -run '^TestVirtualEngineGolden$$' ./internal/virtual/ -args -golden.million
	$(GO) test -run '^$$' -bench Judge10M -benchmem -count 6 ./internal/stormstats/ > bench-stormstats.out
	$(BENCHSTAT) -col /arrivals bench-stormstats.out
	# Ten processes, not -count 10: each starts its own mosquitto and runs
	# direct, relay and proxy side by side, so drift does not favour one.
	for i in 1 2 3 4 5 6 7 8 9 10; do \
	  $(GO) test -run '^$$' -bench ConnectLatency -benchtime 10000x -count 1 ./faultproxy/ || exit 1; \
	done > bench-faultproxy.out
	$(BENCHSTAT) -col /impl bench-faultproxy.out
	$(GO) test -run '^$$' -bench SilentConnections -benchtime 1x -count 6 ./faultproxy/ > bench-silent.out
	$(BENCHSTAT) -col /path bench-silent.out

# One broker, real paho clients, all connecting at once: 100,000 in-memory
# and 9,000 over TCP (two descriptors each under this machine's 20,000).
scale:
	HERDGUARD_SCALE=1 $(GO) test -run TestScale -v -timeout 30m ./testbroker/

# A short bounded run of every fuzz target.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

sim:
ifeq ($(wildcard cmd/devicesim/*.go),)
	@echo "cmd/devicesim is not built yet (issue 6): make sim has nothing to run"; exit 1
else
	$(GO) run ./cmd/devicesim run
endif
