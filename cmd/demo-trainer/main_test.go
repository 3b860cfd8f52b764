package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trainstep/trainstep/cmd/demo-trainer/internal/trainer"
)

func envFrom(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestParseSettings(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(trainer.Settings) bool
		wantErr string
	}{
		{name: "defaults", check: func(s trainer.Settings) bool { return s == trainer.DefaultSettings() }},
		{name: "every training flag", args: []string{"--steps=7", "--lr=0.2", "--features=3", "--samples=99", "--seed=5", "--step-delay=1s", "--target-loss=0.5"},
			check: func(s trainer.Settings) bool {
				return s.Steps == 7 && s.LR == 0.2 && s.Features == 3 && s.Samples == 99 && s.Seed == 5 && s.StepDelay == time.Second && s.TargetLoss == 0.5
			}},
		{name: "environment fills what flags leave unset", env: map[string]string{"DEMO_STEPS": "7", "DEMO_STEP_DELAY": "100ms", "DEMO_TARGET_LOSS": "0.1"},
			check: func(s trainer.Settings) bool {
				return s.Steps == 7 && s.StepDelay == 100*time.Millisecond && s.TargetLoss == 0.1
			}},
		{name: "a flag beats the environment", args: []string{"--steps=9"}, env: map[string]string{"DEMO_STEPS": "7"},
			check: func(s trainer.Settings) bool { return s.Steps == 9 }},
		{name: "termination message path from the environment", env: map[string]string{"TRAINSTEP_TERMINATION_MESSAGE_PATH": "/x/metrics"},
			check: func(s trainer.Settings) bool { return s.TerminationMessagePath == "/x/metrics" }},
		{name: "termination message default", check: func(s trainer.Settings) bool { return s.TerminationMessagePath == "/dev/termination-log" }},
		{name: "malformed environment value", env: map[string]string{"DEMO_LR": "fast"}, wantErr: "DEMO_LR"},
		{name: "value out of range", args: []string{"--steps=0"}, wantErr: "--steps"},
		{name: "negative delay from the environment", env: map[string]string{"DEMO_STEP_DELAY": "-1s"}, wantErr: "--step-delay"},
		{name: "stray argument", args: []string{"train"}, wantErr: "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseSettings(tc.args, envFrom(tc.env), &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(s) {
				t.Errorf("settings %+v", s)
			}
		})
	}
}

func TestBadTopologyIsAUsageError(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{name: "TF_CONFIG not JSON", env: map[string]string{"TF_CONFIG": "{"}, wantErr: "TF_CONFIG"},
		{name: "RANK without WORLD_SIZE", env: map[string]string{"RANK": "1"}, wantErr: "WORLD_SIZE"},
		{name: "RANK beyond WORLD_SIZE", env: map[string]string{"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "m", "MASTER_PORT": "1"}, wantErr: "RANK"},
		{name: "no MASTER_ADDR for several ranks", env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1"}, wantErr: "MASTER_ADDR"},
		{name: "no MASTER_PORT for several ranks", env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "m"}, wantErr: "MASTER_PORT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), nil, envFrom(tc.env), &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d and a message naming %s", code, stderr.String(), exitUsage, tc.wantErr)
			}
		})
	}
}
