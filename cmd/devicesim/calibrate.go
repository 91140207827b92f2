package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/herdguard/herdguard/internal/datadir"
	"github.com/herdguard/herdguard/internal/experiment"
)

func calibrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devicesim calibrate", calibrateModes, stderr)
	devices := fs.Int("devices", 2000, "devices in each run")
	// The default applies to every cell but those that keep a scale of their own.
	scaleUsage := "the agents' time scale"
	for _, c := range experiment.CalibrationCells() {
		if c.TimeScale > 0 {
			scaleUsage += fmt.Sprintf("; %s always", c)
		}
	}
	scale := fs.Float64("time-scale", 5, scaleUsage)
	seeds := fs.Int("seeds", 3, "seeds per cell (1, 2, ...): each figure is the mean over them, the same seeds on both engines")
	out := fs.String("out", "devicesim-report/calibration", "directory for calibration.json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	bounds := experiment.DefaultCalibrationBounds
	fmt.Fprintf(stdout, "the same runs on the agents, the wire engine and the model, %d devices, real devices at %gx; "+
		"within %.0f %% (or %g s, %g attempts), verdicts equal\n\n", *devices, *scale, 100*bounds.Share, bounds.TimeS, bounds.Count)
	if *seeds < 1 {
		return fmt.Errorf("-seeds must be >= 1, got %d", *seeds)
	}
	var list []uint64
	for s := range *seeds {
		list = append(list, uint64(s+1))
	}
	cal := &experiment.Calibration{Devices: *devices, TimeScale: *scale, Seeds: list, Wire: true}
	cal.Table(stdout) // the header; rows follow as they are measured
	cal, err := experiment.Calibrate(ctx, experiment.CalibrationConfig{Cells: experiment.CalibrationCells(), Devices: *devices,
		TimeScale: *scale, Seeds: list, Wire: true, Progress: stdout})
	if cal == nil {
		return err
	}
	b, jerr := json.MarshalIndent(cal, "", "  ")
	if jerr == nil {
		jerr = datadir.WriteFileIn(*out, "calibration.json", b)
	}
	if err == nil && !cal.Agree {
		err = errors.New("the engines disagree")
	}
	return errors.Join(err, jerr)
}
