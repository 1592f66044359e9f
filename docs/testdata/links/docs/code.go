// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package docs

// A code file a Markdown file links to, with a line anchor.
