// franz-bench: franz-go (github.com/twmb/franz-go) as one client of kprod's benches. `seed`
// (seed.go) runs the latency bench's seed scenario; `bench` serves the e2e bench
// (tests/src/bin/bench-e2e.rs), speaking the same stdin/stdout protocol as the Java
// reference producer's `bench` command (tests/java, Bench.java), so that the bench drives
// both alike (`kfake`, in kfake.go, runs franz-go's fake cluster as a test broker instead;
// `phases`, in phases.go, runs a scenario phase by phase for a test):
//
//	franz-bench --bootstrap B [--size BYTES] [--partitions P] [--keyless yes|no]
//	    [--linger-ms MS] [--batch-size BYTES] [--timeout-ms MS] [--max-kafka-version V]
//
// It prints READY, then runs one run per stdin line `RUN TOPIC RECORDS`: a new client, one
// warm-up record to partition 0 (connection, metadata and producer id not timed), MEASURING,
// then RECORDS records (record i: an 8-byte big-endian counter and a..z filler, to partition
// i mod P unless --keyless yes), waiting for every acknowledgement, then one line
//
//	BENCH records=M failed=F unacknowledged=U seconds=S cpu_seconds=C jit_ms=-1 gc_ms=G gc_count=N first_error=E
//
// The client is closed after the line, outside the window. One shared promise counts the
// acknowledgements (no per-record closure). CPU is getrusage(RUSAGE_SELF), user + system,
// every thread of this process, over the same window as the wall time; gc_ms is the GC's
// stop-the-world pause total over the window, for context.
//
// Settings: franz-go's idempotent defaults (acks all, idempotent writes, its own in-flight
// limit for idempotent producers), with linger.ms, batch.size (ProducerBatchMaxBytes), no
// compression (franz-go's default prefers snappy; the other clients send uncompressed), and
// the Java producer's 32 MiB buffer.memory as MaxBufferedBytes (MaxBufferedRecords, 10,000 by
// default, raised so that the bytes bound is the one that holds). --max-kafka-version caps
// the request versions franz-go tries at those of that Kafka release (kgo.MaxVersions): Tansu
// 0.6.0 closes the connection on an ApiVersions request newer than its v4 instead of
// answering UNSUPPORTED_VERSION, so the bench passes 3.9 there.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

func say(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}

// acks counts one run's acknowledgements; its promise is shared by every record.
type acks struct {
	wg      sync.WaitGroup
	failed  atomic.Int64
	pending atomic.Int64
	first   atomic.Pointer[string]
}

func (a *acks) promise(_ *kgo.Record, err error) {
	if err != nil {
		a.failed.Add(1)
		s := strings.Join(strings.Fields(err.Error()), "_")
		a.first.CompareAndSwap(nil, &s)
	}
	a.pending.Add(-1)
	a.wg.Done()
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func gcFigures() (pauseNs uint64, count uint32) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.PauseTotalNs, m.NumGC
}

type settings struct {
	bootstrap  []string
	size       int
	partitions int
	keyless    bool
	linger     time.Duration
	batchSize  int
	timeout    time.Duration
	maxVersion *kversion.Versions
}

func (s *settings) client() (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.bootstrap...),
		kgo.ClientID("bench-franz"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(s.linger),
		kgo.ProducerBatchMaxBytes(int32(s.batchSize)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedBytes(32 << 20),
		kgo.MaxBufferedRecords(1 << 30),
	}
	if !s.keyless {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if s.maxVersion != nil {
		opts = append(opts, kgo.MaxVersions(s.maxVersion))
	}
	return kgo.NewClient(opts...)
}

func (s *settings) run(topic string, records int64, filler []byte) error {
	cl, err := s.client()
	if err != nil {
		return fmt.Errorf("creating the client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	warm := &kgo.Record{Topic: topic, Partition: 0, Value: append([]byte(nil), filler...)}
	err = cl.ProduceSync(ctx, warm).FirstErr()
	cancel()
	if err != nil {
		return fmt.Errorf("warm-up record: %w", err)
	}
	a := &acks{}
	a.wg.Add(int(records))
	a.pending.Store(records)
	say("MEASURING")
	gc0, n0 := gcFigures()
	cpu0 := cpuSeconds()
	t0 := time.Now()
	bg := context.Background()
	for i := int64(0); i < records; i++ {
		v := make([]byte, len(filler))
		copy(v, filler)
		for k := 0; k < 8; k++ {
			v[k] = byte(uint64(i) >> (56 - 8*k))
		}
		r := &kgo.Record{Topic: topic, Value: v}
		if !s.keyless {
			r.Partition = int32(i % int64(s.partitions))
		}
		cl.Produce(bg, r, a.promise)
	}
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.timeout):
	}
	secs := time.Since(t0).Seconds()
	cpu := cpuSeconds() - cpu0
	gc1, n1 := gcFigures()
	first := "none"
	if p := a.first.Load(); p != nil {
		first = *p
	}
	say("BENCH records=%d failed=%d unacknowledged=%d seconds=%.6f cpu_seconds=%.6f jit_ms=-1 gc_ms=%d gc_count=%d first_error=%s",
		records, a.failed.Load(), a.pending.Load(), secs, cpu, (gc1-gc0)/1_000_000, n1-n0, first)
	return nil
}

func parseVersion(v string) *kversion.Versions { return kversion.FromString(v) }

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "seed" {
		os.Exit(seed(os.Args[2:]))
	}
	if len(os.Args) >= 2 && os.Args[1] == "kfake" {
		os.Exit(kfakeMain(os.Args[2:]))
	}
	if len(os.Args) >= 2 && os.Args[1] == "phases" {
		os.Exit(phasesMain(os.Args[2:]))
	}
	if len(os.Args) < 2 || os.Args[1] != "bench" {
		fmt.Fprintln(os.Stderr, "usage: franz-bench bench|seed|kfake|phases (seed: see seed.go; kfake: see kfake.go; phases: see phases.go) --bootstrap B [--size BYTES] [--partitions P] [--keyless yes|no] [--linger-ms MS] [--batch-size BYTES] [--timeout-ms MS] [--max-kafka-version V]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "bootstrap servers, comma-separated")
	size := fs.Int("size", 100, "value size, at least 8")
	partitions := fs.Int("partitions", 4, "record i goes to partition i mod P")
	keyless := fs.String("keyless", "no", "yes: no partition, franz-go's partitioner picks")
	linger := fs.Int("linger-ms", 5, "linger.ms")
	batch := fs.Int("batch-size", 16384, "batch.size (ProducerBatchMaxBytes)")
	timeout := fs.Int("timeout-ms", 300000, "longest a run may wait for its acknowledgements")
	maxVersion := fs.String("max-kafka-version", "", "cap request versions at this Kafka release's (e.g. 3.9)")
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	if *bootstrap == "" || *size < 8 || *partitions < 1 || (*keyless != "yes" && *keyless != "no") {
		fmt.Fprintln(os.Stderr, "franz-bench: --bootstrap is required, --size at least 8, --partitions at least 1, --keyless yes or no")
		os.Exit(2)
	}
	s := &settings{
		bootstrap:  strings.Split(*bootstrap, ","),
		size:       *size,
		partitions: *partitions,
		keyless:    *keyless == "yes",
		linger:     time.Duration(*linger) * time.Millisecond,
		batchSize:  *batch,
		timeout:    time.Duration(*timeout) * time.Millisecond,
	}
	if *maxVersion != "" {
		if s.maxVersion = parseVersion(*maxVersion); s.maxVersion == nil {
			fmt.Fprintf(os.Stderr, "franz-bench: --max-kafka-version: %q is not a Kafka version\n", *maxVersion)
			os.Exit(2)
		}
	}
	filler := make([]byte, s.size)
	for j := range filler {
		filler[j] = byte('a' + j%26)
	}
	say("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		w := strings.Fields(in.Text())
		if len(w) != 3 || w[0] != "RUN" {
			fmt.Fprintf(os.Stderr, "franz-bench: expected 'RUN TOPIC RECORDS' on stdin, got %q\n", in.Text())
			os.Exit(2)
		}
		records, err := strconv.ParseInt(w[2], 10, 64)
		if err != nil || records < 1 {
			fmt.Fprintf(os.Stderr, "franz-bench: RUN: %q is not a record count\n", w[2])
			os.Exit(2)
		}
		if err := s.run(w[1], records, filler); err != nil {
			fmt.Fprintf(os.Stderr, "franz-bench: %v\n", err)
			os.Exit(1)
		}
	}
}
