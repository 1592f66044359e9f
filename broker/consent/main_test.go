// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package consent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// The helper process: this test binary, re-executed to play the role
// "prompt" (helperproc). The prompt tests start it with a pseudo-terminal
// as its controlling terminal (or none), and it calls the prompt provider
// for real.
func TestMain(m *testing.M) {
	roles := helperproc.Roles{"prompt": promptRole, "console": consoleRole}
	for name, role := range platformRoles {
		roles[name] = role
	}
	os.Exit(helperproc.Run(m, roles))
}

// platformRoles are the helper's roles of one platform's tests (their
// files' init adds them).
var platformRoles = helperproc.Roles{}

// helperJob is what a helper reads on stdin.
type helperJob struct {
	TimeoutMS int       `json:"timeoutMs"`
	Requests  []Request `json:"requests"`
	// LogToTerminal has the helper write numbered log lines to the terminal
	// all along, through a HeldOutput the prompt holds.
	LogToTerminal bool `json:"logToTerminal"`
}

// helperResult is what a helper writes on stdout for each request.
type helperResult struct {
	Approved   []string `json:"approved"`
	Provider   string   `json:"provider"`
	Error      string   `json:"error"`
	NoTerminal bool     `json:"noTerminal"`
	Deadline   bool     `json:"deadline"`
}

// helperOutput is the helper's whole answer.
type helperOutput struct {
	Results  []helperResult `json:"results"`
	Terminal bool           `json:"terminal"` // TerminalAvailable()
	Default  string         `json:"default"`  // the provider Default chose
	// With LogToTerminal: the log lines written in all, and while Ask ran.
	LogLines, LogLinesDuringAsk int
}

// promptRole asks every request of the job at once, each on its own
// goroutine, through one Prompt, and reports the decisions.
func promptRole([]string) error {
	var job helperJob
	if err := json.NewDecoder(os.Stdin).Decode(&job); err != nil {
		return fmt.Errorf("the job: %w", err)
	}
	opts := []Option{WithTimeout(time.Duration(job.TimeoutMS) * time.Millisecond)}
	var (
		logged   atomic.Int64
		stopLog  = make(chan struct{})
		logEnded = make(chan struct{})
	)
	if job.LogToTerminal {
		tty, err := openTerminal()
		if err != nil {
			return fmt.Errorf("open the terminal: %w", err)
		}
		defer tty.Close()
		held := NewHeldOutput(tty, nil)
		opts = append(opts, WithHeldOutput(held))
		go func() {
			defer close(logEnded)
			for {
				fmt.Fprintf(held, "[INFO] log line %d\n", logged.Add(1))
				select {
				case <-stopLog:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		for logged.Load() < 3 { // some lines before the question
			time.Sleep(time.Millisecond)
		}
	} else {
		close(logEnded)
	}
	p, err := NewPrompt(opts...)
	if err != nil {
		return err
	}
	out := helperOutput{Results: make([]helperResult, len(job.Requests)), Terminal: TerminalAvailable()}
	switch Default().(type) {
	case *Prompt:
		out.Default = NamePrompt
	case Deny:
		out.Default = NameDeny
	}
	var wg sync.WaitGroup
	before := logged.Load()
	for i, req := range job.Requests {
		wg.Go(func() {
			d, err := p.Ask(context.Background(), req)
			r := helperResult{Approved: d.Approved, Provider: d.Provider}
			if err != nil {
				r.Error = err.Error()
				r.NoTerminal = errors.Is(err, ErrNoTerminal)
				r.Deadline = errors.Is(err, context.DeadlineExceeded)
			}
			out.Results[i] = r
		})
	}
	wg.Wait()
	out.LogLinesDuringAsk = int(logged.Load() - before)
	if job.LogToTerminal {
		for logged.Load() < before+int64(out.LogLinesDuringAsk)+3 { // some lines after the question
			time.Sleep(time.Millisecond)
		}
		close(stopLog)
	}
	<-logEnded
	out.LogLines = int(logged.Load())
	return json.NewEncoder(os.Stdout).Encode(out)
}
