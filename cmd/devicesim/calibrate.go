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
	fmt.Fprintf(stdout, "the same runs on both engines, %d devices, agents at %gx; within 10 %% (or 1 s, 0.1 attempts), verdicts equal\n\n", *devices, *scale)
	if *seeds < 1 {
		return fmt.Errorf("-seeds must be >= 1, got %d", *seeds)
	}
	var list []uint64
	for s := range *seeds {
		list = append(list, uint64(s+1))
	}
	cal := &experiment.Calibration{Devices: *devices, TimeScale: *scale, Seeds: list}
	cal.Table(stdout) // the header; rows follow as they are measured
	cal, err := experiment.Calibrate(ctx, experiment.CalibrationCells(), *devices, *scale, list, nil, stdout)
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
