// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

// Package jsonx holds the JSON helpers that the hand-written encoders and
// the scanners of fsbroker share, one copy each: AppendString and its
// member helpers write byte for byte what encoding/json writes (the audit
// record, the policy input and the files/read reply are encoded with them,
// without reflection), and ObjectScanner with SkipSpace, SkipString,
// SkipValue and Unquote finds the members of a JSON object without decoding
// it (a request's members, the params without their content, the policy
// input's time member). Numbers need no helper: strconv's AppendInt,
// AppendUint and AppendBool write what encoding/json writes for integers and
// booleans.
//
// It is internal to the module and imports nothing of it, so that audit,
// engine and broker can all import it.
package jsonx
