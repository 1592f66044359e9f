// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package schema_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fsbroker/fsbroker/schema"
)

func ExampleValidator_ValidateParams() {
	v, err := schema.New()
	if err != nil {
		panic(err) // an embedded schema is broken
	}
	fmt.Println(v.ValidateParams("files/read", json.RawMessage(`{"path":"project/README.md","length":4096}`)))

	err = v.ValidateParams("files/read", json.RawMessage(`{"path":5,"offset":-1,"mode":"r"}`))
	var invalid *schema.Error
	if errors.As(err, &invalid) {
		for _, fe := range invalid.Errors {
			fmt.Printf("%s: %s\n", fe.Pointer, fe.Message)
		}
	}

	err = v.ValidateParams("files/chmod", nil)
	fmt.Println(errors.Is(err, schema.ErrNoSchema))
	// Output:
	// <nil>
	// /mode: unknown property
	// /offset: minimum: got -1, want 0
	// /path: got number, want string
	// true
}

func ExampleValidator_ValidateConfig() {
	v, err := schema.New()
	if err != nil {
		panic(err)
	}
	fmt.Println(v.ValidateConfig(json.RawMessage(`{"roots":[{"path":"/srv/project","mount":".."}],"log":{"level":"verbose"}}`)))
	// Output:
	// invalid config: /log/level: value must be one of 'trace', 'debug', 'info', 'warn', 'error'; /roots/0/mount: value is not allowed
}
