// Copyright 2026 The fsbroker Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// watchedDir is a directory whose file system's space is reported: role
// names it ("state", "audit").
type watchedDir struct {
	role, path string
}

// space is what a file system has: bytes an unprivileged process may still
// write, and its size.
type space struct {
	avail, size uint64
}

// filesystemCollector reports, at each scrape, the space of the file
// systems holding its directories (statfs). A directory whose file system
// cannot be asked is left out of that scrape.
type filesystemCollector struct {
	dirs        []watchedDir
	avail, size *prometheus.Desc
}

func newFilesystemCollector(dirs []watchedDir) *filesystemCollector {
	labels := []string{"dir", "path"}
	return &filesystemCollector{
		dirs: dirs,
		avail: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "filesystem", "avail_bytes"),
			"Bytes free for an unprivileged process on the file system holding the broker's state (dir=state) or audit (dir=audit) directory.",
			labels, nil),
		size: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "filesystem", "size_bytes"),
			"Size of the file system holding the broker's state (dir=state) or audit (dir=audit) directory.",
			labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *filesystemCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.avail
	ch <- c.size
}

// Collect implements prometheus.Collector.
func (c *filesystemCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.dirs {
		s, err := spaceOf(d.path)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.avail, prometheus.GaugeValue, float64(s.avail), d.role, d.path)
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(s.size), d.role, d.path)
	}
}
