package consent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fsbroker/fsbroker/internal/helperproc"
)

// The helper process: this test binary, re-executed to play the role
// "prompt" (helperproc). The prompt tests start it with a pseudo-terminal
// as its controlling terminal (or none), and it calls the prompt provider
// for real.
func TestMain(m *testing.M) {
	os.Exit(helperproc.Run(m, helperproc.Roles{"prompt": promptRole}))
}

// helperJob is what a helper reads on stdin.
type helperJob struct {
	TimeoutMS int       `json:"timeoutMs"`
	Requests  []Request `json:"requests"`
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
}

// promptRole asks every request of the job at once, each on its own
// goroutine, through one Prompt, and reports the decisions.
func promptRole([]string) error {
	var job helperJob
	if err := json.NewDecoder(os.Stdin).Decode(&job); err != nil {
		return fmt.Errorf("the job: %w", err)
	}
	p, err := NewPrompt(WithTimeout(time.Duration(job.TimeoutMS) * time.Millisecond))
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
	return json.NewEncoder(os.Stdout).Encode(out)
}
