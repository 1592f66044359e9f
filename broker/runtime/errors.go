// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package runtime

import "fmt"

// ConfigError is a setting the runtime cannot use: a root, the state
// directory, the audit directory or a witness, a policy set that does not
// load, the OPA configuration, the sandbox. Its message names the setting as
// fsbroker's flags and config file do (cmd/fsbroker exits 2 with it).
type ConfigError struct{ msg string }

// Error returns the message, which names the setting.
func (e *ConfigError) Error() string { return e.msg }

// configErrorf formats a *ConfigError.
func configErrorf(format string, args ...any) error {
	return &ConfigError{msg: fmt.Sprintf(format, args...)}
}
